"""Non-clairvoyant shortest job first: order by the duration estimate, never preempt."""

from __future__ import annotations

from evalstop_gym.sim.native import KEY_DURATION_ESTIMATE
from evalstop_gym.sim.view import SchedulerJobView

from .base import PriorityScheduler


class SJFEst(PriorityScheduler):
    """SJF-Est: waiting jobs start shortest first by their duration estimate; never preempts.

    Non-clairvoyant: the estimate is the job type's mean duration
    (`SchedulerJobView.duration_estimate`), since no platform knows a job's duration before it runs.
    """

    name = "SJF-Est"
    native_key = KEY_DURATION_ESTIMATE
    incremental = True   # key frozen while waiting, never rising while running

    def key(self, job: SchedulerJobView) -> float:
        return job.duration_estimate
