"""The compiled half of `CompiledBatch`: one jitted call answers every env's pending check.

Each env is the compiled engine's event loop (`sim.native_kernel.advance`) paused at the checks
the agent answers (`rules.RULE_AGENT`); `step_all` runs each env to its next decision and writes
its reward, observation row and terminated flag. It computes nothing of its own: the reward is
`reward.py`'s functions and the observation `observation.fill_stop_observation`, compiled here
from the same plain functions the single env calls, on env i's rows of the engine's arrays
(`batch_rows`). Observations read only what a view shows (scores, losses, progress, arrival,
the type's estimate, attained minutes); the reward also reads the hidden truth
(`batch_arrays.Extra`).
"""

from __future__ import annotations

import numpy as np

from ..sim import native_kernel as kernel
from ..sim.checkpoint import best_eval, true_score_at
from ..sim.jit import jitable, njit
from ..sim.native_kernel import (
    F_ANSWER,
    F_NOW,
    S_FREE,
    S_N,
    S_N_CONT,
    S_N_RUN,
    S_N_WAIT,
    S_PENDING,
)
from .batch_arrays import R_ADMITTED, R_BOOKED, R_LAST, R_OPEN, R_TOTAL
from .batch_load import load_row
from .batch_rows import jobs_row, loop_row, out_row, row, truth_row
from .observation import (
    age_field,
    clipped,
    fill_cluster_row,
    fill_job_clock,
    fill_job_history,
    fill_job_row,
    fill_stop_observation,
    fill_tail,
)
from .reward import (
    admitted_by,
    held_minutes,
    integrals,
    segment_waste,
    step_terms,
    stop_quality_lost,
    sweep_open,
    weighted_reward,
)

# numba must know every plain function a compiled one calls before it compiles the caller (the
# rules' own, such as `decline_count`, are known once the engine's import compiled a rule)
for _plain in (best_eval, true_score_at, age_field, fill_job_history, fill_job_clock,
               fill_job_row, fill_cluster_row, clipped, fill_tail, fill_stop_observation,
               admitted_by, sweep_open, held_minutes, integrals, step_terms, weighted_reward,
               segment_waste, stop_quality_lost):
    jitable(_plain)


@njit(cache=True, inline="always")
def _system_integrals(i, now, jobs, out, loop, int_slots, reward_ints, reward_floats, open_, order):
    """`RewardMeter._integrals` of env i: admit arrivals, book ended jobs, sum the open ones."""
    first = reward_ints[i, R_ADMITTED]
    admitted = admitted_by(now, order, int_slots[S_N], jobs.arrival, first)
    n_open = reward_ints[i, R_OPEN]
    for k in range(first, admitted):
        open_[n_open] = order[k]
        n_open += 1
    n_open, b0, b1, b2, s0, s1, s2 = sweep_open(
        now, open_, n_open, jobs.arrival, out.end_time, out.gpu_min, out.gpu_after,
        (reward_floats[i, R_BOOKED], reward_floats[i, R_BOOKED + 1],
         reward_floats[i, R_BOOKED + 2]))
    held = held_minutes(now, loop.run_list, int_slots[S_N_RUN], jobs.gpus, loop.phase,
                        out.phase_start)
    reward_ints[i, R_ADMITTED], reward_ints[i, R_OPEN] = admitted, n_open
    booked = row(reward_floats, i)
    booked[R_BOOKED], booked[R_BOOKED + 1], booked[R_BOOKED + 2] = b0, b1, b2
    return integrals((b0, b1, b2), (s0, s1, s2), held)


@njit(cache=True, inline="always")
def _reward(i, now, answered, stopped, jobs, out, loop, int_slots, reward_ints, reward_floats,
            open_, order, extra, weights):
    """`RewardMeter.step` (stop mode) of env i; returns the weighted reward."""
    current = _system_integrals(i, now, jobs, out, loop, int_slots, reward_ints, reward_floats,
                                open_, order)
    last = (reward_floats[i, R_LAST], reward_floats[i, R_LAST + 1], reward_floats[i, R_LAST + 2])
    reward_floats[i, R_LAST], reward_floats[i, R_LAST + 1], reward_floats[i, R_LAST + 2] = current
    chk_ptr, chk_idx = jobs.chk_ptr, jobs.chk_idx
    wasted = 0.0                              # charged to the continues (committed_waste)
    for q in range(int_slots[S_N_CONT]):
        j = loop.continued[q]
        c = chk_ptr[j] + out.next_check[j]
        if c < chk_ptr[j + 1]:
            wasted += segment_waste(jobs.chk_prog[c], chk_idx[c], jobs.chk_work[c], out.work[j],
                                    jobs.peak[j], extra.peak_prog[j], jobs.duration[j],
                                    jobs.speed[j], jobs.eval_min[j], jobs.gpus[j])
    lost, false_stop = 0.0, 0.0
    if stopped:
        j = answered
        _, n_evals = kernel.passed(j, chk_ptr, chk_idx, out.next_check)
        e0, e1 = jobs.ev_ptr[j], jobs.ev_ptr[j + 1]
        lost = stop_quality_lost(extra.ev_point[e0:e1], extra.ev_true[e0:e1],
                                 jobs.ev_score[e0:e0 + n_evals], jobs.ev_prog[e0:e0 + n_evals])
        false_stop = 0.0 if extra.is_hacking[j] else 1.0
    terms = step_terms(current, last, wasted, lost, false_stop, weights[5])
    for k in range(5):
        reward_floats[i, R_TOTAL + k] += terms[k]
    return weighted_reward(weights, terms)


