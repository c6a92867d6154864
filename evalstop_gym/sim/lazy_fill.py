"""The preemptive allocation, lazily: `PriorityScheduler.schedule`'s (rank every job by (key,
arrival, id), fill greedily) while re-keying only the running jobs it must. Written once, over
the arrays of `kernel_queues`, for both engines: the compiled loop (`kernel_allocate`) re-keys a
job itself, `policies.priority_index.PriorityIndex` asks the cluster for a fresh view of it.

Running jobs are taken from the bottom of the ranking up: their stored keys bound their keys
from above (keys never rise while a job runs between two checks), so a job's stored entry in the
running-key heap (`rheap`) tells when it can rank after the best waiting job. They are taken
until the waiting jobs ranked before the lowest one taken fit in the GPUs it and those below it
free: every running job above it keeps its GPUs whatever the exact order, and the exact fill
(`kernel_queues.fill`) covers the rest.

The pass is resumable: `walk` runs until it needs a running job's current key, returns that job
and its state (plain integers), and files the job once its caller has set its key.
"""

from __future__ import annotations

from .kernel_layout import S_RHEAP
from .kernel_queues import (
    before,
    best_waiting,
    fill,
    heap_pop,
    ranks_before,
    store_running_key,
    wait_pop,
    wait_push,
)
from .kernel_steps import part


@part
def next_down(first, n_pending, major, key, arrival, rheap, run_pos, run_version, pending,
              slots):
    """The next running job down the ranking that may rank after `first` (the best waiting
    job). Jobs come off the running-key heap by stored key; those re-keyed to rank before
    `first` wait in `pending` (ascending). Returns (the job, -1 if none; n_pending; whether the
    job came off the heap and must be re-keyed and filed with `file_rekeyed`)."""
    n_rheap = slots[S_RHEAP]
    while n_rheap > 0 and (run_pos[int(-rheap[0, 3])] < 0
                           or rheap[0, 4] != run_version[int(-rheap[0, 3])]):
        n_rheap = heap_pop(rheap, n_rheap)       # stale: ended, preempted or re-keyed
    bound = -1                                   # the largest stored entry ranked after first
    if n_rheap > 0 and before(major[first], key[first], arrival[first], first, -rheap[0, 0],
                              -rheap[0, 1], -rheap[0, 2], -rheap[0, 3]):
        bound = int(-rheap[0, 3])
    if n_pending > 0:
        m = pending[n_pending - 1]
        if bound < 0 or before(-rheap[0, 0], -rheap[0, 1], -rheap[0, 2], bound, major[m],
                               key[m], arrival[m], m):
            slots[S_RHEAP] = n_rheap
            return m, n_pending - 1, False
    if bound >= 0:
        n_rheap = heap_pop(rheap, n_rheap)
    slots[S_RHEAP] = n_rheap
    return bound, n_pending, bound >= 0


@part
def file_rekeyed(first, j, n_pending, major, key, arrival, rheap, run_version, pending, slots):
    """Running job j, re-keyed: into `pending` if it now ranks before `first`, else back into
    the running-key heap. Returns the new n_pending."""
    if ranks_before(first, j, major, key, arrival):
        r = n_pending                            # pending stays ascending
        while r > 0 and ranks_before(j, pending[r - 1], major, key, arrival):
            pending[r] = pending[r - 1]
            r -= 1
        pending[r] = j
        return n_pending + 1
    slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], j, major, key, arrival,
                                       run_version)
    return n_pending


@part
def take_before(nxt, room, n_prefix, total_gpus, gpus, arrival, cls, cls_gpus, cls_off,
                cls_size, wait, major, key, prefix, sizes):
    """Takes the waiting jobs ranked before running job `nxt` off their heaps into `prefix`
    while they fit in `room` (`sizes`: their GPUs, summed); returns the new n_prefix."""
    while sizes[n_prefix] <= room and (n_prefix == 0 or ranks_before(
            prefix[n_prefix - 1], nxt, major, key, arrival)):
        m = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, total_gpus)
        if m < 0 or ranks_before(nxt, m, major, key, arrival):
            break
        wait_pop(cls[m], cls_off, cls_size, wait, major, key, arrival)
        prefix[n_prefix] = m
        sizes[n_prefix + 1] = sizes[n_prefix] + gpus[m]
        n_prefix += 1
    return n_prefix


