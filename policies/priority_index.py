"""An incremental form of `PriorityScheduler`'s pass: the same allocation without sorting every job.

The plain pass ranks every waiting and running job by (key, arrival, id) and fills the GPUs
greedily in that order, skipping jobs that do not fit. This index reaches the identical answer
from structures that change only when a job does:

- waiting jobs sit in one heap per GPU demand. A waiting job's view (hence its key) is frozen while
  it waits, and the greedy fill takes, at each step, the best-ranked job among the heaps whose
  demand still fits: the same job the linear scan would take next, since capacity only shrinks.
- running jobs (preemptive schedulers only) sit in a list sorted by the key they had when last
  seen. Their keys never increase between the changes the cluster reports (the scheduler declares
  this), so the stored key bounds the current one from above. Every running job ranked before the
  best waiting job keeps its GPUs whatever happens; only the tail of the list can be displaced,
  and only its jobs are re-viewed (fresh) to be ranked exactly.
"""

from __future__ import annotations

import heapq
from bisect import bisect_left, insort
from collections.abc import Callable, Generator, Sequence
from typing import Any

from evalstop_gym.sim.protocols import Allocation
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

Order = tuple[Any, float, int]           # (key, arrival_time, job_id): unique per job
WAITING_STATES = ("pending", "preempted")


