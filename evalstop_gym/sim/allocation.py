"""A scheduler's answer checked before the platform applies it: a wrong allocation is the
scheduler's error, named in one line, and must never leave the cluster half-changed."""

from __future__ import annotations

from collections.abc import Mapping

from .jobs import Job
from .kernel import SimulationError
from .protocols import Allocation


def checked_allocation(allocation: Allocation, running: Mapping[int, Job],
                       waiting: Mapping[int, Job],
                       free_gpus: int) -> tuple[tuple[int, ...], tuple[int, ...], tuple[int, ...]]:
    """(start, preempt, stop) of `allocation`, once each names distinct jobs in the right state
    and the starts fit in the GPUs free after the preemptions and stops."""
    start, preempt, stop = (tuple(allocation.start), tuple(allocation.preempt),
                            tuple(allocation.stop))
    for name, ids in (("start", start), ("preempt", preempt), ("stop", stop)):
        if len(set(ids)) != len(ids):
            raise SimulationError(f"allocation.{name} names a job twice: {ids}")
    if set(start) & set(preempt) or set(start) & set(stop) or set(preempt) & set(stop):
        raise SimulationError("allocation names one job in two of start/preempt/stop")
    for jid in stop:
        if jid not in running and jid not in waiting:
            raise SimulationError(f"allocation.stop: job {jid} is neither running nor waiting")
    for jid in preempt:
        if jid not in running:
            raise SimulationError(f"allocation.preempt: job {jid} is not running")
    for jid in start:
        if jid not in waiting:
            raise SimulationError(f"allocation.start: job {jid} is not waiting")
    freed = sum(running[j].gpus for j in (*preempt, *stop) if j in running)
    need = sum(waiting[j].gpus for j in start)
    if need > free_gpus + freed:
        raise SimulationError(f"allocation.start needs {need} GPUs; only "
                              f"{free_gpus + freed} would be free")
    return start, preempt, stop
