"""The compiled event loop: `Cluster.run` over arrays, for priority schedulers and stop rules.

What is this module's own: the order of the loop. `advance` mirrors `Cluster` (`cluster.py`:
`_next`, `_handle`, `_check`, `answer_check`, `_apply`, `_start`, `_preempt`, `_end`, `_slice`)
and the scheduling pass `PriorityScheduler.schedule` (policies/base.py: rank by (key, arrival,
id), fill greedily) and, for preemptive schedulers, `PriorityIndex.allocate`
(policies/priority_index.py: the same allocation, refreshing only the running jobs it must).
What a job does is not written here: a phase's cost and length, its work, and what follows a
phase's end, a check's answer or a start are `transitions.py`'s functions, the keys and stop
rules `rules.py`'s, all of which `Cluster` calls too (compiled in `kernel_jobs`); the queues are
`kernel_queues`', the arrays `kernel_layout`'s. `native.py` packs the jobs and unpacks the
results; `tests/test_native.py` compares the two engines run for run.

The loop is resumable: `advance` runs it from a `LoopState` (what `Cluster` keeps between two
`next_decision` calls) and, under `rules.RULE_AGENT`, returns at each check of a monitored job
type for an agent's answer, re-entering at the code after `decide`. `run` calls it once to the
end (the built-in policies); `env/batch_step.py` calls it per decision for N clusters.

Written for numba (`jit.py` says where its cache lives); without it the same functions run as
plain Python (slowly), which keeps them debuggable with pdb. `advance` first borrows its arrays
(`kernel_layout.borrowed`: views that hold no reference), since numba leaves two atomic
reference-count calls per array wherever NamedTuples of them are passed or unpacked (an E2 run
1.9 -> 1.2 ms, measured; cold compile unchanged). The bookkeeping stays inline: the same steps
as functions over the whole cluster ran 10x slower without borrowed views and, with them and
inlined, about 40% faster than today's loop but took 40% longer to compile (48 s against 35 s),
so the steps wait for a form that compiles as fast.
"""

from __future__ import annotations

import numpy as np

from . import rules
from .jit import njit
from .kernel import ARRIVAL, PHASE_END
from .kernel_jobs import (
    after_check,
    attained_service,
    charge,
    decide,
    first_phase,
    passed,
    phase_after,
    phase_length,
    rank_of,
    reported,
    running_key,
    sliced_speed,
)
from .kernel_layout import (
    COMPLETED,
    DECISION,
    ERR_GPUS,
    ERR_LEFT_WAITING,
    ERR_PAST,
    F_ANSWER,
    F_NOW,
    IDLE,
    N_FLOAT_SLOTS,
    N_INT_SLOTS,
    OK,
    PASS,
    PREEMPTED,
    ROOM,
    RUNNING,
    S_AGENT_PASSES,
    S_FREE,
    S_HEAP,
    S_N,
    S_N_CONT,
    S_N_RUN,
    S_N_WAIT,
    S_NEEDS_PASS,
    S_NEXT_ARRIVAL,
    S_PENDING,
    S_POPPED,
    S_RHEAP,
    S_SEQ,
    S_STARTS,
    STOPPED,
    TRAIN,
    Jobs,
    LoopState,
    Outcome,
    Platform,
    Scratch,
    borrowed,
    new_loop,
    scratch,
    setup,
    with_room,
)
from .kernel_queues import (
    before,
    best_waiting,
    fill,
    heap_pop,
    leave_running,
    push_event,
    ranks_before,
    store_running_key,
    wait_pop,
    wait_push,
)
from .rules import RULE_AGENT
from .transitions import CHECK, COMPLETE, STOP

# the engine's surface: what `native.py`, the compiled batch and the tests use
__all__ = ["COMPLETED", "DECISION", "ERR_GPUS", "ERR_LEFT_WAITING", "ERR_PAST", "F_ANSWER",
           "F_NOW", "N_FLOAT_SLOTS", "N_INT_SLOTS", "OK", "ROOM", "RULE_AGENT", "S_FREE", "S_N",
           "S_N_CONT", "S_N_RUN", "S_N_WAIT", "S_PENDING", "S_POPPED", "STOPPED", "Jobs",
           "LoopState", "Outcome", "Platform", "Scratch", "advance", "decide", "decline_critical",
           "decline_evidence", "new_loop", "passed", "rank_of", "reported", "run", "scratch",
           "setup", "with_room"]

