"""The compiled half of `CompiledFullBatch`: one jitted call answers every env's scheduling pass.

Each env is the compiled engine's event loop paused at every scheduling pass
(`int_slots[S_AGENT_PASSES]`, status `PASS`), as `EvalStopClusterEnv(control="full")` stops at
every `ScheduleRequest`. `full_step_all` applies each env's action the way the single env's
`_answer_schedule` and `_allocate` do (the agent's stops on running rows, its pick first if it
fits, then the base's greedy fill over the rest, preempting only without a pick, its starts
kept in its order while they fit), runs the env to its next pass, and writes its reward and
table observation. The fill is the engine's (`kernel_queues.fill`, over the waiting heaps), the
reward is `reward.py`'s plain functions, compiled; the table is `full_table.py`'s.
"""

from __future__ import annotations

import numpy as np

from ..sim import kernel_jobs, kernel_queues, rules
from ..sim import kernel_layout as layout
from ..sim import native_kernel as kernel
from ..sim.borrowed import borrow
from ..sim.jit import njit
from ..sim.kernel_layout import PASS, STOPPED, Platform, borrowed
from ..sim.kernel_pass import preempt, start
from ..sim.kernel_steps import end_job, part
from .batch_arrays import R_LAST, R_OPEN, R_TOTAL, BatchArrays, Extra
from .batch_rows import jobs_row, loop_row, out_row, row, truth_row
from .batch_step import _system_integrals
from .full_table import ROW, write_table
from .inlined import inlined, uncounted
from .reward import (
    admitted_by,
    held_minutes,
    step_terms,
    stop_quality_lost,
    sweep_open,
    weighted_reward,
)

# the allocation's helpers, inlined with what they call (`inlined.py`): a running job's key and
# the waiting heaps, per running job and per start of every env at every pass
_running_key = inlined(
    kernel_jobs.running_key, reported=inlined(kernel_jobs.reported),
    rank_of=inlined(kernel_jobs.rank_of, _priority_key=inlined(rules.priority_key)))
_ranks_before = inlined(kernel_queues.ranks_before, before=inlined(kernel_queues.before))
_wait_push = inlined(kernel_queues.wait_push, ranks_before=_ranks_before)
_wait_pop = inlined(kernel_queues.wait_pop, ranks_before=_ranks_before)
_fill = inlined(kernel_queues.fill, ranks_before=_ranks_before,
                best_waiting=inlined(kernel_queues.best_waiting, ranks_before=_ranks_before),
                wait_pop=_wait_pop)
_wait_remove = inlined(kernel_queues.wait_remove, wait_pop=_wait_pop)   # the agent's pick
# the reward's sweep of every open job, at every pass of every env
_integrals = inlined(_system_integrals, admitted_by=inlined(admitted_by),
                     sweep_open=inlined(sweep_open), held_minutes=inlined(held_minutes))



@part
def _ranked_running(spec, jobs, out, loop, sp, now, n_stop, first):
    """The running jobs but the stopped ones, each keyed as a view taken now shows it (in
    sp.prefix in running order, for preemptions), and the pick, into sp.after in rank order.
    Returns how many."""
    after, arrival, major, key = sp.after, jobs.arrival, loop.major, loop.key
    n_after = 0
    for q in range(loop.int_slots[layout.S_N_RUN]):
        j = loop.run_list[q]
        stopped = False
        for s in range(n_stop):
            stopped = stopped or sp.top[s] == j
        if stopped:
            continue
        major[j], key[j] = _running_key(
            spec.key_kind, j, now, loop.phase, out.work, out.phase_start, jobs.speed,
            jobs.duration, out.gpu_min, jobs.gpus, arrival, jobs.dur_est, jobs.paced,
            jobs.chk_ptr, jobs.chk_prog, jobs.chk_work, jobs.chk_idx, jobs.chk_loss,
            out.next_check, jobs.ev_ptr, jobs.ev_score)
        sp.prefix[n_after] = j
        after[n_after] = j
        n_after += 1
    if first >= 0:
        after[n_after] = first
        n_after += 1
    for q in range(1, n_after):             # rank order, ascending (insertion)
        j = after[q]
        r = q
        while r > 0 and _ranks_before(j, after[r - 1], major, key, arrival):
            after[r] = after[r - 1]
            r -= 1
        after[r] = j
    return n_after


