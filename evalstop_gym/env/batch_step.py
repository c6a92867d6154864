"""The compiled half of `CompiledBatch`: one jitted call answers every env's pending check.

Each env is the compiled engine's event loop (`sim.native_kernel.advance`) paused at the checks
the agent answers (`rules.RULE_AGENT`); `step_all` runs each env to its next decision and writes
its reward, observation row and terminated flag. It computes nothing of its own: the reward is
`reward.py`'s functions and the observation `observation.fill_stop_observation`, compiled here
from the same plain functions the single env calls, on the engine's arrays. Observations read
only what a view shows (scores, losses, progress, arrival, the type's estimate, attained
minutes); the reward also reads the hidden truth (`batch_arrays.Extra`).
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
    Jobs,
    LoopState,
    Outcome,
)
from .batch_arrays import R_ADMITTED, R_BOOKED, R_LAST, R_OPEN, R_TOTAL, Extra
from .observation import (
    fill_cluster_row,
    fill_job_row,
    fill_stop_observation,
    fill_tail,
    put_clipped,
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
for _plain in (best_eval, true_score_at, fill_job_row, fill_cluster_row, put_clipped, fill_tail,
               fill_stop_observation, admitted_by, sweep_open, held_minutes, integrals,
               step_terms, weighted_reward, segment_waste, stop_quality_lost):
    jitable(_plain)


@njit(cache=True, inline="always")
def _jobs_row(J, i):
    return Jobs(J.arrival[i], J.gpus[i], J.duration[i], J.dur_est[i], J.eval_min[i],
                J.peak[i], J.speed[i], J.jtype[i], J.paced[i], J.chk_ptr[i], J.chk_prog[i],
                J.chk_work[i], J.chk_idx[i], J.chk_loss[i], J.ev_ptr[i], J.ev_score[i],
                J.ev_prog[i])


@njit(cache=True, inline="always")
def _out_row(outs, i):
    return Outcome(outs.state[i], outs.work[i], outs.next_check[i], outs.epoch[i],
                   outs.has_run[i], outs.first_start[i], outs.end_time[i], outs.gpu_min[i],
                   outs.gpu_after[i], outs.n_pre[i], outs.phase_start[i], outs.chk_time[i],
                   outs.stop_value[i])


@njit(cache=True, inline="always")
def _loop_row(L, i):
    return LoopState(L.phase[i], L.cls_gpus[i], L.cls[i], L.cls_off[i], L.cls_size[i],
                     L.wait[i], L.major[i], L.key[i], L.run_seq[i], L.run_list[i],
                     L.run_pos[i], L.run_version[i], L.arrivals[i], L.heap[i], L.rheap[i],
                     L.ist[i], L.fst[i], L.continued[i])


@njit(cache=True, inline="always")
def _system_integrals(i, now, jobs, out, loop, ist, rint, rfl, open_, order):
    """`RewardMeter._integrals` of env i: admit arrivals, book ended jobs, sum the open ones."""
    first = rint[i, R_ADMITTED]
    admitted = admitted_by(now, order, ist[S_N], jobs.arrival, first)
    n_open = rint[i, R_OPEN]
    for k in range(first, admitted):
        open_[n_open] = order[k]
        n_open += 1
    n_open, b0, b1, b2, s0, s1, s2 = sweep_open(
        now, open_, n_open, jobs.arrival, out.end_time, out.gpu_min, out.gpu_after,
        (rfl[i, R_BOOKED], rfl[i, R_BOOKED + 1], rfl[i, R_BOOKED + 2]))
    held = held_minutes(now, loop.run_list, ist[S_N_RUN], jobs.gpus, loop.phase,
                        out.phase_start)
    rint[i, R_ADMITTED], rint[i, R_OPEN] = admitted, n_open
    rfl[i, R_BOOKED], rfl[i, R_BOOKED + 1], rfl[i, R_BOOKED + 2] = b0, b1, b2
    return integrals((b0, b1, b2), (s0, s1, s2), held)


@njit(cache=True, inline="always")
def _reward(i, now, answered, stopped, jobs, out, loop, ist, rint, rfl, open_, order, extra,
            weights):
    """`RewardMeter.step` (stop mode) of env i; returns the weighted reward."""
    current = _system_integrals(i, now, jobs, out, loop, ist, rint, rfl, open_, order)
    last = (rfl[i, R_LAST], rfl[i, R_LAST + 1], rfl[i, R_LAST + 2])
    rfl[i, R_LAST], rfl[i, R_LAST + 1], rfl[i, R_LAST + 2] = current
    chk_ptr, chk_idx = jobs.chk_ptr, jobs.chk_idx
    wasted = 0.0                              # charged to the continues (committed_waste)
    for q in range(ist[S_N_CONT]):
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
        rfl[i, R_TOTAL + k] += terms[k]
    return weighted_reward(weights, terms)


@njit(cache=True, inline="always")
def _observe(i, j, now, total_gpus, jobs, out, ist, rows, bounds, tmp):
    """`StopObservation.encode` of job j's check into row i, from what its view holds."""
    passed = out.next_check[j]
    first = jobs.chk_ptr[j]
    c = first + passed - 1                    # the check just reached
    _, n_ev = kernel.passed(j, jobs.chk_ptr, jobs.chk_idx, out.next_check)
    e0 = jobs.ev_ptr[j]
    fill_stop_observation(
        (rows[0][i], rows[1][i], rows[2][i], rows[3][i], rows[4][i], rows[5][i], rows[6][i],
         rows[7][i]), bounds, tmp, jobs.jtype[j], jobs.chk_prog[c], jobs.chk_loss[c],
        jobs.ev_score[e0:e0 + n_ev], jobs.ev_prog[e0:e0 + n_ev],
        jobs.chk_loss[first:first + passed], jobs.dur_est[j], jobs.gpus[j],
        now - jobs.arrival[j], out.gpu_min[j] / jobs.gpus[j], out.n_pre[j], now, total_gpus,
        ist[S_FREE], ist[S_N_WAIT], ist[S_N_RUN])


