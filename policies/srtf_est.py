"""Preemptive shortest remaining time first, on the estimate duration_estimate * (1 - progress)."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_REMAINING_ESTIMATE

from .base import PriorityScheduler


class SRTFEst(PriorityScheduler):
    name = "SRTF-Est"
    native_key = KEY_REMAINING_ESTIMATE
    incremental = True   # key frozen while waiting, never rising while running
    preemptive = True