@part
def _kept_starts(loop, sp, gpus, arrival, n_start, free):
    """The base's starts kept in its order while they fit in `free` GPUs; the others stay
    waiting. Returns how many are kept (first in sp.to_start)."""
    kept = 0
    for q in range(n_start):
        j = sp.to_start[q]
        if gpus[j] <= free:
            sp.to_start[kept] = j
            kept += 1
            free -= gpus[j]
        else:
            _wait_push(j, loop.cls, loop.cls_off, loop.cls_size, loop.wait, loop.major,
                       loop.key, arrival)
    return kept


@uncounted
def _base_allocation(spec, jobs, out, loop, sp, now, n_stop, first, free):
    """`_allocate`'s call of the base and its filter: the base's fill over the running jobs
    (but the stopped ones; the pick last) and the waiting heaps with `free` GPUs (the stops'
    and the pick's counted), then its starts kept in its order while they fit. Returns
    (starts in sp.to_start, preemptions in sp.to_preempt)."""
    gpus, arrival, keep = jobs.gpus, jobs.arrival, sp.keep
    n_after = _ranked_running(spec, jobs, out, loop, sp, now, n_stop, first) \
        if spec.preemptive else 0
    capacity = spec.total_gpus if spec.preemptive else free
    n_start = _fill(capacity, sp.after, n_after, gpus, arrival, loop.cls, loop.cls_gpus,
                    loop.cls_off, loop.cls_size, loop.wait, loop.major, loop.key, keep,
                    sp.to_start, 0)
    n_drop = 0
    if spec.preemptive and first < 0:
        for q in range(n_after):
            j = sp.prefix[q]
            if not keep[j]:
                sp.to_preempt[n_drop] = j
                n_drop += 1
                free += gpus[j]
    return _kept_starts(loop, sp, gpus, arrival, n_start, free), n_drop


@uncounted
def _answer(spec, jobs, out, loop, sp, action, row_job, row_state):
    """`_answer_schedule` of one env: its action applied (`Cluster._apply`: stops, preemptions,
    starts). Returns how many running jobs it stopped (in sp.top, for `_stops_cost`)."""
    now = loop.float_slots[layout.F_NOW]
    n_rows = row_job.shape[0]
    n_stop = 0
    free = loop.int_slots[layout.S_FREE]
    for r in range(n_rows):                 # stop bits, honoured on running rows
        if row_state[r] == 0 and action[r] == 1:
            sp.top[n_stop] = row_job[r]
            n_stop += 1
            free += jobs.gpus[row_job[r]]
    pick, first = action[n_rows] - 1, -1
    if 0 <= pick < n_rows and row_state[pick] > 0 and jobs.gpus[row_job[pick]] <= free:
        first = row_job[pick]
        free -= jobs.gpus[first]
        _wait_remove(first, loop.cls, loop.cls_off, loop.cls_size, loop.wait, loop.major,
                     loop.key, jobs.arrival)
    n_start, n_drop = _base_allocation(spec, jobs, out, loop, sp, now, n_stop, first, free)
    for s in range(n_stop):                 # Cluster._end (stopped by the scheduler)
        end_job(sp.top[s], STOPPED, now, loop.phase, out.work, out.phase_start, jobs.gpus,
                jobs.duration, jobs.speed, jobs.peak, out.gpu_min, out.gpu_after, out.state,
                out.epoch, out.end_time, loop.run_list, loop.run_pos, loop.run_seq,
                loop.int_slots)
    if first >= 0:                          # the agent's pick starts before the base's
        for q in range(n_start, 0, -1):
            sp.to_start[q] = sp.to_start[q - 1]
        sp.to_start[0] = first
        n_start += 1
    _apply(spec, jobs, out, loop, sp, now, n_drop, n_start)
    return n_stop


