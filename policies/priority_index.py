"""An incremental form of `PriorityScheduler`'s pass: the same allocation without sorting every job,
by the functions the compiled engine runs, over arrays indexed by job id.

The plain pass ranks every waiting and running job by (key, arrival, id) and fills the GPUs
greedily in that order, skipping jobs that do not fit. This index reaches the identical answer
from structures that change only when a job does:

- waiting jobs sit in one heap per GPU demand (`sim.kernel_queues`). A waiting job's view (hence
  its key) is frozen while it waits, and the greedy fill (`kernel_queues.fill`) takes, at each
  step, the best-ranked job among the heaps whose demand still fits: the same job the linear scan
  would take next, since capacity only shrinks.
- running jobs (preemptive schedulers only) sit in a heap by the key they had when last seen.
  Their keys never increase between the changes the cluster reports (the scheduler declares
  this), so the stored key bounds the current one from above: `sim.lazy_fill` walks up from the
  bottom of the ranking and stops as soon as every running job above keeps its GPUs whatever
  happens. Only the jobs it walks past are re-viewed (fresh), asked of the cluster by id.

Keys rank as (major, minor) pairs of float64, the compiled engine's: a key that is a number k
ranks as (0, k), a pair of numbers as itself; no other key can be indexed.
"""

from __future__ import annotations

from collections.abc import Callable, Generator
from typing import Any

import numpy as np

from evalstop_gym.sim.kernel_layout import N_INT_SLOTS, S_RHEAP, grown
from evalstop_gym.sim.kernel_queues import (
    fill,
    store_running_key,
    wait_push,
    wait_remove,
)
from evalstop_gym.sim.lazy_fill import walk
from evalstop_gym.sim.protocols import Allocation
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

WAITING_STATES = ("pending", "preempted")
NUMBERS = (int, float, np.integer, np.floating)   # bool is an int
PER_JOB = {"gpus": np.int64, "cls": np.int64, "run_pos": np.int64, "run_seq": np.int64,
           "run_version": np.int64, "keep": np.bool_,
           "arrival": np.float64, "major": np.float64, "minor": np.float64,
           "after": np.int64, "top": np.int64, "pending": np.int64, "prefix": np.int64,
           "to_start": np.int64}


def key_pair(key: Any) -> tuple[float, float]:
    """A scheduler's key as the (major, minor) pair the queues rank by."""
    pair = key if isinstance(key, tuple) else (0, key)
    if len(pair) != 2 or not (isinstance(pair[0], NUMBERS) and isinstance(pair[1], NUMBERS)):
        raise TypeError(f"an incremental scheduler's key must be a number or a (major, minor) "
                        f"pair of numbers, not {key!r}")
    return float(pair[0]), float(pair[1])


