"""Least attained service first (Tiresias' 2D-LAS, Gu et al., NSDI'19), without durations."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_ATTAINED_SERVICE

from .base import PriorityScheduler
from .registry import register_base


class LAS(PriorityScheduler):
    """LAS: preemptive, the job that has received the fewest GPU-minutes (GPUs times the minutes
    it has held them) runs first, as Tiresias schedules when job durations are unknown.

    A new job (no service yet) goes before every job that has run; a running job sinks as it
    is served and is preempted once a waiting one has received less.
    """

    name = "LAS"
    native_key = KEY_ATTAINED_SERVICE
    preemptive = True
    key_rises_while_running = True   # so no incremental pass: every pass ranks afresh


register_base("LAS", LAS)
