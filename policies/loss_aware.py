"""SLAQ-style quality-aware scheduling: GPUs go to jobs whose training loss improves fastest.

The improvement is the relative loss drop between a job's last two check points. Jobs with fewer
than two checks have no measured rate yet and go first, as SLAQ favours fresh jobs.
"""

from __future__ import annotations

from evalstop_gym.sim.native import KEY_LOSS_IMPROVEMENT
from evalstop_gym.sim.view import SchedulerJobView

from .base import PriorityScheduler


def loss_improvement(job: SchedulerJobView) -> float:
    """Relative loss drop over the last check interval; +inf when not yet measurable."""
    hist = job.loss_history
    if len(hist) < 2 or hist[-2] <= 0:
        return float("inf")
    return (hist[-2] - hist[-1]) / hist[-2]


class LossAware(PriorityScheduler):
    """LossAware: GPUs go first to the jobs whose training loss improves fastest (SLAQ-style).

    Preemptive. The rate is the relative loss drop between a job's last two checks; a job with
    fewer than two checks goes first, as SLAQ favours fresh jobs.
    """

    name = "LossAware"
    native_key = KEY_LOSS_IMPROVEMENT
    incremental = True   # key frozen while waiting, never rising while running
    preemptive = True

    def key(self, job: SchedulerJobView) -> float:
        return -loss_improvement(job)
