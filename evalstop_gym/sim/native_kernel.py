"""The compiled event loop: `Cluster.run` over arrays, for priority schedulers and stop rules.

`advance` is a short loop over named steps, each what `Cluster` (`cluster.py`) does there: find
the next event, run a scheduling pass (`kernel_pass`; the preemptive allocation in
`kernel_allocate`), let a job arrive, end a phase, ask the stop rule, answer a check, then start
the job's next phase or end it (`kernel_steps`). What a job does is not written in the steps: a
phase's cost and length, its work, and what follows a phase's end, a check's answer or a start
are `transitions.py`'s functions, the keys and stop rules `rules.py`'s, all of which `Cluster`
calls too (compiled in `kernel_jobs`); the queues are `kernel_queues`', the arrays
`kernel_layout`'s. `native.py` packs the jobs and unpacks the results; `tests/test_native.py`
compares the two engines run for run.

The loop is resumable: `advance` runs it from a `LoopState` (what `Cluster` keeps between two
`next_decision` calls; the loop's scalars live in its `int_slots` and `float_slots`) and, under
`rules.RULE_AGENT`, returns at each check of a monitored job type for an agent's answer,
resuming at the answer. `run` calls it to the end (the built-in policies); `env/batch_step.py`
calls it per decision for N clusters.

Written for numba (`jit.py` says where its cache lives); without it the same functions run as
plain Python (slowly), which keeps them debuggable with pdb. `advance` first borrows its arrays
(`kernel_layout.borrowed`: views that hold no reference), since numba leaves two atomic
reference-count calls per array wherever NamedTuples of them are passed or unpacked.
"""

from __future__ import annotations

import numpy as np

from . import rules
from .jit import njit
from .kernel_jobs import decide, passed, rank_of, reported
from .kernel_layout import (
    COMPLETED,
    DECISION,
    ERR_GPUS,
    ERR_LEFT_WAITING,
    ERR_PAST,
    F_ANSWER,
    F_NOW,
    N_FLOAT_SLOTS,
    N_INT_SLOTS,
    OK,
    PASS,
    ROOM,
    S_AGENT_PASSES,
    S_FREE,
    S_N,
    S_N_CONT,
    S_N_RUN,
    S_N_WAIT,
    S_NEEDS_PASS,
    S_PENDING,
    S_POPPED,
    STOPPED,
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
from .kernel_pass import schedule_pass
from .kernel_steps import (
    answer_check,
    arrive,
    end_phase,
    next_event,
    settle,
    short_of_room,
    stop_rule,
    take_event,
)
from .rules import RULE_AGENT
from .transitions import CHECK

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
    arrival, epoch, arrivals, heap = jobs.arrival, out.epoch, loop.arrivals, loop.heap
    slots, clock = loop.int_slots, loop.float_slots
    while True:
        if short_of_room(heap, loop.rheap, slots):
            return ROOM
        now, j, follows = clock[F_NOW], slots[S_PENDING], CHECK
        if j >= 0:                             # the agent answered the check of job j
            slots[S_PENDING], value = -1, clock[F_ANSWER]
        else:
            t, from_arrivals = next_event(arrival, arrivals, heap, slots)
            if slots[S_NEEDS_PASS] != 0 and t != now:
                slots[S_NEEDS_PASS] = 0
                if slots[S_AGENT_PASSES] != 0:   # the caller allocates (env/full_step.py)
                    return PASS
                if slots[S_N_WAIT] == 0:
                    continue                   # the fill keeps every running job, starts none
                if schedule_pass(spec, jobs, out, loop, pass_space, now) != OK:
                    return ERR_GPUS
                continue
            if np.isnan(t):
                return ERR_LEFT_WAITING if slots[S_N_WAIT] > 0 else OK
            j, event_epoch = take_event(arrivals, heap, slots, from_arrivals)
            if t < now:
                return ERR_PAST
            clock[F_NOW] = now = t
            slots[S_POPPED] += 1
            if from_arrivals:
                arrive(spec, jobs, out, loop, j)
                continue
            if event_epoch != epoch[j]:
                continue                       # the phase of an earlier run: preempted since
            follows = end_phase(jobs, out, loop, j, now)
            if follows == CHECK:
                if spec.rule == RULE_AGENT and spec.k_by_type[jobs.jtype[j]] != 0:
                    slots[S_PENDING] = j       # the agent answers: pause here
                    return DECISION
                value = stop_rule(spec, jobs, out, j)
        if follows == CHECK:
            follows = answer_check(spec, jobs, out, loop, j, value, now)
        settle(spec, jobs, out, loop, j, follows, now)


def run(total_gpus, overhead, key_kind, preemptive, rule, k_by_type, best_variant, p_stop,
        threshold, window, slice_share, time_sliced, rekeys_at_checks, rekeys_at_passes,
        arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced,
        chk_ptr, chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog,
        state, work, next_check, epoch, has_run, first_start, end_time, gpu_min, gpu_after,
        n_pre, phase_start, chk_time, stop_value):
    """Run every job to its end; fills the state arrays in place. Returns (status, events).
    Plain Python around the compiled `advance`: compiled, it would link and optimize all of
    `advance` a second time (a fifth of the kernel's cold compile) to save one call."""
    loop = new_loop(total_gpus, arrival, gpus, 0)
    spec = Platform(int(total_gpus), float(overhead), int(key_kind), bool(preemptive), int(rule),
                    k_by_type, bool(best_variant), float(p_stop), float(threshold), int(window),
                    float(slice_share), bool(time_sliced), bool(rekeys_at_checks),
                    bool(rekeys_at_passes))
    jobs = Jobs(arrival, gpus, duration, dur_est, eval_min, peak, speed, jtype, paced, chk_ptr,
                chk_prog, chk_work, chk_idx, chk_loss, ev_ptr, ev_score, ev_prog)
    out = Outcome(state, work, next_check, epoch, has_run, first_start, end_time, gpu_min,
                  gpu_after, n_pre, phase_start, chk_time, stop_value)
    work_space = scratch(arrival.shape[0])
    while True:
        status = advance(spec, jobs, out, loop, work_space)
        if status != ROOM:
            return int(status), int(loop.int_slots[S_POPPED])
        loop = with_room(loop)