@part
def walk(rekeyed, state, total_gpus, gpus, arrival, cls, cls_gpus, cls_off, cls_size, wait,
         major, key, rheap, run_pos, run_version, after, top, pending, prefix, sizes, keep,
         to_start, slots):
    """The pass's allocation, resumed where it stopped: `rekeyed` is the running job it last
    asked for, its key now set (-1: the pass starts, `state` = (-1, 0, 0, 0, free GPUs)).
    Returns (a running job whose current key it needs, -1 once it is done; the state to resume
    from; n_after, n_start: `close_walk`'s, once it is done)."""
    first, n_top, n_pending, n_prefix, room = state
    if rekeyed < 0:
        first = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, total_gpus)
    else:
        n_pending = file_rekeyed(first, rekeyed, n_pending, major, key, arrival, rheap,
                                 run_version, pending, slots)
    j, n_top, n_pending, n_prefix, room, taken = descend(
        first, n_top, n_pending, n_prefix, room, total_gpus, gpus, arrival, cls, cls_gpus,
        cls_off, cls_size, wait, major, key, rheap, run_pos, run_version, top, pending, prefix,
        sizes, slots)
    if j >= 0:
        return j, (first, n_top, n_pending, n_prefix, room), 0, 0
    n_after, n_start = close_walk(n_top, n_pending, n_prefix, room, taken, gpus, arrival, cls,
                                  cls_gpus, cls_off, cls_size, wait, major, key, rheap,
                                  run_version, after, top, pending, prefix, sizes, keep,
                                  to_start, slots)
    return -1, (first, n_top, n_pending, n_prefix, room), n_after, n_start


@part
def descend(first, n_top, n_pending, n_prefix, room, total_gpus, gpus, arrival, cls, cls_gpus,
            cls_off, cls_size, wait, major, key, rheap, run_pos, run_version, top, pending,
            prefix, sizes, slots):
    """The walk down the ranking from where it stopped. Returns (a running job whose current
    key it needs, -1 once the walk is over; n_top, n_pending, n_prefix, room; `taken`: how many
    of `prefix` start)."""
    while True:
        nxt, n_pending, stale = next_down(first, n_pending, major, key, arrival, rheap, run_pos,
                                          run_version, pending, slots)
        if stale:
            return nxt, n_top, n_pending, n_prefix, room, 0
        if nxt < 0:                              # the whole tail is ranked: the plain fill
            return -1, n_top, n_pending, n_prefix, room, 0
        top[n_top] = nxt
        n_top += 1
        room += gpus[nxt]
        n_prefix = take_before(nxt, room, n_prefix, total_gpus, gpus, arrival, cls, cls_gpus,
                               cls_off, cls_size, wait, major, key, prefix, sizes)
        taken = n_prefix
        while taken > 0 and ranks_before(nxt, prefix[taken - 1], major, key, arrival):
            taken -= 1
        if sizes[taken] <= room:                 # everything ranked above nxt fits: settled
            return -1, n_top, n_pending, n_prefix, room, taken


@part
def close_walk(n_top, n_pending, n_prefix, room, taken, gpus, arrival, cls, cls_gpus, cls_off,
               cls_size, wait, major, key, rheap, run_version, after, top, pending, prefix,
               sizes, keep, to_start, slots):
    """The allocation once `descend` is over: the jobs to start in `to_start` (taken off their
    heaps), the ranked running jobs in `after` (ascending), those that keep their GPUs marked in
    `keep`. Returns (n_after, n_start)."""
    for k in range(taken, n_prefix):             # back to their heaps
        wait_push(prefix[k], cls, cls_off, cls_size, wait, major, key, arrival)
    for k in range(taken):                       # (a loop: a slice's copy compiles slowly)
        to_start[k] = prefix[k]
    for k in range(n_top):                       # the ranked tail, ascending
        after[k] = top[n_top - 1 - k]
    n_start = fill(room - sizes[taken], after, n_top, gpus, arrival, cls, cls_gpus, cls_off,
                   cls_size, wait, major, key, keep, to_start, taken)
    for k in range(n_pending):                   # ranked but above the settled point: kept
        slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], pending[k], major, key,
                                           arrival, run_version)
    return n_top, n_start
