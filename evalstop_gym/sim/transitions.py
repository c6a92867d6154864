"""A job's transitions, written once: how its work moves, what a phase costs, how long the next
one lasts, and what follows a phase's end, a check's answer and a start.

Plain functions over scalars (+ - * /, min and max, which plain Python and numba compute to the
same bit): `Cluster` calls them on a job's fields, `native_kernel` compiles them (inlined) and
calls them on its arrays' entries, so both engines move a job alike by construction, as they
rank and stop jobs through `rules.py`.
"""

from __future__ import annotations

from .jobs import Phase
from .rules import ROUNDING

RESTART, TRAIN, EVAL = int(Phase.RESTART), int(Phase.TRAIN), int(Phase.EVAL)
# What follows a phase or a check when it is not a next phase: a check to answer, or the job's end
CHECK, COMPLETE, STOP = -1, -2, -3
MILESTONE, COMPLETION = -1, -2   # check kinds that run no eval (else an eval's index)


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


def first_phase(has_run: bool, overhead: float) -> int:
    """The phase a job starts in: a restart (its overhead) if it ran before, else training."""
    return RESTART if has_run and overhead > 0 else TRAIN


def phase_after(phase: int, check_kind: int) -> int:
    """What follows the end of `phase` at the job's next check (`check_kind`: an eval's index,
    or a negative code): training after a restart; after training, the check's eval, the job's
    completion, or (a milestone) its check; after an eval, its check."""
    if phase == RESTART:
        return TRAIN
    if phase == TRAIN:
        if check_kind >= 0:
            return EVAL
        if check_kind == COMPLETION:
            return COMPLETE
    return CHECK


def after_check(stop: bool, checks_done: int, n_checks: int) -> int:
    """What follows a check's answer: the job stops, completes (no check left), or trains on."""
    if stop:
        return STOP
    if checks_done >= n_checks:
        return COMPLETE
    return TRAIN


def sliced_speed(full: float, share: float, sliced: bool) -> float:
    """A job's speed until its next check: `share` of its full speed while time-sliced."""
    return full * share if sliced else full
