"""What `render()` shows: a text snapshot ("ansi") and a small picture over time ("rgb_array").

Both are for people watching an episode, not for the agent: they show what a cluster operator
sees (job ids, types, GPU counts, progress, the queue, the agent's last decisions), never a
hidden label. The picture has one column per decision point (the latest `width`), stacked from
the bottom by the GPUs each job type holds, free GPUs dark.
"""

from __future__ import annotations

from collections import deque

import numpy as np

from ..sim.cluster import Cluster
from ..sim.view import current_progress

RENDER_MODES = ("ansi", "rgb_array")
TYPE_COLOURS = {"lora": (44, 160, 44), "dpo": (31, 119, 180), "rlhf": (255, 127, 14)}
FREE_COLOUR = (40, 40, 40)
LISTED = 8        # jobs listed per section of the text snapshot
DECISIONS = 6     # last decisions kept for the text snapshot


class ClusterRenderer:
    """Keeps the little history that rendering needs, fed once per decision point."""

    def __init__(self, total_gpus: int, width: int = 128, height: int = 64) -> None:
        self.total_gpus, self.height = total_gpus, height
        self.columns: deque[tuple[int, ...]] = deque(maxlen=width)
        self.decisions: deque[str] = deque(maxlen=DECISIONS)

    def reset(self) -> None:
        self.columns.clear()
        self.decisions.clear()

    def record(self, cluster: Cluster) -> None:
        """One column: GPUs held by each job type now."""
        held = dict.fromkeys(TYPE_COLOURS, 0)
        for job in cluster.running.values():
            held[job.job_type] += job.gpus
        self.columns.append(tuple(held.values()))

    def decided(self, now: float, text: str) -> None:
        self.decisions.append(f"t={now:8.1f}  {text}")

    def ansi(self, cluster: Cluster | None) -> str:
        if cluster is None:
            return "EvalStopCluster: call reset() first\n"
        lines = [f"t={cluster.now:.1f} min  free GPUs {cluster.free_gpus}/{cluster.total_gpus}  "
                 f"running {len(cluster.running)}  queued {len(cluster.waiting)}"]
        lines += _section("running", [
            f"#{j.job_id:<5d} {j.job_type:5s} {j.gpus} GPUs  progress "
            f"{current_progress(j, cluster.now):.2f}" for j in cluster.running.values()])
        lines += _section("queued", [
            f"#{j.job_id:<5d} {j.job_type:5s} {j.gpus} GPUs  waiting "
            f"{cluster.now - j.arrival:.0f} min" for j in cluster.waiting.values()])
        lines += _section("last decisions", list(self.decisions))
        return "\n".join(lines) + "\n"

    def rgb(self) -> np.ndarray:
        """(height, max(1, columns), 3) uint8: GPU occupancy by job type over decision points."""
        image = np.empty((self.height, max(1, len(self.columns)), 3), dtype=np.uint8)
        image[:] = FREE_COLOUR
        scale = self.height / max(1, self.total_gpus)
        for x, held in enumerate(self.columns):
            stacked = 0
            for colour, gpus in zip(TYPE_COLOURS.values(), held, strict=True):
                bottom = round(stacked * scale)
                stacked += gpus
                image[self.height - round(stacked * scale):self.height - bottom, x] = colour
        return image


def _section(title: str, rows: list[str]) -> list[str]:
    shown = [f"  {r}" for r in rows[:LISTED]]
    if len(rows) > LISTED:
        shown.append(f"  ... and {len(rows) - LISTED} more")
    return [f"{title}:", *(shown or ["  (none)"])]
