"""The compiled event loop's steps, named after what `Cluster` does (`cluster.py`): find the next
event, take it off its queue, let a job arrive, end a phase, ask the stop rule, answer a check,
start a phase, end a job.

A step takes the cluster's NamedTuples (views that hold no reference, `kernel_layout.borrowed`)
or the few arrays it uses, and moves the loop's scalars in `slots` (`LoopState.int_slots`, by
the S_* names), where a cluster paused at a decision keeps them. Each `step` is compiled once and
LLVM inlines it wherever it is called (`forceinline`), so the loop still runs as one function; a
`part` is compiled into the one step that uses it. Measured on E2 (kernel time per run, cold
compile in a fresh process): the steps inlined by numba at each call site instead took ~25%
longer to compile, and left as calls they ran 2-3x slower (a call passes every array's seven
fields).
What a job does is not written here: a phase's cost and length, its work and what follows a
phase's end or a check's answer are `transitions.py`'s functions, the keys and stop rules
`rules.py`'s (compiled in `kernel_jobs`).
"""

from __future__ import annotations

import numpy as np

from .jit import njit
from .kernel_jobs import (
    after_check,
    attained_service,
    charge,
    decide,
    phase_after,
    phase_length,
    rank_of,
    reported,
    sliced_speed,
)
from .kernel_layout import (
    COMPLETED,
    IDLE,
    S_FREE,
    S_HEAP,
    S_N,
    S_N_CONT,
    S_N_RUN,
    S_N_WAIT,
    S_NEEDS_PASS,
    S_NEXT_ARRIVAL,
    S_RHEAP,
    S_SEQ,
    STOPPED,
    TRAIN,
)
from .kernel_queues import heap_pop, leave_running, push_event, store_running_key, wait_push
from .rules import RULE_AGENT
from .transitions import CHECK, COMPLETE, STOP

step = njit(cache=True, forceinline=True)
part = njit(cache=True, inline="always")   # a step's part, compiled into it


@step
def short_of_room(heap, rheap, slots):
    """A heap too small for the next step: a pass pushes at most n entries into each."""
    n = slots[S_N]
    return slots[S_HEAP] + n + 1 >= heap.shape[0] or slots[S_RHEAP] + 2 * n + 2 >= rheap.shape[0]


@step
def next_event(arrival, arrivals, heap, slots):
    """Cluster._next: the next event's time (NaN: none is left) and whether it is an arrival.
    Arrivals come off the list sorted by arrival, phase ends off the heap."""
    k, n_heap = slots[S_NEXT_ARRIVAL], slots[S_HEAP]
    if k < slots[S_N] and (n_heap == 0 or arrival[arrivals[k]] < heap[0, 0]):
        return arrival[arrivals[k]], True
    if n_heap > 0:
        return heap[0, 0], False
    return np.nan, False


@step
def take_event(arrivals, heap, slots, from_arrivals):
    """Cluster._handle's pop: the event's job and epoch (an arrival's is 0)."""
    if from_arrivals:
        slots[S_NEXT_ARRIVAL] += 1
        return arrivals[slots[S_NEXT_ARRIVAL] - 1], 0
    j, epoch = int(heap[0, 2]), int(heap[0, 3])
    slots[S_HEAP] = heap_pop(heap, slots[S_HEAP])
    return j, epoch


@part
def key_now(key_kind, j, service, work, next_check, arrival, dur_est, paced, chk_ptr, chk_prog,
            chk_work, chk_idx, chk_loss, ev_ptr, ev_score):
    """Job j's key on the progress its work so far reports and `service` (GPU-minutes held)."""
    return rank_of(key_kind, j, reported(j, work[j], paced, chk_ptr, next_check, chk_prog,
                                         chk_work),
                   service, arrival, dur_est, chk_ptr, chk_idx, chk_loss, next_check, ev_ptr,
                   ev_score)


