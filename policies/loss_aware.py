"""SLAQ-style quality-aware scheduling: GPUs go to jobs whose training loss improves fastest.

The improvement is the relative loss drop between a job's last two check points. Jobs with fewer
than two checks have no measured rate yet and go first, as SLAQ favours fresh jobs. The key is
`sim.rules.priority_key` with code KEY_LOSS_IMPROVEMENT.
"""

from __future__ import annotations

from evalstop_gym.sim import rules
from evalstop_gym.sim.rules import KEY_LOSS_IMPROVEMENT
from evalstop_gym.sim.view import SchedulerJobView

from .base import PriorityScheduler
from .registry import register_base


def loss_improvement(job: SchedulerJobView) -> float:
    """Relative loss drop over the last check interval; +inf when not yet measurable."""
    return rules.loss_improvement(job.loss_history)


class LossAware(PriorityScheduler):
    """LossAware: GPUs go first to the jobs whose training loss improves fastest (SLAQ-style).

    Preemptive. The rate is the relative loss drop between a job's last two checks; a job with
    fewer than two checks goes first, as SLAQ favours fresh jobs.
    """

    name = "LossAware"
    native_key = KEY_LOSS_IMPROVEMENT
    incremental = True   # key frozen while waiting, never rising while running
    key_rises_at_checks = True   # it reads the history
    preemptive = True


register_base("LossAware", LossAware)