@part
def _stops_cost(jobs, out, truth, stopped, n_stop):
    """The reward's terms of the running jobs `_answer` stopped (`stopped[:n_stop]`): their
    quality lost and false stops. Apart from `_answer`, which is compiled without reference
    counts: the quality lost takes numpy's max, which needs them."""
    lost, false_stops = 0.0, 0.0
    for s in range(n_stop):
        j = stopped[s]
        _, n_ev = kernel.passed(j, jobs.chk_ptr, jobs.chk_idx, out.next_check)
        e0, e1 = jobs.ev_ptr[j], jobs.ev_ptr[j + 1]
        lost += stop_quality_lost(truth.ev_point[e0:e1], truth.ev_true[e0:e1],
                                  jobs.ev_score[e0:e0 + n_ev], jobs.ev_prog[e0:e0 + n_ev])
        false_stops += 0.0 if truth.is_hacking[j] else 1.0
    return lost, false_stops




@part
def _apply(spec, jobs, out, loop, sp, now, n_drop, n_start):
    """`Cluster._apply` of the allocation: the engine's own preemptions and starts
    (`kernel_pass`), in its order."""
    loop.int_slots[layout.S_N_WAIT] -= n_start
    preempt(n_drop, now, spec.key_kind, sp.to_preempt, loop.phase, out.work, out.phase_start,
            jobs.gpus, jobs.duration, jobs.speed, jobs.peak, out.gpu_min, out.gpu_after,
            out.state, out.epoch, out.n_pre, loop.run_list, loop.run_pos, loop.run_seq,
            out.next_check, jobs.arrival, jobs.dur_est, jobs.paced, jobs.chk_ptr, jobs.chk_prog,
            jobs.chk_work, jobs.chk_idx, jobs.chk_loss, jobs.ev_ptr, jobs.ev_score, loop.cls,
            loop.cls_off, loop.cls_size, loop.wait, loop.major, loop.key, loop.int_slots)
    start(n_start, now, spec.overhead, spec.preemptive, sp.to_start, jobs.gpus, jobs.arrival,
          out.state, out.first_start, out.has_run, loop.phase, out.phase_start, out.work,
          out.next_check, out.epoch, jobs.chk_ptr, jobs.chk_work, jobs.duration, jobs.speed,
          jobs.eval_min, loop.major, loop.key, loop.heap, loop.rheap, loop.run_list,
          loop.run_pos, loop.run_seq, loop.run_version, loop.int_slots)


@part
def _full_reward(i, now, jobs, out, loop, arrays, truth, lost, false_stops, weights):
    """`RewardMeter.step` (wasted charged as it accrues) of env i; the weighted reward."""
    current = _integrals(i, now, jobs, out, loop, loop.int_slots, arrays.reward_ints,
                         arrays.reward_floats, row(arrays.open, i), row(arrays.order, i))
    floats = row(arrays.reward_floats, i)
    last = (floats[R_LAST], floats[R_LAST + 1], floats[R_LAST + 2])
    floats[R_LAST], floats[R_LAST + 1], floats[R_LAST + 2] = current
    terms = step_terms(current, last, current[2] - last[2], lost, false_stops, weights[5])
    for k in range(5):
        floats[R_TOTAL + k] += terms[k]
    return weighted_reward(weights, terms)


