"""What the compiled engine reads and moves of one job, over the arrays of `kernel_layout`: its
reported progress, its history, its key, its stop rule, a phase's length and its charge.

The arithmetic is not written here: a phase's cost and length and the job's work are
`transitions.py`'s functions, the keys and stop rules `rules.py`'s, the progress `pace.py`'s;
`Cluster` calls the same functions on its `Job` records. What is left is which array entry each
input comes from and each result goes to. Each function takes the arrays it reads one by one:
steps that took the whole cluster as NamedTuples of arrays made the compiled loop several times
slower (measured; see `kernel_steps`).
"""

from __future__ import annotations

import numpy as np

from . import rules, transitions
from .jit import jitable, njit
from .kernel_layout import IDLE
from .pace import progress_between
from .rules import RULE_NONE

# a job's transitions, compiled: the very functions `Cluster` calls
work_after = njit(cache=True, inline="always")(jitable(transitions.work_after))
phase_charge = njit(cache=True, inline="always")(transitions.phase_charge)
phase_minutes = njit(cache=True, inline="always")(transitions.phase_minutes)
first_phase = njit(cache=True)(transitions.first_phase)
phase_after = njit(cache=True)(transitions.phase_after)
after_check = njit(cache=True)(transitions.after_check)
sliced_speed = njit(cache=True)(transitions.sliced_speed)
_progress_between = njit(cache=True, inline="always")(progress_between)   # the one formula


@njit(cache=True)
def reported(j, w, paced, chk_ptr, next_check, chk_prog, chk_work):
    """Job.reported_progress: the progress the trainer reports once work `w` is done."""
    if not paced[j]:
        return w
    first, c = chk_ptr[j], chk_ptr[j] + next_check[j]
    if c >= chk_ptr[j + 1]:
        return chk_prog[chk_ptr[j + 1] - 1]
    prev_p, prev_w = 0.0, 0.0
    if c > first:
        prev_p, prev_w = chk_prog[c - 1], chk_work[c - 1]
    return _progress_between(w, prev_p, prev_w, chk_prog[c], chk_work[c])


# the policies' arithmetic, compiled: the very functions the policies call
_priority_key = rules.compiled(rules.priority_key)
_stop_value = rules.compiled(rules.stop_value)


@njit(cache=True, inline="always")
def passed(j, chk_ptr, chk_idx, next_check):
    """(end of the checks passed, evals passed) of job j: its loss history is
    chk_loss[chk_ptr[j]:end], its eval history ev_*[ev_ptr[j]:ev_ptr[j] + evals] (eval checks
    carry their eval's index, in order; milestones and completion a negative code)."""
    first, last = chk_ptr[j], chk_ptr[j] + next_check[j]
    c = last - 1
    while c >= first and chk_idx[c] < 0:
        c -= 1
    return last, (chk_idx[c] + 1 if c >= first else 0)


@njit(cache=True)
def rank_of(key_kind, j, progress, service, arrival, dur_est, chk_ptr, chk_idx, chk_loss,
            next_check, ev_ptr, ev_score):
    """The scheduler's key of job j at `progress` and `service` (GPU-minutes held):
    `rules.priority_key` on its history."""
    last, n_evals = passed(j, chk_ptr, chk_idx, next_check)
    return _priority_key(key_kind, arrival[j], dur_est[j], progress, chk_loss[chk_ptr[j]:last],
                         ev_score[ev_ptr[j]:ev_ptr[j] + n_evals], service)


@njit(cache=True, inline="always")
def attained_service(j, now, phase, phase_start, gpu_min, gpus):
    """The GPU-minutes job j has held by `now`: GPUs times the view's `attained_minutes`."""
    attained = gpu_min[j] / gpus[j]
    if phase[j] != IDLE:
        attained += now - phase_start[j]
    return gpus[j] * attained


@njit(cache=True)
def running_key(key_kind, j, now, phase, work, phase_start, speed, duration, gpu_min, gpus,
                arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                next_check, ev_ptr, ev_score):
    """Running job j's key at `now`, as a view taken now gives it."""
    progress = reported(j, work_after(phase[j], work[j], now - phase_start[j], speed[j],
                                      duration[j]), paced, chk_ptr, next_check, chk_prog,
                        chk_work)
    return rank_of(key_kind, j, progress, attained_service(j, now, phase, phase_start, gpu_min,
                                                           gpus), arrival, dur_est, chk_ptr,
                   chk_idx, chk_loss, next_check, ev_ptr, ev_score)


@njit(cache=True, inline="always")
def phase_length(j, chk_work, chk_ptr, next_check, work, duration, speed, phase, overhead,
                 eval_min):
    """How long job j's phase `phase` lasts (training: to its next check point)."""
    return phase_minutes(phase, overhead, eval_min[j], chk_work[chk_ptr[j] + next_check[j]],
                         work[j], speed[j], duration[j])


@njit(cache=True)
def charge(j, now, phase, work, phase_start, gpus, duration, speed, peak, gpu_min,
           gpu_after):
    """The phase job j is in, charged up to `now` (`peak`: its work at its peak)."""
    elapsed = now - phase_start[j]
    if elapsed <= 0 or phase[j] == IDLE:
        return
    spent, past_peak, end = phase_charge(phase[j], gpus[j], elapsed, work[j], peak[j],
                                         speed[j], duration[j])
    work[j] = end
    gpu_min[j] += spent
    gpu_after[j] += past_peak
    phase_start[j] = now


@njit(cache=True)
def decide(j, rule, k_by_type, best_variant, p_stop, threshold, window, jtype, progress,
           chk_ptr, chk_idx, chk_loss, next_check, ev_ptr, ev_score, ev_prog):
    """The stop rule on job j's history so far (`rules.stop_value`); `progress` is its reported
    progress. Returns NaN to continue, else the number the rule's reason quotes."""
    k = k_by_type[jtype[j]]
    if rule == RULE_NONE or k == 0:   # DetectorBase.decide: not monitored
        return np.nan
    last, n_evals = passed(j, chk_ptr, chk_idx, next_check)
    first = ev_ptr[j]
    return _stop_value(rule, k, best_variant, p_stop, threshold, window, progress,
                       ev_score[first:first + n_evals], ev_prog[first:first + n_evals],
                       chk_loss[chk_ptr[j]:last])
