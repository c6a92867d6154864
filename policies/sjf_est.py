"""Non-clairvoyant shortest job first: order by the duration estimate, never preempt."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_DURATION_ESTIMATE

from .base import PriorityScheduler


class SJFEst(PriorityScheduler):
    name = "SJF-Est"
    native_key = KEY_DURATION_ESTIMATE
    incremental = True   # key frozen while waiting, never rising while running

