"""MedianPruner: cross-job pruning in the manner of Optuna's `MedianPruner`.

A job is stopped when its latest eval falls below the `percentile` (50: the median) of the evals
that completed jobs of the same type had at the same progress (linearly interpolated along each
completed job's eval history). As in Optuna, only jobs that ran to completion form the history
(fed through `on_job_end`), nothing is pruned until `n_min` such jobs exist, and no job is pruned
before progress `warmup`. `reset()` forgets the history.
Name: `MedianPruner[-<percentile>[-<n_min>]]` (defaults 50, 5; warmup 0.3).

It judges a job against its peers, not against its own past, so it prunes weak jobs as readily as
reward-hacking ones: expect it to trade precision for recall.
"""

from __future__ import annotations

import numpy as np

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import ROUNDING
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, stop
from .registry import register_detector


class MedianPruner(DetectorBase):
    """MedianPruner: stop a job whose latest eval falls below its peers' at the same progress.

    Optuna's rule: the reference is the `percentile` (50: the median) of completed same-type
    jobs' evals at that progress, once `n_min` have completed and past progress `warmup`. It
    judges a job against its peers, not its own past, so it prunes weak healthy jobs as readily
    as hacking ones: it trades precision for recall. Needs the evals, progress and ended runs
    (a `MonitorGroup` on real runs). Name: `MedianPruner[-<percentile>[-<n_min>]]`.
    """

    needs = ("evals", "progress", "runs")

    def __init__(self, percentile: float = 50.0, n_min: int = 5, warmup: float = 0.3) -> None:
        if not 0 <= percentile <= 100 or n_min < 1 or not 0 <= warmup < 1:
            raise ValueError(f"MedianPruner: need percentile in [0, 100], n_min >= 1, warmup in "
                             f"[0, 1); got {percentile}, {n_min}, {warmup}")
        self.percentile, self.n_min, self.warmup = percentile, n_min, warmup
        self.history: dict[str, list[tuple[np.ndarray, np.ndarray]]] = {}
        default = percentile == 50.0 and n_min == 5
        self.name = "MedianPruner" if default else f"MedianPruner-{percentile:g}-{n_min}"

    def has_peers(self, job_type: str) -> bool:
        """Whether enough completed peers of `job_type` exist to judge a run against them."""
        return len(self.history.get(job_type, [])) >= self.n_min

    def reference(self, job_type: str, progress: float) -> float | None:
        """The percentile of completed same-type jobs' evals at `progress`, once warmed up."""
        done = self.history.get(job_type, [])
        if len(done) < self.n_min:
            return None
        at = [float(np.interp(progress, p, s)) for p, s in done]
        return float(np.percentile(at, self.percentile))

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if not job.eval_scores or job.eval_progress[-1] < self.warmup - ROUNDING:
            return CONTINUE
        ref = self.reference(job.job_type, job.eval_progress[-1])
        if ref is not None and job.eval_scores[-1] < ref:
            # no values in the reason: it reads the same whatever the metric's units
            return stop(f"eval below the peers' p{self.percentile:g} at progress "
                        f"{job.eval_progress[-1]:.2f}")
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        if job.state == "completed" and job.eval_scores:
            # Kept as arrays (the values np.interp would convert them to, copied once), so an
            # interpolation is a binary search rather than a conversion of the whole history.
            peer = (np.array(job.eval_progress, dtype=float),
                    np.array(job.eval_scores, dtype=float))
            self.history.setdefault(job.job_type, []).append(peer)

    def reset(self) -> None:
        self.history.clear()


def _factory(args: list[str]) -> MedianPruner:
    percentile = float(args[0]) if args else 50.0
    return MedianPruner(percentile, int(args[1]) if len(args) > 1 else 5)


register_detector("MedianPruner", _factory)