decline_evidence = rules.compiled(rules.decline_evidence)   # DeclineTest's, from plain Python
decline_critical = rules.compiled(rules.decline_critical)


@njit(cache=True)
def advance(spec, jobs, out, loop, pass_space):
    """Run events from where the loop stopped (`loop`) until the end (OK or an ERR_*), a
    check of a monitored job under RULE_AGENT (DECISION: answer in float_slots[F_ANSWER], NaN to
    continue, and call again), a scheduling pass when int_slots[S_AGENT_PASSES] is set (PASS: the
    caller allocates, `env/full_step.py`), or a heap with too little room (ROOM: grow it, call
    again)."""
    jobs, out, loop, pass_space = borrowed(jobs, out, loop, pass_space)
    (total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant, p_stop,
     threshold, window, slice_share, time_sliced, rekeys_at_checks, rekeys_at_passes) = spec
    (arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced, chk_ptr, chk_prog,
     chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog) = jobs
    (state, work, next_check, epoch, has_run, first_start, end_time, gpu_min, gpu_after, n_pre,
     phase_start, chk_time, stop_value) = out
    (phase, cls_gpus, cls, cls_off, cls_size, wait, major, key, run_seq, run_list, run_pos,
     run_version, arrivals, heap, rheap, int_slots, float_slots, continued) = loop
    after, top, pending, prefix, sizes, keep, to_start, to_preempt = pass_space
    n = int_slots[S_N]
    free, seq, next_arrival = int_slots[S_FREE], int_slots[S_SEQ], int_slots[S_NEXT_ARRIVAL]
    popped, needs_pass = int_slots[S_POPPED], int_slots[S_NEEDS_PASS] != 0
    n_wait, n_run, starts = int_slots[S_N_WAIT], int_slots[S_N_RUN], int_slots[S_STARTS]
    n_heap, n_rheap = int_slots[S_HEAP], int_slots[S_RHEAP]
    resume, n_cont = int_slots[S_PENDING], int_slots[S_N_CONT]
    now = float_slots[F_NOW]
    agent = rule == RULE_AGENT
    agent_passes = int_slots[S_AGENT_PASSES] != 0   # the full-control hook: pause at passes
    status = OK

    j, value = -1, np.nan
    while True:
        if n_heap + n + 1 >= heap.shape[0] or n_rheap + 2 * n + 2 >= rheap.shape[0]:
            status = ROOM                      # a pass pushes at most n entries into each
            break
        checked = -1
        if resume >= 0:                        # the agent answered the check of job `resume`
            j, checked, resume = resume, resume, -1
            value = float_slots[F_ANSWER]
            new_phase = -1
            finished = -1
        else:
            # ------------------------------------------------------------ Cluster._next
            from_arrivals = next_arrival < n and (
                n_heap == 0 or arrival[arrivals[next_arrival]] < heap[0, 0])
            if from_arrivals:
                next_time = arrival[arrivals[next_arrival]]
            elif n_heap > 0:
                next_time = heap[0, 0]
            else:
                next_time = np.nan             # no event left
            if needs_pass and next_time != now:
                needs_pass = False
                if agent_passes:               # the caller allocates (env/full_step.py)
                    status = PASS
                    break
                if n_wait == 0:
                    continue                   # the fill keeps every running job, starts none
                # -------------------------------------------- PriorityScheduler.schedule
                if not preemptive:
                    n_after = 0
                    n_start = fill(free, after, 0, gpus, arrival, cls, cls_gpus, cls_off,
                                    cls_size, wait, major, key, keep, to_start, 0)
                else:
                    # PriorityIndex.allocate, lazily: running jobs are taken from the bottom of
                    # the ranking up (their stored keys bound their keys from above: keys never
                    # rise while a job runs between two checks), until the waiting jobs ranked
                    # before the lowest one taken fit in the GPUs it and those below it free.
                    # Every running job above it keeps its GPUs whatever the exact order; the
                    # exact fill covers the rest.
                    if rekeys_at_passes:   # keys that rose as their jobs ran, stored afresh
                        n_rheap = 0
                        for q in range(n_run):
                            j = run_list[q]
                            major[j], key[j] = running_key(
                                key_kind, j, now, phase, work, phase_start, speed, duration,
                                gpu_min, gpus, arrival, dur_est, paced, chk_ptr, chk_prog,
                                chk_work, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                            n_rheap = store_running_key(rheap, n_rheap, j, major, key,
                                                         arrival, run_version)
                    first = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key,
                                          arrival, total_gpus)
                    n_top, n_pending, n_prefix = 0, 0, 0
                    room = free
                    while True:
                        nxt = -1
                        while True:            # the next running job down the ranking
                            while n_rheap > 0 and (
                                    run_pos[int(-rheap[0, 3])] < 0
                                    or rheap[0, 4] != run_version[int(-rheap[0, 3])]):
                                n_rheap = heap_pop(rheap, n_rheap)   # stale: ended, preempted
                            bound = -1         # or re-keyed; the largest stored entry ranked
                            if n_rheap > 0 and before(               # after `first`
                                    major[first], key[first], arrival[first], first,
                                    -rheap[0, 0], -rheap[0, 1], -rheap[0, 2], -rheap[0, 3]):
                                bound = int(-rheap[0, 3])
                            if n_pending > 0:
                                m = pending[n_pending - 1]
                                if bound < 0 or before(-rheap[0, 0], -rheap[0, 1],
                                                        -rheap[0, 2], bound, major[m], key[m],
                                                        arrival[m], m):
                                    nxt = m
                                    n_pending -= 1
                                    break
                            if bound < 0:
                                break
                            n_rheap = heap_pop(rheap, n_rheap)
                            j = bound
                            major[j], key[j] = running_key(
                                key_kind, j, now, phase, work, phase_start, speed, duration,
                                gpu_min, gpus, arrival, dur_est, paced, chk_ptr, chk_prog,
                                chk_work, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                            if ranks_before(first, j, major, key, arrival):
                                r = n_pending      # pending stays ascending
                                while r > 0 and ranks_before(j, pending[r - 1], major, key,
                                                              arrival):
                                    pending[r] = pending[r - 1]
                                    r -= 1
                                pending[r] = j
                                n_pending += 1
                            else:
                                n_rheap = store_running_key(rheap, n_rheap, j, major, key,
                                                             arrival, run_version)
                        if nxt < 0:            # the whole tail is ranked: the plain fill
                            for k in range(n_prefix):
                                wait_push(prefix[k], cls, cls_off, cls_size, wait, major,
                                           key, arrival)
                            taken = 0
                            break
                        top[n_top] = nxt
                        n_top += 1
                        room += gpus[nxt]
                        while sizes[n_prefix] <= room and (n_prefix == 0 or ranks_before(
                                prefix[n_prefix - 1], nxt, major, key, arrival)):
                            m = best_waiting(cls_gpus, cls_off, cls_size, wait, major, key,
                                              arrival, total_gpus)
                            if m < 0 or ranks_before(nxt, m, major, key, arrival):
                                break
                            wait_pop(cls[m], cls_off, cls_size, wait, major, key, arrival)
                            prefix[n_prefix] = m
                            sizes[n_prefix + 1] = sizes[n_prefix] + gpus[m]
                            n_prefix += 1
                        taken = n_prefix
                        while taken > 0 and ranks_before(nxt, prefix[taken - 1], major, key,
                                                          arrival):
                            taken -= 1
                        if sizes[taken] <= room:   # everything ranked above nxt fits: settled
                            for k in range(taken, n_prefix):
                                wait_push(prefix[k], cls, cls_off, cls_size, wait, major,
                                           key, arrival)
                            break
                    for k in range(taken):
                        to_start[k] = prefix[k]
                    n_after = n_top
                    for k in range(n_top):     # the ranked tail, ascending
                        after[k] = top[n_top - 1 - k]
                    n_start = fill(room - sizes[taken], after, n_after, gpus, arrival, cls,
                                    cls_gpus, cls_off, cls_size, wait, major, key, keep,
                                    to_start, taken)
                    for k in range(n_pending):     # ranked but above the settled point: kept
                        j = pending[k]
                        n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                n_wait -= n_start
                # -------------------------------------------- Cluster._apply: preempt, start
                n_drop = 0
                for i in range(n_after):       # not kept, in start order
                    j = after[i]
                    if keep[j]:
                        n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                    else:
                        to_preempt[n_drop] = j
                        n_drop += 1
                if n_drop > 1:
                    order = np.argsort(run_seq[to_preempt[:n_drop]])
                    to_preempt[:n_drop] = to_preempt[:n_drop][order]
                for i in range(n_drop):        # Cluster._preempt
                    j = to_preempt[i]
                    charge(j, now, phase, work, phase_start, gpus, duration, speed, peak,
                            gpu_min, gpu_after)
                    n_run = leave_running(j, run_list, run_pos, run_seq, n_run)
                    major[j], key[j] = rank_of(key_kind, j, reported(
                        j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work),
                        attained_service(j, now, phase, phase_start, gpu_min, gpus), arrival,
                        dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score)
                    wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival)
                    n_wait += 1
                    free += gpus[j]
                    state[j] = PREEMPTED
                    phase[j] = IDLE
                    epoch[j] += 1
                    n_pre[j] += 1
                    needs_pass = True
                for i in range(n_start):       # Cluster._start
                    j = to_start[i]
                    starts += 1
                    run_seq[j] = starts
                    run_list[n_run] = j
                    run_pos[j] = n_run
                    n_run += 1
                    free -= gpus[j]
                    if free < 0:               # Cluster._set_free's guard
                        status = ERR_GPUS
                        break
                    if preemptive:             # its waiting key: its key now, as it starts
                        n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival,
                                                     run_version)
                    state[j] = RUNNING
                    if np.isnan(first_start[j]):
                        first_start[j] = now
                    phase[j] = first_phase(has_run[j], overhead)   # Cluster._start_phase
                    has_run[j] = True
                    phase_start[j] = now
                    length = phase_length(j, chk_work, chk_ptr, next_check, work, duration,
                                           speed, phase[j], overhead, eval_min)
                    seq += 1
                    n_heap = push_event(heap, n_heap, now + length, seq, j, epoch[j])
                if status != OK:
                    break
                continue
            if np.isnan(next_time):
                status = ERR_LEFT_WAITING if n_wait > 0 else OK
                break
            # ------------------------------------------------------------ Cluster._handle
            if from_arrivals:                  # (a pass would have looped back above)
                t, kind, j, ev_epoch = next_time, ARRIVAL, arrivals[next_arrival], 0
                next_arrival += 1
            else:
                t, j, ev_epoch = heap[0, 0], int(heap[0, 2]), int(heap[0, 3])
                n_heap = heap_pop(heap, n_heap)
                kind = PHASE_END
            if t < now:
                status = ERR_PAST
                break
            now = t
            popped += 1
            if kind == ARRIVAL:
                major[j], key[j] = rank_of(key_kind, j, reported(
                    j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work), 0.0, arrival,
                    dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score)  # unserved
                wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival)
                n_wait += 1
                needs_pass = True
                continue
            if ev_epoch != epoch[j]:
                continue
            charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                    gpu_after)
            c = chk_ptr[j] + next_check[j]
            new_phase = phase_after(phase[j], chk_idx[c])
            finished = -1
            if phase[j] == TRAIN:              # at the check point
                work[j] = chk_work[c]
            if new_phase == COMPLETE:
                next_check[j] += 1
                new_phase, finished = -1, COMPLETED
            elif new_phase == CHECK:
                # -------------------------------------------- Cluster._check, answer_check
                phase[j] = IDLE
                chk_time[c] = now
                next_check[j] += 1
                if chk_idx[c] >= 0:
                    needs_pass = True
                if agent and k_by_type[jtype[j]] != 0:
                    resume = j                 # the agent answers: pause here
                    status = DECISION
                    break
                value = decide(j, rule, k_by_type, best_variant, p_stop, threshold, window,
                                jtype, reported(j, work[j], paced, chk_ptr, next_check,
                                                 chk_prog, chk_work), chk_ptr, chk_idx,
                                chk_loss, next_check, ev_ptr, ev_score, ev_prog)
                checked = j
        if checked >= 0:                       # answer_check
            stop = not np.isnan(value)
            if stop:
                stop_value[j] = value
            elif agent:                        # what the env's reward charges to a continue
                continued[n_cont] = j
                n_cont += 1
            follows = after_check(stop, next_check[j], chk_ptr[j + 1] - chk_ptr[j])
            if follows == STOP:
                finished = STOPPED
            elif follows == COMPLETE:
                finished = COMPLETED
            else:
                new_phase = TRAIN
                if (preemptive and rekeys_at_checks) or time_sliced:
                    # a key read off the history may rise at a check: store it afresh, as
                    # the cluster's change log makes PriorityIndex re-view the job
                    major[j], key[j] = rank_of(key_kind, j, reported(
                        j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work),
                        attained_service(j, now, phase, phase_start, gpu_min, gpus),
                        arrival, dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr,
                        ev_score)
                    if preemptive:
                        n_rheap = store_running_key(rheap, n_rheap, j, major, key,
                                                     arrival, run_version)
                    if time_sliced:   # Cluster._slice: demoted, sliced
                        speed[j] = sliced_speed(1.0, slice_share, major[j] < 0)
        if finished >= 0:                      # Cluster._end (the job is running)
            charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                    gpu_after)
            n_run = leave_running(j, run_list, run_pos, run_seq, n_run)
            free += gpus[j]
            state[j] = finished
            phase[j] = IDLE
            epoch[j] += 1
            end_time[j] = now
            needs_pass = True
        elif new_phase >= 0:                   # Cluster._start_phase
            phase[j] = new_phase
            phase_start[j] = now
            length = phase_length(j, chk_work, chk_ptr, next_check, work, duration, speed,
                                   new_phase, overhead, eval_min)
            seq += 1
            n_heap = push_event(heap, n_heap, now + length, seq, j, epoch[j])

    int_slots[S_FREE], int_slots[S_SEQ], int_slots[S_NEXT_ARRIVAL] = free, seq, next_arrival
    int_slots[S_POPPED], int_slots[S_NEEDS_PASS] = popped, needs_pass
    int_slots[S_N_WAIT], int_slots[S_N_RUN], int_slots[S_STARTS] = n_wait, n_run, starts
    int_slots[S_HEAP], int_slots[S_RHEAP] = n_heap, n_rheap
    int_slots[S_PENDING], int_slots[S_N_CONT] = resume, n_cont
    float_slots[F_NOW] = now
    return status


@njit(cache=True)
def run(total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant, p_stop,
        threshold, window, slice_share, time_sliced, rekeys_at_checks, rekeys_at_passes,
        arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced,
        chk_ptr, chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog,
        state, work, next_check, epoch, has_run, first_start, end_time, gpu_min, gpu_after,
        n_pre, phase_start, chk_time, stop_value):
    """Run every job to its end; fills the state arrays in place. Returns (status, events)."""
    n = arrival.shape[0]
    loop = new_loop(total_gpus, arrival, gpus, 0)
    work_space = scratch(n)
    spec = Platform(total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant,
                    p_stop, threshold, window, slice_share, time_sliced, rekeys_at_checks,
                    rekeys_at_passes)
    jobs = Jobs(arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced, chk_ptr,
                chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog)
    out = Outcome(state, work, next_check, epoch, has_run, first_start, end_time, gpu_min,
                  gpu_after, n_pre, phase_start, chk_time, stop_value)
    while True:
        status = advance(spec, jobs, out, loop, work_space)
        if status != ROOM:
            return status, loop.int_slots[S_POPPED]
        loop = with_room(loop)