class PriorityIndex:
    """Waiting heaps per demand and a heap of running jobs by stored key, synced from job
    changes; the arrays grow with the largest job id seen."""

    # per job id (PER_JOB; `sizes` one longer), as `kernel_layout.LoopState` and `Scratch` name
    # them; `major`, `minor`: the key as last seen; `run_pos` >= 0: running
    gpus: np.ndarray
    cls: np.ndarray
    run_pos: np.ndarray
    run_seq: np.ndarray
    run_version: np.ndarray
    keep: np.ndarray
    arrival: np.ndarray
    major: np.ndarray
    minor: np.ndarray
    after: np.ndarray
    top: np.ndarray
    pending: np.ndarray
    prefix: np.ndarray
    to_start: np.ndarray
    sizes: np.ndarray

    def __init__(self, key: Callable[[SchedulerJobView], Any], preemptive: bool) -> None:
        self.key = key
        self.preemptive = preemptive
        self.slots = np.zeros(N_INT_SLOTS, np.int64)    # kernel_layout's S_*: S_RHEAP
        self.rheap = np.empty((64, 5))                  # rows as kernel_layout.LoopState's
        self.cls_gpus = np.empty(0, np.int64)           # the demands seen, ascending
        self.cls_off = np.empty(0, np.int64)            # each demand's heap in `wait`
        self.cls_size = np.empty(0, np.int64)
        self.wait = np.empty(0, np.int64)
        self.size = 0                                   # job ids below it have entries
        self.waiting: set[int] = set()                  # the ids in the waiting heaps
        self.demand_class: dict[int, int] = {}          # GPU demand -> its index in cls_gpus
        self._grow(64)

    def _grow(self, size: int) -> None:
        """Per-job arrays for ids below `size` (their contents kept), the heaps laid out anew."""
        for name, dtype in PER_JOB.items():
            array: np.ndarray = np.full(size, -1 if name == "run_pos" else 0, dtype)
            if self.size:
                array[:self.size] = getattr(self, name)[:self.size]
            setattr(self, name, array)
        self.sizes = np.zeros(size + 1, np.int64)
        self._lay_out(self.cls_gpus, size)
        self.size = size

    def _lay_out(self, demands: np.ndarray, size: int) -> None:
        """A heap region of `size` slots per demand in `demands`, the current heaps moved in."""
        wait = np.empty(len(demands) * size, np.int64)
        counts = np.zeros(len(demands), np.int64)
        for c, demand in enumerate(self.cls_gpus):
            new, n, off = int(np.searchsorted(demands, demand)), self.cls_size[c], self.cls_off[c]
            wait[new * size:new * size + n] = self.wait[off:off + n]
            counts[new] = n
        self.cls_gpus, self.cls_size, self.wait = demands, counts, wait
        self.cls_off = np.arange(len(demands), dtype=np.int64) * size
        self.cls[:] = np.searchsorted(demands, self.gpus)
        self.demand_class = {int(demand): c for c, demand in enumerate(demands)}

    def update(self, view: SchedulerJobView, run_seq: int) -> None:
        """Take in a job's fresh view after it changed (arrived, started, checked, ended...)."""
        jid = view.job_id
        if jid >= self.size:
            self._grow(max(2 * self.size, jid + 1))
        if jid in self.waiting:
            self.waiting.remove(jid)
            wait_remove(jid, self.cls, self.cls_off, self.cls_size, self.wait, self.major,
                        self.minor, self.arrival)
        self.run_pos[jid] = -1                           # its running entries go stale
        self.gpus[jid], self.arrival[jid] = view.gpus, view.arrival_time
        if view.state in WAITING_STATES:
            if view.gpus not in self.demand_class:
                self._lay_out(np.union1d(self.cls_gpus, [view.gpus]).astype(np.int64),
                              self.size)
            self.cls[jid] = self.demand_class[view.gpus]
            self.set_key(jid, view)
            self.waiting.add(jid)
            wait_push(jid, self.cls, self.cls_off, self.cls_size, self.wait, self.major,
                      self.minor, self.arrival)
        elif view.state == "running":
            self.run_pos[jid], self.run_seq[jid] = 0, run_seq
            if self.preemptive:
                self.set_key(jid, view)
                self._store(jid)

    def set_key(self, jid: int, view: SchedulerJobView) -> None:
        self.major[jid], self.minor[jid] = key_pair(self.key(view))

    def _store(self, jid: int) -> None:
        """File running job jid in the running-key heap under its key (older entries go
        stale); a full heap is first rebuilt from the running jobs alone."""
        if self.slots[S_RHEAP] + 2 >= len(self.rheap):
            live = np.flatnonzero(self.run_pos >= 0)
            while 2 * len(live) + 4 >= len(self.rheap):
                self.rheap = grown(self.rheap)
            self.slots[S_RHEAP] = 0
            for j in live:
                self._push(int(j))
        self._push(jid)

    def _push(self, jid: int) -> None:
        self.slots[S_RHEAP] = store_running_key(self.rheap, self.slots[S_RHEAP], jid, self.major,
                                                self.minor, self.arrival, self.run_version)

    def allocate(self, cluster: ClusterView) -> Generator[int, SchedulerJobView, Allocation]:
        """One scheduling pass; yields the ids of running jobs it must see fresh."""
        if not self.waiting:
            return Allocation()
        if not self.preemptive:
            n_start = fill(cluster.free_gpus, self.after, 0, self.gpus, self.arrival, self.cls,
                           self.cls_gpus, self.cls_off, self.cls_size, self.wait, self.major,
                           self.minor, self.keep, self.to_start, 0)
            return Allocation(start=self._started(n_start))
        j, state = -1, (-1, 0, 0, 0, cluster.free_gpus)
        while True:
            j, state, n_after, n_start = walk(
                j, state, cluster.total_gpus, self.gpus, self.arrival, self.cls, self.cls_gpus,
                self.cls_off, self.cls_size, self.wait, self.major, self.minor, self.rheap,
                self.run_pos, self.run_version, self.after, self.top, self.pending, self.prefix,
                self.sizes, self.keep, self.to_start, self.slots)
            if j < 0:
                break
            self.set_key(j, (yield j))
        ranked = self.after[:n_after].tolist()
        for jid in ranked:                               # all still running until reported
            self._push(jid)
        preempt = sorted((j for j in ranked if not self.keep[j]), key=self.run_seq.__getitem__)
        return Allocation(start=self._started(n_start), preempt=tuple(preempt))

    def _started(self, n_start: int) -> tuple[int, ...]:
        """The jobs the pass starts, back on their heaps: like the preempted ones, a job stays
        indexed as it was until the cluster reports its change."""
        started = self.to_start[:n_start].tolist()
        for jid in started:
            wait_push(jid, self.cls, self.cls_off, self.cls_size, self.wait, self.major,
                      self.minor, self.arrival)
        return tuple(started)
