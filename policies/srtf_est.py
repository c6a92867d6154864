"""Preemptive shortest remaining time first, on the estimate duration_estimate * (1 - progress)."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_REMAINING_ESTIMATE

from .base import PriorityScheduler
from .registry import register_base


class SRTFEst(PriorityScheduler):
    """SRTF-Est: preemptive shortest remaining time first, on the estimated time left.

    Running and waiting jobs are ranked together by `remaining_estimate` (the duration estimate
    times the progress left) and running jobs that fall out of the top are preempted. The
    paper's reference base scheduler.
    """

    name = "SRTF-Est"
    native_key = KEY_REMAINING_ESTIMATE
    incremental = True   # key frozen while waiting, never rising while running
    preemptive = True


register_base("SRTF-Est", SRTFEst)
