"""A finished run's jobs as arrays: what the metrics read, whichever engine ran them.

The reference engine leaves `Job` records, the compiled one arrays (`native._pack`'s and the
kernel's `Outcome`); both become one `JobTable`, so the metrics are computed by one function
over the same columns and cannot differ between the engines. Each job's evals are laid end to
end in flat arrays with n + 1 offsets (`ev_ptr` for its schedule, `obs_ptr` for what it
observed), as the compiled engine lays out its checks.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import NamedTuple

import numpy as np

from ..sim.jobs import JOB_TYPES, STATES, Job, JobState

STOPPED = STATES.index(JobState.STOPPED)
FINISHED = np.array([s.finished for s in STATES])


class JobTruth(NamedTuple):
    """What the compiled engine's packed arrays leave out: each job's tenant, its label, true
    peak, and its eval points with their true scores (laid out as the packed `ev_ptr` says)."""

    tenant: np.ndarray
    is_hacking: np.ndarray
    peak_progress: np.ndarray
    ev_point: np.ndarray
    ev_true: np.ndarray


class JobTable(NamedTuple):
    """Each finished job's fields, a column per field in job order (n jobs)."""

    job_id: np.ndarray
    tenant: np.ndarray
    jtype: np.ndarray          # index in JOB_TYPES
    gpus: np.ndarray
    arrival: np.ndarray
    duration: np.ndarray
    eval_min: np.ndarray
    is_hacking: np.ndarray
    peak_progress: np.ndarray
    ev_ptr: np.ndarray         # n + 1 offsets into ev_point / ev_true
    ev_point: np.ndarray
    ev_true: np.ndarray
    state: np.ndarray          # index in STATES
    first_start: np.ndarray    # NaN: never started
    end_time: np.ndarray
    work: np.ndarray
    progress: np.ndarray       # as the trainer reports it at the end
    gpu_min: np.ndarray
    gpu_after: np.ndarray
    n_pre: np.ndarray
    obs_ptr: np.ndarray        # n + 1 offsets into the observed evals below, in the job's order
    obs_score: np.ndarray
    obs_prog: np.ndarray
    obs_time: np.ndarray


def truth_of(jobs: Sequence[Job]) -> JobTruth:
    """The fields of `jobs` the packed arrays leave out."""
    return JobTruth(np.array([j.tenant for j in jobs], np.int64),
                    np.array([j.is_hacking for j in jobs], np.bool_),
                    np.array([j.peak_progress for j in jobs], np.float64),
                    _flat([j.eval_points for j in jobs]), _flat([j.eval_true for j in jobs]))


def table_of_jobs(jobs: Sequence[Job]) -> JobTable:
    """The table of finished `Job` records (the reference engine's, or the single env's)."""
    for job in jobs:
        if not job.state.finished or job.end_time is None:
            raise ValueError(f"job {job.job_id} has not ended (state {job.state.value})")
    type_code, state_code = {t: k for k, t in enumerate(JOB_TYPES)}, {s: k for k, s in
                                                                       enumerate(STATES)}
    observed = [[o for o in j.observations if o.score is not None] for j in jobs]
    flat = [o for evals in observed for o in evals]
    truth = truth_of(jobs)

    def column(values: list, dtype: type) -> np.ndarray:
        return np.array(values, dtype)

    return JobTable(
        column([j.job_id for j in jobs], np.int64), truth.tenant,
        column([type_code[j.job_type] for j in jobs], np.int64),
        column([j.gpus for j in jobs], np.int64), column([j.arrival for j in jobs], np.float64),
        column([j.duration for j in jobs], np.float64),
        column([j.eval_minutes for j in jobs], np.float64), truth.is_hacking,
        truth.peak_progress, _offsets([len(j.eval_points) for j in jobs]), truth.ev_point,
        truth.ev_true, column([state_code[j.state] for j in jobs], np.int64),
        column([np.nan if j.first_start is None else j.first_start for j in jobs], np.float64),
        column([j.end_time for j in jobs], np.float64), column([j.work for j in jobs], np.float64),
        column([j.progress for j in jobs], np.float64),
        column([j.gpu_minutes for j in jobs], np.float64),
        column([j.gpu_minutes_after_peak for j in jobs], np.float64),
        column([j.n_preemptions for j in jobs], np.int64),
        _offsets([len(evals) for evals in observed]),
        column([o.score for o in flat], np.float64), column([o.progress for o in flat],
                                                           np.float64),
        column([o.time for o in flat], np.float64))


def table_of_arrays(packed: Mapping[str, np.ndarray], out: Mapping[str, np.ndarray],
                    truth: JobTruth) -> JobTable:
    """The table of a compiled run: `native._pack`'s arrays (`kernel_layout.Jobs`' fields), the
    kernel's `Outcome` arrays (by name) and the fields the packed arrays leave out. A job
    observed the evals among the checks it passed (`next_check` of them; milestones and
    completion carry no score), at the times the kernel recorded (`chk_time`), as
    `native._unpack` writes them into its record. The eval checks, in order, are the ev_*
    entries, in order."""
    from .compiled import reported_all

    state, end_time = out["state"], out["end_time"]
    n = len(state)
    unfinished = ~FINISHED[state] | np.isnan(end_time)
    if unfinished.any():
        j = int(np.argmax(unfinished))
        raise ValueError(f"job {j} has not ended (state {STATES[state[j]].value})")
    chk_ptr, next_check = packed["chk_ptr"], out["next_check"]
    counts = np.diff(chk_ptr)
    owner = np.repeat(np.arange(n), counts)
    evals = packed["chk_idx"] >= 0
    seen = (np.arange(int(chk_ptr[n])) - chk_ptr[owner] < next_check[owner]) & evals
    seen_evals = seen[evals]
    progress = reported_all(out["work"], packed["paced"], chk_ptr, next_check,
                            packed["chk_prog"], packed["chk_work"])
    return JobTable(
        np.arange(n, dtype=np.int64), truth.tenant, packed["jtype"], packed["gpus"],
        packed["arrival"], packed["duration"], packed["eval_min"], truth.is_hacking,
        truth.peak_progress, packed["ev_ptr"], truth.ev_point, truth.ev_true, state,
        out["first_start"], end_time, out["work"], progress, out["gpu_min"], out["gpu_after"],
        out["n_pre"], _offsets(np.bincount(owner[seen], minlength=n)),
        packed["ev_score"][seen_evals], packed["ev_prog"][seen_evals], out["chk_time"][seen])


def _offsets(counts: Sequence[int] | np.ndarray) -> np.ndarray:
    ptr = np.zeros(len(counts) + 1, np.int64)
    np.cumsum(counts, out=ptr[1:])
    return ptr


def _flat(arrays: list[np.ndarray]) -> np.ndarray:
    return np.concatenate(arrays).astype(np.float64) if arrays else np.empty(0)
