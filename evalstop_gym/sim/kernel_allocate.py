"""The compiled allocation of preemptive schedulers: `PriorityIndex.allocate`
(policies/priority_index.py), lazily.

The allocation is `PriorityScheduler.schedule`'s (rank every job by (key, arrival, id), fill
greedily), but a pass re-keys only the running jobs it must. Running jobs are taken from the
bottom of the ranking up: their stored keys bound their keys from above (keys never rise while a
job runs between two checks), so a job's stored entry in the running-key heap (`rheap`) tells
when it can rank after the best waiting job. They are taken until the waiting jobs ranked before
the lowest one taken fit in the GPUs it and those below it free: every running job above it
keeps its GPUs whatever the exact order, and the exact fill (`kernel_queues.fill`) covers the
rest.
"""

from __future__ import annotations

from .kernel_jobs import running_key
from .kernel_layout import S_FREE, S_N_RUN, S_RHEAP
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
from .kernel_steps import part, step


@part
def next_down(first, n_pending, now, key_kind, phase, work, phase_start, speed, duration,
              gpu_min, gpus, arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx,
              chk_loss, next_check, ev_ptr, ev_score, major, key, rheap, run_pos, run_version,
              pending, slots):
    """The next running job down the ranking that ranks after `first` (the best waiting job),
    re-keyed. Jobs come off the running-key heap by stored key; those re-keyed to rank before
    `first` wait in `pending` (ascending). Returns (the job, -1 if none; n_pending)."""
    n_rheap = slots[S_RHEAP]
    while True:
        while n_rheap > 0 and (run_pos[int(-rheap[0, 3])] < 0
                               or rheap[0, 4] != run_version[int(-rheap[0, 3])]):
            n_rheap = heap_pop(rheap, n_rheap)   # stale: ended, preempted or re-keyed
        bound = -1                               # the largest stored entry ranked after first
        if n_rheap > 0 and before(major[first], key[first], arrival[first], first, -rheap[0, 0],
                                  -rheap[0, 1], -rheap[0, 2], -rheap[0, 3]):
            bound = int(-rheap[0, 3])
        if n_pending > 0:
            m = pending[n_pending - 1]
            if bound < 0 or before(-rheap[0, 0], -rheap[0, 1], -rheap[0, 2], bound, major[m],
                                   key[m], arrival[m], m):
                slots[S_RHEAP] = n_rheap
                return m, n_pending - 1
        if bound < 0:
            slots[S_RHEAP] = n_rheap
            return -1, n_pending
        n_rheap = heap_pop(rheap, n_rheap)
        j = bound
        major[j], key[j] = running_key(key_kind, j, now, phase, work, phase_start, speed,
                                       duration, gpu_min, gpus, arrival, dur_est, paced, chk_ptr,
                                       chk_prog, chk_work, chk_idx, chk_loss, next_check, ev_ptr,
                                       ev_score)
        if ranks_before(first, j, major, key, arrival):
            r = n_pending                        # pending stays ascending
            while r > 0 and ranks_before(j, pending[r - 1], major, key, arrival):
                pending[r] = pending[r - 1]
                r -= 1
            pending[r] = j
            n_pending += 1
        else:
            n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival, run_version)


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
def rekey_all_running(now, key_kind, phase, work, phase_start, speed, duration, gpu_min, gpus,
                      arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                      next_check, ev_ptr, ev_score, major, key, rheap, run_list, run_version,
                      slots):
    """Keys that rose as their jobs ran (`Platform.rekeys_at_passes`), all stored afresh."""
    n_rheap = 0
    for q in range(slots[S_N_RUN]):
        j = run_list[q]
        major[j], key[j] = running_key(key_kind, j, now, phase, work, phase_start, speed,
                                       duration, gpu_min, gpus, arrival, dur_est, paced, chk_ptr,
                                       chk_prog, chk_work, chk_idx, chk_loss, next_check, ev_ptr,
                                       ev_score)
        n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival, run_version)
    slots[S_RHEAP] = n_rheap


@step
def allocate(spec, jobs, out, loop, space, now):
    """The pass's allocation: the jobs to start in `to_start`, the ranked running jobs in
    `after` (ascending), those that keep their GPUs marked in `keep`. Returns (n_after,
    n_start)."""
    key_kind, total_gpus, arrival, gpus = spec.key_kind, spec.total_gpus, jobs.arrival, jobs.gpus
    duration, dur_est, speed, paced = jobs.duration, jobs.dur_est, jobs.speed, jobs.paced
    chk_ptr, chk_prog, chk_work, chk_idx = jobs.chk_ptr, jobs.chk_prog, jobs.chk_work, jobs.chk_idx
    chk_loss, ev_ptr, ev_score = jobs.chk_loss, jobs.ev_ptr, jobs.ev_score
    work, next_check, gpu_min, phase_start = out.work, out.next_check, out.gpu_min, out.phase_start
    phase, cls_gpus, cls, cls_off = loop.phase, loop.cls_gpus, loop.cls, loop.cls_off
    cls_size, wait, major, key = loop.cls_size, loop.wait, loop.major, loop.key
    run_list, run_pos, run_version = loop.run_list, loop.run_pos, loop.run_version
    rheap, slots = loop.rheap, loop.int_slots
    after, top, pending, prefix = space.after, space.top, space.pending, space.prefix
    sizes, keep, to_start = space.sizes, space.keep, space.to_start
    if spec.rekeys_at_passes:
        rekey_all_running(now, key_kind, phase, work, phase_start, speed, duration, gpu_min, gpus,
                          arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                          next_check, ev_ptr, ev_score, major, key, rheap, run_list, run_version,
                          slots)
    first = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key, arrival, total_gpus)
    n_top, n_pending, n_prefix, taken = 0, 0, 0, 0
    room = slots[S_FREE]
    while True:
        nxt, n_pending = next_down(first, n_pending, now, key_kind, phase, work, phase_start,
                                   speed, duration, gpu_min, gpus, arrival, dur_est, paced,
                                   chk_ptr, chk_prog, chk_work, chk_idx, chk_loss, next_check,
                                   ev_ptr, ev_score, major, key, rheap, run_pos, run_version,
                                   pending, slots)
        if nxt < 0:                              # the whole tail is ranked: the plain fill
            taken = 0
            break
        top[n_top] = nxt
        n_top += 1
        room += gpus[nxt]
        n_prefix = take_before(nxt, room, n_prefix, total_gpus, gpus, arrival, cls, cls_gpus,
                               cls_off, cls_size, wait, major, key, prefix, sizes)
        taken = n_prefix
        while taken > 0 and ranks_before(nxt, prefix[taken - 1], major, key, arrival):
            taken -= 1
        if sizes[taken] <= room:                 # everything ranked above nxt fits: settled
            break
    for k in range(taken, n_prefix):             # back to their heaps
        wait_push(prefix[k], cls, cls_off, cls_size, wait, major, key, arrival)
    to_start[:taken] = prefix[:taken]
    for k in range(n_top):                       # the ranked tail, ascending
        after[k] = top[n_top - 1 - k]
    n_start = fill(room - sizes[taken], after, n_top, gpus, arrival, cls, cls_gpus, cls_off,
                   cls_size, wait, major, key, keep, to_start, taken)
    for k in range(n_pending):                   # ranked but above the settled point: kept
        slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], pending[k], major, key,
                                           arrival, run_version)
    return n_top, n_start
