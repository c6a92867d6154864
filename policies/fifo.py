"""First in, first out (with backfilling of jobs that fit behind a blocked head)."""

from __future__ import annotations

from evalstop_gym.sim.rules import KEY_ARRIVAL

from .base import PriorityScheduler
from .registry import register_base


class FIFO(PriorityScheduler):
    """FIFO: waiting jobs start in arrival order; jobs that fit behind a blocked head backfill.

    Never preempts. The simplest base, against which what a detector buys is easiest to read.
    """

    name = "FIFO"
    native_key = KEY_ARRIVAL
    incremental = True   # key frozen while waiting, never rising while running


register_base("FIFO", FIFO)
