"""GPU kinds of a heterogeneous cluster, and where jobs run on them.

A job gang-schedules on GPUs of one kind (its collective communication would stall on a mix);
unless the scheduler names a kind, it goes to the fastest kind with room, earlier kinds first on a
tie. A kind's speed scales training and eval time: speed 2 halves both. A homogeneous cluster has
no pool at all, so its arithmetic is untouched.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..config import ClusterConfig
from .kernel import SimulationError


class GpuPool:
    __slots__ = ("totals", "free", "speeds", "_order")

    def __init__(self, totals: Sequence[int], speeds: Sequence[float]) -> None:
        self.totals = tuple(int(t) for t in totals)
        self.free = list(self.totals)
        self.speeds = tuple(float(s) for s in speeds)
        self._order = sorted(range(len(self.totals)), key=lambda k: (-self.speeds[k], k))

    @classmethod
    def from_config(cls, cfg: ClusterConfig) -> GpuPool | None:
        if not cfg.kinds:
            return None
        return cls([k.count for k in cfg.kinds], [k.speed for k in cfg.kinds])

    def fastest_fit(self, gpus: int, free: Sequence[int] | None = None) -> int | None:
        """The kind a job of `gpus` GPUs would go to, or None if no kind has room."""
        free = self.free if free is None else free
        return next((k for k in self._order if free[k] >= gpus), None)

    def place(self, starts: Sequence[tuple[int, int]], kinds: Sequence[int],
              released: Sequence[tuple[int, int]]) -> list[int]:
        """Kinds for (job id, gpus) starts after `released` (kind, gpus) are freed; checks fit."""
        if kinds and len(kinds) != len(starts):
            raise SimulationError(f"allocation.kinds has {len(kinds)} entries for "
                                  f"{len(starts)} starts")
        free = list(self.free)
        for freed_kind, freed in released:
            free[freed_kind] += freed
        placed = []
        for i, (job_id, gpus) in enumerate(starts):
            kind = kinds[i] if kinds else self.fastest_fit(gpus, free)
            if kind is None or not 0 <= kind < len(free) or free[kind] < gpus:
                raise SimulationError(f"allocation.start: job {job_id} needs {gpus} GPUs of one "
                                      f"kind; free per kind would be {free}")
            free[kind] -= gpus
            placed.append(kind)
        return placed

    def take(self, kind: int, gpus: int) -> None:
        self.free[kind] -= gpus
        if self.free[kind] < 0:
            raise SimulationError(f"GPU kind {kind} over-allocated: {self.free[kind]} free")

    def release(self, kind: int, gpus: int) -> None:
        self.free[kind] += gpus
        if self.free[kind] > self.totals[kind]:
            raise SimulationError(f"GPU kind {kind} released more than it holds")
