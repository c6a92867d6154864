"""A minimal discrete-event kernel: a clock and a heap of timestamped events.

Events are ordered by (time, priority, sequence number), so simultaneous events always resolve in
the same order whatever the heap's internals do: the simulator is deterministic per seed.
"""

from __future__ import annotations

import heapq
from typing import Any, NamedTuple

ARRIVAL, PHASE_END = 1, 0   # event kinds, and their priorities: at equal times, phase ends first


class Event(NamedTuple):
    time: float
    priority: int
    seq: int
    kind: int
    job_id: int
    epoch: int


class SimulationError(RuntimeError):
    """An illegal transition: scheduling in the past, or an inconsistent decision."""


class EventQueue:
    """The clock and the pending events."""

    __slots__ = ("now", "_heap", "_seq", "popped")

    def __init__(self, start: float = 0.0) -> None:
        self.now = start
        self._heap: list[Event] = []
        self._seq = 0
        self.popped = 0

    def schedule(self, time: float, kind: int, job_id: int, epoch: int = 0,
                 priority: int = 0) -> None:
        if time < self.now:
            raise SimulationError(f"cannot schedule at t={time} before now={self.now}")
        self._seq += 1
        heapq.heappush(self._heap, Event(time, priority, self._seq, kind, job_id, epoch))

    def peek_time(self) -> float | None:
        return self._heap[0].time if self._heap else None

    def pop(self) -> Event:
        """Remove the next event and advance the clock to it."""
        event = heapq.heappop(self._heap)
        self.now = event.time
        self.popped += 1
        return event

    def __len__(self) -> int:
        return len(self._heap)

    def __bool__(self) -> bool:
        return bool(self._heap)

    def __repr__(self) -> str:
        return f"EventQueue(now={self.now:.3f}, pending={len(self._heap)})"

    def debug_events(self) -> list[Any]:
        return sorted(self._heap)