@njit(cache=True)
def full_step_all(spec, arrays, sp, weights, actions, pending, answered, terminated, reward_out,
                  rows, bounds, row_job, row_state, row_prog, row_gpus, row_keys, losses, lost,
                  false_stops, todo, status):
    """Every env with todo[i]: its pending action applied (pending[i]), then run to its next
    pass or its end, its reward (answered[i]: a step's; else a reset's, not returned) and its
    table written. An env whose heaps lack room returns ROOM before it moves: grow, call again.

    Every array is borrowed here once (`sim/borrowed.py`: views that hold no reference; the
    caller's arguments keep them alive): the env loop hands them to its steps per env, and with
    references each hand-over was two atomic counts per array (measured at N=64: ~14% of a
    vector step's time in numba's incref and decref)."""
    b = borrow
    jobs, out, loop, space = borrowed(arrays.jobs, arrays.out, arrays.loop, sp)
    extra = arrays.extra
    batch = BatchArrays(jobs, out, loop, Extra(b(extra.is_hacking), b(extra.peak_prog),
                                               b(extra.ev_point), b(extra.ev_true)),
                        b(arrays.open), b(arrays.order), b(arrays.reward_ints),
                        b(arrays.reward_floats))
    platform = Platform(spec.total_gpus, spec.overhead, spec.key_kind, spec.preemptive,
                        spec.rule, b(spec.k_by_type), spec.best_variant, spec.p_stop,
                        spec.threshold, spec.window, spec.slice_share, spec.time_sliced,
                        spec.rekeys_at_checks, spec.rekeys_at_passes)
    _step_envs(platform, batch, space, b(weights), b(actions), b(pending), b(answered),
               b(terminated), b(reward_out), (b(rows[0]), b(rows[1]), b(rows[2])),
               ((b(bounds[0][0]), b(bounds[0][1])), (b(bounds[1][0]), b(bounds[1][1]))),
               b(row_job), b(row_state), b(row_prog), b(row_gpus), b(row_keys),
               (b(losses[0]), b(losses[1]), b(losses[2]), b(losses[3])), b(lost),
               b(false_stops), b(todo), b(status), np.empty(ROW, np.float64))


@njit(cache=True)
def _step_envs(spec, arrays, sp, weights, actions, pending, answered, terminated, reward_out,
               rows, bounds, row_job, row_state, row_prog, row_gpus, row_keys, losses, lost,
               false_stops, todo, status, row_buffer):
    """`full_step_all` on borrowed arrays (`row_buffer`, a row's floats on the way, is held
    by the caller)."""
    tmp = borrow(row_buffer)
    all_loops = arrays.loop
    for i in range(todo.shape[0]):
        if not todo[i]:
            continue
        jobs, out, loop = jobs_row(arrays.jobs, i), out_row(arrays.out, i), \
            loop_row(all_loops, i)
        truth = truth_row(arrays.extra, i)
        int_slots = loop.int_slots
        if pending[i]:
            if int_slots[layout.S_HEAP] + int_slots[layout.S_N] + 1 >= loop.heap.shape[0]:
                status[i] = kernel.ROOM
                continue
            n_stop = _answer(spec, jobs, out, loop, sp, row(actions, i), row(row_job, i),
                             row(row_state, i))
            lost[i], false_stops[i] = _stops_cost(jobs, out, truth, sp.top, n_stop)
            pending[i] = False
        int_slots[layout.S_RHEAP] = 0       # the engine's running-key heap: unread here
        int_slots[layout.S_N_CONT] = 0      # checks answered "continue" charge nothing here
        st = kernel.advance(spec, jobs, out, loop, sp)
        status[i] = st
        if st != kernel.OK and st != PASS:
            continue
        now = loop.float_slots[layout.F_NOW]
        value = _full_reward(i, now, jobs, out, loop, arrays, truth, lost[i], false_stops[i],
                             weights)
        lost[i], false_stops[i] = 0.0, 0.0
        reward_out[i] = value if answered[i] else 0.0
        terminated[i] = st == kernel.OK
        if st == PASS:
            write_table(i, spec, jobs, out, loop, sp, row(arrays.open, i),
                   arrays.reward_ints[i, R_OPEN], rows, bounds, tmp, row_job, row_state,
                   row_prog, row_gpus, row_keys, losses)
        else:
            rows[0][i] = 0.0
            rows[1][i] = 0
            rows[2][i] = 0.0
            row_job[i], row_state[i], row_gpus[i] = -1, -1, 0
