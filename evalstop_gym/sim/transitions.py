"""A job's transitions as arithmetic, written once: how its work moves, what a phase costs and
how long the next one lasts.

Plain functions over scalars (+ - * /, min and max, which plain Python and numba compute to the
same bit): `Cluster` calls them on a job's fields, `native_kernel` compiles them (inlined) and
calls them on its arrays' entries, so both engines move a job alike by construction, as they
rank and stop jobs through `rules.py`.
"""

from __future__ import annotations

from .jobs import Phase
from .rules import ROUNDING

RESTART, TRAIN, EVAL = int(Phase.RESTART), int(Phase.TRAIN), int(Phase.EVAL)


def work_after(phase: int, work: float, elapsed: float, speed: float, duration: float) -> float:
    """The share of its training minutes a job has done `elapsed` minutes into a phase that began
    at `work`: only training moves it, at `speed / duration` per minute, up to 1."""
    if phase == TRAIN:
        return min(1.0, work + elapsed * speed / duration)
    return work


def phase_charge(phase: int, gpus: int, elapsed: float, work: float, peak: float, speed: float,
                 duration: float) -> tuple[float, float, float]:
    """What a phase `elapsed` minutes long (ending, or cut by a preemption or a stop) costs:
    (GPU-minutes, those of them spent past the job's peak work `peak`, its work after it)."""
    spent = gpus * elapsed
    if phase == TRAIN:
        end = work_after(phase, work, elapsed, speed, duration)
        past_peak = max(0.0, end - max(work, peak))
        return spent, gpus * past_peak * duration / speed, end
    if work > peak + ROUNDING:
        return spent, gpus * elapsed, work
    return spent, 0.0, work


def phase_minutes(phase: int, overhead: float, eval_minutes: float, target: float, work: float,
                  speed: float, duration: float) -> float:
    """How long a phase lasts: a restart its overhead, an eval its minutes at the job's speed,
    training until its work reaches `target` (its next check)."""
    if phase == RESTART:
        return overhead
    if phase == EVAL:
        return eval_minutes / speed
    return max(0.0, (target - work) * duration / speed)
