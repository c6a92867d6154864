"""`evalstop-bench replay ... --plot OUT`: each replayed run's curve and what each detector did.

Per run (a grid of panels for several): the eval curve in the metric's own units at the
trainer's steps, the run's best eval (a black star), each detector's stop (a vertical line in the
detector's colour, or "never stopped" in the legend) and the checkpoint stop-and-save keeps (a
ring in that colour on the curve). Drawn in the reports' style (`analysis.figure_style`) and
written atomically; the format follows OUT's suffix.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

from evalstop_gym.traces.logs import LogError, LoggedRun

from ..analysis.figure_style import DOUBLE, OKABE_ITO, PALE, policy_styles, style
from ..durable import atomic_path

SUFFIXES = (".png", ".pdf", ".svg")
COLUMNS_MAX = 3           # panels per row of the grid
PANEL = (3.6, 2.7)        # in: one run's panel, wide enough for its legend to read at 100%


def check_plot_path(path: Path) -> None:
    """OUT's format is one matplotlib writes and its folder exists (checked before replaying)."""
    if path.suffix.lower() not in SUFFIXES:
        raise LogError(f"--plot {path}: expected a file ending in {', '.join(SUFFIXES)}")
    if not path.parent.is_dir():
        raise LogError(f"--plot {path}: folder {path.parent} does not exist; create it first")


def grid(n: int) -> tuple[int, int]:
    """(rows, columns) of the panels of n runs."""
    cols = min(n, COLUMNS_MAX)
    return math.ceil(n / cols), cols


def distinct_styles(names: Sequence[str]) -> dict[str, dict[str, Any]]:
    """The reports' colour per rule family, except that two detectors of one figure never share
    a colour (families past the palette's eight wrap around): a later one takes the first free
    colour of the palette."""
    styles = policy_styles(names)
    used: set[str] = set()
    for name in names:
        look = styles[name]
        if look["color"] in used:
            free = [c for c in OKABE_ITO if c not in used and c not in PALE]
            if free:
                look.update(color=free[0], linestyle="-")
        used.add(look["color"])
    return styles


def plot_replay(runs: Sequence[LoggedRun], table: pd.DataFrame, path: Path) -> Path:
    """Draw every run of `table` (the replay's rows) on its own panel and save to `path`."""
    import matplotlib

    matplotlib.use("Agg", force=False)
    import matplotlib.pyplot as plt

    check_plot_path(path)
    if not runs:
        raise LogError(f"--plot {path}: no run to draw")
    rows, cols = grid(len(runs))
    styles = distinct_styles(table["detector"].unique())
    with style():
        width = DOUBLE if cols > 1 else PANEL[0] * 1.35
        fig, axes = plt.subplots(rows, cols, squeeze=False,
                                 figsize=(max(width, PANEL[0] * cols), PANEL[1] * rows * 1.25))
        for i, run in enumerate(runs):
            mine = table[(table["run_id"] == run.run_id) & (table["source"] == run.source)]
            draw_run(axes[i // cols][i % cols], run, mine, styles)
        for j in range(len(runs), rows * cols):
            axes[j // cols][j % cols].set_visible(False)
        with atomic_path(path) as tmp:
            fig.savefig(tmp, format=path.suffix.lower().lstrip("."), dpi=200)
        plt.close(fig)
    return path


def draw_run(ax: Any, run: LoggedRun, rows: pd.DataFrame,
             styles: dict[str, dict[str, Any]]) -> None:
    """One run's panel: curve, best eval, each detector's stop and kept checkpoint."""
    ax.plot(run.steps, run.values, color="#555555", marker="o", markersize=2.5, linewidth=1.0,
            label=f"{run.metric} (eval)", zorder=2)
    if len(rows):
        first = rows.iloc[0]
        ax.plot([first["best_step"]], [first["best_value"]], marker="*", markersize=9,
                color="black", linestyle="none", zorder=4,
                label=f"best: step {first['best_step']:g}, {first['best_value']:.4g}")
    for _, row in rows.iterrows():
        look = styles[row["detector"]]
        colour = look["color"]
        if row["stopped"]:
            ax.axvline(row["stop_step"], color=colour, linestyle=look["linestyle"],
                       linewidth=1.1, zorder=1)
            ax.plot([row["stop_step"]], [row["value_at_stop"]], color=colour,
                    linestyle=look["linestyle"], marker=look["marker"], markersize=5,
                    zorder=3, label=f"{row['detector']}: stop at {row['stop_step']:g}")
        else:
            ax.plot([], [], color=colour, linestyle=look["linestyle"],
                    label=f"{row['detector']}: never stopped")
        ax.plot([row["kept_step"]], [row["kept_value"]], marker="o", markersize=7,
                markerfacecolor="none", markeredgecolor=colour, markeredgewidth=1.3,
                linestyle="none", zorder=3,
                label=f"  kept: step {row['kept_step']:g}, {row['kept_value']:.4g}")
    better = "lower" if run.mode == "min" else "higher"
    ax.set_xlabel("step")
    ax.set_ylabel(f"{run.metric} ({better} is better)")
    title = run.run_id if len(run.run_id) <= 40 else f"...{run.run_id[-37:]}"
    ax.set_title(title)
    ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=1, fontsize=7,
              handlelength=1.8)