@njit(cache=True, inline="always")
def _observe(i, j, now, total_gpus, jobs, out, int_slots, rows, bounds, tmp):
    """`StopObservation.encode` of job j's check into row i, from what its view holds."""
    passed = out.next_check[j]
    first = jobs.chk_ptr[j]
    c = first + passed - 1                    # the check just reached
    _, n_ev = kernel.passed(j, jobs.chk_ptr, jobs.chk_idx, out.next_check)
    e0 = jobs.ev_ptr[j]
    fill_stop_observation(
        (row(rows[0], i), row(rows[1], i), row(rows[2], i), row(rows[3], i), row(rows[4], i),
         row(rows[5], i), row(rows[6], i), row(rows[7], i)), bounds, tmp, jobs.jtype[j],
        jobs.chk_prog[c], jobs.chk_loss[c], jobs.ev_score[e0:e0 + n_ev],
        jobs.ev_prog[e0:e0 + n_ev], jobs.chk_loss[first:first + passed], jobs.dur_est[j],
        jobs.gpus[j], now - jobs.arrival[j], out.gpu_min[j] / jobs.gpus[j], out.n_pre[j], now,
        total_gpus, int_slots[S_FREE], int_slots[S_N_WAIT], int_slots[S_N_RUN])


@njit(cache=True)
def step_all(spec, arrays, pass_space, weights, asked, terminated, reward_out, rows, bounds, todo,
             fresh, status, staged, slot):
    """Advance every env with todo[i] to its next decision (or its end) and write its rows; an
    env with a staged workload (slot[i] >= 0, `batch_load`) is reset on it first, its slot
    cleared. `fresh`: a new answer (float_slots[F_ANSWER]) or a reset; False resumes envs that
    ran out of heap room mid-step (`ROOM`), which keep their answer and their continued jobs."""
    all_jobs, all_outs, all_loops, truth = arrays.jobs, arrays.out, arrays.loop, arrays.extra
    tmp = np.empty(max(rows[0].shape[1], rows[1].shape[1]), np.float64)
    for i in range(todo.shape[0]):
        if not todo[i]:
            continue
        if slot[i] >= 0:
            load_row(spec.total_gpus, arrays, i, staged, slot[i])
            slot[i] = -1
            asked[i] = -1
        jobs, out, loop = jobs_row(all_jobs, i), out_row(all_outs, i), loop_row(all_loops, i)
        int_slots = loop.int_slots
        if fresh:
            int_slots[S_N_CONT] = 0
        answered = asked[i]
        stopped = answered >= 0 and not np.isnan(all_loops.float_slots[i, F_ANSWER])
        st = kernel.advance(spec, jobs, out, loop, pass_space)
        status[i] = st
        if st != kernel.OK and st != kernel.DECISION:
            continue
        now = all_loops.float_slots[i, F_NOW]
        value = _reward(i, now, answered, stopped, jobs, out, loop, int_slots, arrays.reward_ints,
                        arrays.reward_floats, row(arrays.open, i), row(arrays.order, i),
                        truth_row(truth, i), weights)
        reward_out[i] = value if answered >= 0 else 0.0
        if st == kernel.DECISION:
            asked[i] = int_slots[S_PENDING]
            terminated[i] = False
            _observe(i, int_slots[S_PENDING], now, spec.total_gpus, jobs, out, int_slots, rows,
                     bounds, tmp)
        else:
            asked[i] = -1
            terminated[i] = True
            rows[0][i], rows[1][i], rows[2][i], rows[3][i] = 0.0, 0.0, 0.0, 0.0
            rows[4][i], rows[5][i], rows[6][i], rows[7][i] = 0.0, 0, 0.0, 0