class PriorityIndex:
    """Waiting heaps per demand and a sorted list of running jobs, synced from job changes."""

    def __init__(self, key: Callable[[SchedulerJobView], Any], preemptive: bool) -> None:
        self.key = key
        self.preemptive = preemptive
        self.heaps: dict[int, list[Order]] = {}      # GPU demand -> heap of waiting orders
        self.demands: list[int] = []                 # sorted keys of `heaps`
        self.waiting: dict[int, Order] = {}          # job id -> its live heap entry
        self.gpus: dict[int, int] = {}
        self.running: list[Order] = []               # ascending; keys are upper bounds
        self.run_entry: dict[int, Order] = {}
        self.run_seq: dict[int, int] = {}            # start order, for the preempt tuple

    def order(self, view: SchedulerJobView) -> Order:
        return (self.key(view), view.arrival_time, view.job_id)

    def update(self, view: SchedulerJobView, run_seq: int) -> None:
        """Take in a job's fresh view after it changed (arrived, started, checked, ended...)."""
        jid = view.job_id
        self.waiting.pop(jid, None)                  # its heap entry becomes stale
        self._drop_running(jid)
        if view.state in WAITING_STATES:
            entry = self.order(view)
            self.waiting[jid] = entry
            self.gpus[jid] = view.gpus
            if view.gpus not in self.heaps:
                self.heaps[view.gpus] = []
                insort(self.demands, view.gpus)
            heapq.heappush(self.heaps[view.gpus], entry)
        elif view.state == "running":
            self.gpus[jid] = view.gpus
            self.run_seq[jid] = run_seq
            if self.preemptive:
                self._add_running(self.order(view))
        else:                                        # ended: forget it
            self.gpus.pop(jid, None)
            self.run_seq.pop(jid, None)

    def _add_running(self, entry: Order) -> None:
        self.run_entry[entry[-1]] = entry
        insort(self.running, entry)

    def _drop_running(self, jid: int) -> None:
        entry = self.run_entry.pop(jid, None)
        if entry is not None:
            del self.running[bisect_left(self.running, entry)]

    def head(self, demand: int) -> Order | None:
        """Best live waiting entry of one demand, discarding stale ones on the way."""
        heap = self.heaps[demand]
        while heap and self.waiting.get(heap[0][-1]) is not heap[0]:
            heapq.heappop(heap)
        return heap[0] if heap else None

    def best_fitting(self, capacity: int) -> Order | None:
        best = None
        for demand in self.demands:
            if demand > capacity:
                break
            entry = self.head(demand)
            if entry is not None and (best is None or entry < best):
                best = entry
        return best

    def fill(self, tail: Sequence[Order], capacity: int) -> tuple[list[int], list[int]]:
        """The greedy fill over `tail` and the waiting jobs: (ids to start, ids to preempt)."""
        start: list[int] = []
        preempt: list[int] = []
        taken: list[Order] = []
        i = 0
        while True:
            best = self.best_fitting(capacity)
            if i < len(tail) and (best is None or tail[i] < best):
                jid = tail[i][-1]
                if self.gpus[jid] <= capacity:
                    capacity -= self.gpus[jid]
                else:
                    preempt.append(jid)
                i += 1
                continue
            if best is None:
                break
            jid = best[-1]
            taken.append(heapq.heappop(self.heaps[self.gpus[jid]]))
            start.append(jid)
            capacity -= self.gpus[jid]
        for entry in taken:   # stays indexed until the cluster reports the start
            heapq.heappush(self.heaps[self.gpus[entry[-1]]], entry)
        return start, preempt

    def allocate(self, cluster: ClusterView) -> Generator[int, SchedulerJobView, Allocation]:
        """One scheduling pass; yields the ids of running jobs it must see fresh."""
        if not self.preemptive:
            return Allocation(start=tuple(self.fill((), cluster.free_gpus)[0]))
        free = cluster.free_gpus
        pivot = self.pivot(free)
        if pivot is None:
            return Allocation(start=(), preempt=())
        bound = free + self._stale_tail_gpus(pivot)
        pending: list[Order] = []    # refreshed, ranked after the pivot, not yet known maximal
        top: list[Order] = []        # the tail's largest, exactly ranked, descending
        prefix: list[Order] = []     # waiting jobs that fit somewhere, ascending, popped off
        sizes = [0]                  # cumulative GPUs of `prefix`
        while True:
            nxt = yield from self._next_largest(pivot, pending)
            if nxt is None:          # the whole tail is exact: the plain greedy fill
                start, preempt = self._restore_and_fill(prefix, top, free)
                break
            top.append(nxt)
            room = free + sum(self.gpus[e[-1]] for e in top)
            taken = self._extend_prefix(prefix, sizes, nxt, room, bound)
            if sizes[taken] <= room:
                start, preempt = self._settle(prefix, taken, top, room - sizes[taken])
                break
        for entry in (*top, *pending):
            insort(self.running, entry)
        preempt.sort(key=self.run_seq.__getitem__)
        return Allocation(start=tuple(start), preempt=tuple(preempt))

    def _next_largest(self, pivot: Order, pending: list[Order]
                      ) -> Generator[int, SchedulerJobView, Order | None]:
        """The next running job ranked after `pivot`, in exact descending order (lazy refresh)."""
        run = self.running
        while True:
            stale = run[-1] if run and run[-1] > pivot else None
            if pending and (stale is None or pending[-1] > stale):
                return pending.pop()
            if stale is None:
                return None
            run.pop()
            fresh = self.order((yield stale[-1]))
            self.run_entry[fresh[-1]] = fresh
            insort(pending if fresh > pivot else run, fresh)

    def _extend_prefix(self, prefix: list[Order], sizes: list[int], below: Order, room: int,
                       bound: int) -> int:
        """Pop waiting jobs (ascending) until they reach `below` or outgrow `room`; return how
        many of `prefix` rank before `below`."""
        while sizes[-1] <= room and (not prefix or prefix[-1] < below):
            entry = self.best_fitting(bound)
            if entry is None or entry > below:
                break
            prefix.append(heapq.heappop(self.heaps[self.gpus[entry[-1]]]))
            sizes.append(sizes[-1] + self.gpus[entry[-1]])
        return bisect_left(prefix, below)

    def _settle(self, prefix: list[Order], taken: int, top: list[Order],
                capacity: int) -> tuple[list[int], list[int]]:
        """Every tail job below `top` keeps its GPUs and `prefix[:taken]` all start (see the
        module docstring); the exact fill covers the rest."""
        for entry in prefix[taken:]:
            heapq.heappush(self.heaps[self.gpus[entry[-1]]], entry)
        start, preempt = self.fill(top[::-1], capacity)
        for entry in prefix[:taken]:
            heapq.heappush(self.heaps[self.gpus[entry[-1]]], entry)
        return [e[-1] for e in prefix[:taken]] + start, preempt

    def _restore_and_fill(self, prefix: list[Order], top: list[Order],
                          free: int) -> tuple[list[int], list[int]]:
        for entry in prefix:
            heapq.heappush(self.heaps[self.gpus[entry[-1]]], entry)
        capacity = free + sum(self.gpus[e[-1]] for e in top)
        return self.fill(top[::-1], capacity)

    def pivot(self, free: int) -> Order | None:
        """The best waiting job that could start at all; None when none could.

        Running jobs ranked after a waiting job w free at most `free` + their GPUs for it, and
        their stored keys rank them no earlier than they truly are; a waiting job that needs more
        than that bound is skipped by the greedy fill whatever the exact order, so the pivot can
        move past it. Only running jobs ranked after the pivot then need a fresh view.
        """
        best = self.best_fitting(max(self.demands, default=0))
        while best is not None:
            bound = free + self._stale_tail_gpus(best)
            nxt = self.best_fitting(bound)
            if nxt is best:
                return best
            best = nxt
        return None

    def _stale_tail_gpus(self, best: Order) -> int:
        total, run = 0, self.running
        i = len(run) - 1
        while i >= 0 and run[i] > best:
            total += self.gpus[run[i][-1]]
            i -= 1
        return total
