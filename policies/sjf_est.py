"""Non-clairvoyant shortest job first: order by the duration estimate, never preempt."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_DURATION_ESTIMATE

from .base import PriorityScheduler
from .registry import register_base


class SJFEst(PriorityScheduler):
    """SJF-Est: waiting jobs start shortest first by their duration estimate; never preempts.

    Non-clairvoyant: the estimate is the job type's mean duration
    (`SchedulerJobView.duration_estimate`), since no platform knows a job's duration before it runs.
    """

    name = "SJF-Est"
    native_key = KEY_DURATION_ESTIMATE
    incremental = True   # key frozen while waiting, never rising while running


register_base("SJF-Est", SJFEst)