@step
def arrive(spec, jobs, out, loop, j):
    """Job j arrives: it waits under its key, unserved, for the next pass."""
    major, key = loop.major, loop.key
    major[j], key[j] = key_now(spec.key_kind, j, 0.0, out.work, out.next_check, jobs.arrival,
                               jobs.dur_est, jobs.paced, jobs.chk_ptr, jobs.chk_prog,
                               jobs.chk_work, jobs.chk_idx, jobs.chk_loss, jobs.ev_ptr,
                               jobs.ev_score)
    wait_push(j, loop.cls, loop.cls_off, loop.cls_size, loop.wait, major, key, jobs.arrival)
    loop.int_slots[S_N_WAIT] += 1
    loop.int_slots[S_NEEDS_PASS] = 1


@step
def end_phase(jobs, out, loop, j, now):
    """Cluster._handle of job j's phase end: the phase charged, then what follows
    (`transitions.phase_after`): the next phase, COMPLETE, or CHECK (Cluster._check: the check's
    time noted, its answer still to come)."""
    phase, next_check = loop.phase, out.next_check
    charge(j, now, phase, out.work, out.phase_start, jobs.gpus, jobs.duration, jobs.speed,
           jobs.peak, out.gpu_min, out.gpu_after)
    c = jobs.chk_ptr[j] + next_check[j]
    follows = phase_after(phase[j], jobs.chk_idx[c])
    if phase[j] == TRAIN:                      # at the check point
        out.work[j] = jobs.chk_work[c]
    if follows == COMPLETE:
        next_check[j] += 1
    elif follows == CHECK:
        phase[j] = IDLE
        out.chk_time[c] = now
        next_check[j] += 1
        if jobs.chk_idx[c] >= 0:               # an eval: the keys may change
            loop.int_slots[S_NEEDS_PASS] = 1
    return follows


@step
def stop_rule(spec, jobs, out, j):
    """The stop rule's answer to job j's check (`kernel_jobs.decide`): NaN to continue."""
    return decide(j, spec.rule, spec.k_by_type, spec.best_variant, spec.p_stop, spec.threshold,
                  spec.window, jobs.jtype, reported(j, out.work[j], jobs.paced, jobs.chk_ptr,
                                                    out.next_check, jobs.chk_prog,
                                                    jobs.chk_work),
                  jobs.chk_ptr, jobs.chk_idx, jobs.chk_loss, out.next_check, jobs.ev_ptr,
                  jobs.ev_score, jobs.ev_prog)


@step
def answer_check(spec, jobs, out, loop, j, value, now):
    """Cluster.answer_check: job j's check answered `value` (NaN: continue). Returns what
    follows (`transitions.after_check`): TRAIN, COMPLETE or STOP."""
    stop = not np.isnan(value)
    slots = loop.int_slots
    if stop:
        out.stop_value[j] = value
    elif spec.rule == RULE_AGENT:              # what the env's reward charges to a continue
        loop.continued[slots[S_N_CONT]] = j
        slots[S_N_CONT] += 1
    follows = after_check(stop, out.next_check[j], jobs.chk_ptr[j + 1] - jobs.chk_ptr[j])
    if follows == TRAIN and ((spec.preemptive and spec.rekeys_at_checks) or spec.time_sliced):
        rekey_at_check(j, now, spec.key_kind, spec.preemptive, spec.time_sliced,
                       spec.slice_share, out.work, out.next_check, jobs.arrival, jobs.dur_est,
                       jobs.paced, jobs.chk_ptr, jobs.chk_prog, jobs.chk_work, jobs.chk_idx,
                       jobs.chk_loss, jobs.ev_ptr, jobs.ev_score, loop.phase, out.phase_start,
                       out.gpu_min, jobs.gpus, jobs.speed, loop.major, loop.key, loop.rheap,
                       loop.run_version, slots)
    return follows