@njit(cache=True)
def step_all(spec, A, sc, weights, asked, terminated, reward_out, rows, bounds, todo, fresh,
             status):
    """Advance every env with todo[i] to its next decision (or its end) and write its rows.
    `fresh`: a new answer (fst[F_ANSWER]) or a reset; False resumes envs that ran out of heap
    room mid-step (`ROOM`), which keep their answer and their continued jobs."""
    J, outs, L, X = A.jobs, A.out, A.loop, A.extra
    tmp = np.empty(max(rows[0].shape[1], rows[1].shape[1]), np.float64)
    for i in range(todo.shape[0]):
        if not todo[i]:
            continue
        jobs, out, loop = _jobs_row(J, i), _out_row(outs, i), _loop_row(L, i)
        ist = L.ist[i]
        if fresh:
            ist[S_N_CONT] = 0
        answered = asked[i]
        stopped = answered >= 0 and not np.isnan(L.fst[i, F_ANSWER])
        st = kernel.advance(spec, jobs, out, loop, sc)
        status[i] = st
        if st != kernel.OK and st != kernel.DECISION:
            continue
        now = L.fst[i, F_NOW]
        value = _reward(i, now, answered, stopped, jobs, out, loop, ist, A.rint, A.rfl,
                        A.open[i], A.order[i], Extra(X.is_hacking[i], X.peak_prog[i],
                                                     X.ev_point[i], X.ev_true[i]), weights)
        reward_out[i] = value if answered >= 0 else 0.0
        if st == kernel.DECISION:
            asked[i] = ist[S_PENDING]
            terminated[i] = False
            _observe(i, ist[S_PENDING], now, spec.total_gpus, jobs, out, ist, rows, bounds, tmp)
        else:
            asked[i] = -1
            terminated[i] = True
            rows[0][i], rows[1][i], rows[2][i], rows[3][i] = 0.0, 0.0, 0.0, 0.0
            rows[4][i], rows[5][i], rows[6][i], rows[7][i] = 0.0, 0, 0.0, 0