@part
def rekey_at_check(j, now, key_kind, preemptive, time_sliced, slice_share, work, next_check,
                   arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss, ev_ptr,
                   ev_score, phase, phase_start, gpu_min, gpus, speed, major, key, rheap,
                   run_version, slots):
    """A key read off the history may rise at a check: stored afresh, as the cluster's change
    log makes PriorityIndex re-view the job; a time-sliced job demoted by it is sliced
    (Cluster._slice)."""
    major[j], key[j] = key_now(key_kind, j, attained_service(j, now, phase, phase_start, gpu_min,
                                                             gpus),
                               work, next_check, arrival, dur_est, paced, chk_ptr, chk_prog,
                               chk_work, chk_idx, chk_loss, ev_ptr, ev_score)
    if preemptive:
        slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], j, major, key, arrival,
                                           run_version)
    if time_sliced:
        speed[j] = sliced_speed(1.0, slice_share, major[j] < 0)


@step
def start_phase(j, new_phase, now, overhead, phase, phase_start, work, next_check, epoch,
                chk_ptr, chk_work, duration, speed, eval_min, heap, slots):
    """Cluster._start_phase: job j enters `new_phase`; its end is queued."""
    phase[j] = new_phase
    phase_start[j] = now
    length = phase_length(j, chk_work, chk_ptr, next_check, work, duration, speed, new_phase,
                          overhead, eval_min)
    slots[S_SEQ] += 1
    slots[S_HEAP] = push_event(heap, slots[S_HEAP], now + length, slots[S_SEQ], j, epoch[j])


@part
def requeue(j, now, key_kind, work, next_check, arrival, dur_est, paced, chk_ptr, chk_prog,
            chk_work, chk_idx, chk_loss, ev_ptr, ev_score, phase, phase_start, gpu_min, gpus, cls,
            cls_off, cls_size, wait, major, key, slots):
    """Job j, preempted, waits again under its key now, served so far (Cluster._preempt)."""
    major[j], key[j] = key_now(key_kind, j, attained_service(j, now, phase, phase_start, gpu_min,
                                                             gpus),
                               work, next_check, arrival, dur_est, paced, chk_ptr, chk_prog,
                               chk_work, chk_idx, chk_loss, ev_ptr, ev_score)
    wait_push(j, cls, cls_off, cls_size, wait, major, key, arrival)
    slots[S_N_WAIT] += 1


@part
def stop_running(j, final, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                 gpu_after, state, epoch, run_list, run_pos, run_seq, slots):
    """Running job j leaves the running set in state `final` (ended or preempted), its phase
    charged and its GPUs freed for the next pass; the end of its phase goes stale."""
    charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min, gpu_after)
    slots[S_N_RUN] = leave_running(j, run_list, run_pos, run_seq, slots[S_N_RUN])
    slots[S_FREE] += gpus[j]
    state[j] = final
    phase[j] = IDLE
    epoch[j] += 1
    slots[S_NEEDS_PASS] = 1


@part
def end_job(j, final, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
            gpu_after, state, epoch, end_time, run_list, run_pos, run_seq, slots):
    """Cluster._end: running job j ends in state `final` (COMPLETED or STOPPED)."""
    stop_running(j, final, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
                 gpu_after, state, epoch, run_list, run_pos, run_seq, slots)
    end_time[j] = now


@step
def settle(spec, jobs, out, loop, j, follows, now):
    """What follows a phase's end or a check's answer: the phase `follows` starts, or the job
    ends (`transitions.COMPLETE`, `transitions.STOP`)."""
    if follows >= 0:
        start_phase(j, follows, now, spec.overhead, loop.phase, out.phase_start, out.work,
                    out.next_check, out.epoch, jobs.chk_ptr, jobs.chk_work, jobs.duration,
                    jobs.speed, jobs.eval_min, loop.heap, loop.int_slots)
    else:
        end_job(j, STOPPED if follows == STOP else COMPLETED, now, loop.phase, out.work,
                out.phase_start, jobs.gpus, jobs.duration, jobs.speed, jobs.peak, out.gpu_min,
                out.gpu_after, out.state, out.epoch, out.end_time, loop.run_list, loop.run_pos,
                loop.run_seq, loop.int_slots)
