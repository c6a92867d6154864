"""The compiled engine's arrays of a workload: its jobs' fields and every job's checks end to end.

One packer, from `WorkloadArrays`: `native.run` packs job records through `arrays_of`, the
compiled vector env packs the arrays a reset draws, so both lay out the same numbers.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from .checks import check_points, work_rows
from .curves import exp_loss
from .workload_arrays import WorkloadArrays


def pack(w: WorkloadArrays, milestones: tuple[float, ...]) -> dict[str, Any]:
    """The jobs of `w` as arrays named as `native_kernel.run`'s parameters; each job's check
    points (evals, milestones, completion) laid end to end.

    Jobs usually share one eval schedule, so the checks, scores and losses are computed per
    schedule, as a matrix over its jobs.
    """
    extra = sorted({round(float(m), 10) for m in milestones if 0.0 < m < 1.0})
    layouts = [check_points(w.schedule_points(s), extra) for s in range(len(w.sched_ptr) - 1)]
    return {**_job_fields(w), **_check_arrays(w, layouts)}


def _job_fields(w: WorkloadArrays) -> dict[str, np.ndarray]:
    """Each job's own fields, an array per field (a fresh job runs at speed 1)."""
    return {"arrival": w.arrival.copy(), "gpus": w.gpus.copy(), "duration": w.duration.copy(),
            "dur_est": w.dur_est.copy(), "eval_min": w.eval_min.copy(),
            "peak": w.peak_work.copy(), "speed": np.ones(w.n_jobs), "jtype": w.jtype.copy(),
            "paced": w.paced.copy()}


def _check_arrays(w: WorkloadArrays, layouts: list[list[tuple[float, int]]]
                  ) -> dict[str, np.ndarray]:
    """Every job's checks and evals laid end to end (pointers, progress, kind, work, score,
    loss), computed per schedule as a matrix over the jobs that share it."""
    n = w.n_jobs
    n_checks = np.array([len(c) for c in layouts], np.int64)
    chk_ptr = np.zeros(n + 1, np.int64)
    chk_ptr[1:] = np.cumsum(n_checks[w.schedule]) if n else []
    ev_ptr = w.ev_ptr.copy()
    size = int(chk_ptr[-1])
    chk_prog, chk_idx, chk_work = np.empty(size), np.empty(size, np.int64), np.empty(size)
    chk_score, chk_loss = np.full(size, np.nan), np.empty(size)
    ev_score, ev_prog = np.empty(int(ev_ptr[-1])), np.empty(int(ev_ptr[-1]))
    for s, checks in enumerate(layouts):
        rows = np.flatnonzero(w.schedule == s)
        if not len(rows):
            continue
        n_evals = int(w.sched_ptr[s + 1] - w.sched_ptr[s])
        where = (chk_ptr[rows][:, None] + np.arange(len(checks))).ravel()
        prog = np.array([c[0] for c in checks])
        idx = np.array([c[1] for c in checks], np.int64)
        chk_prog[where] = np.tile(prog, len(rows))
        chk_idx[where] = np.tile(idx, len(rows))
        at = ev_ptr[rows][:, None] + np.arange(n_evals)
        observed = w.eval_observed[at]
        evals = idx >= 0
        scores = np.full((len(rows), len(checks)), np.nan)
        scores[:, evals] = observed[:, idx[evals]]
        chk_score[where] = scores.ravel()
        # each job's evals end to end, in check order: the history the rules read
        ev_where = (ev_ptr[rows][:, None] + np.arange(int(evals.sum()))).ravel()
        ev_score[ev_where] = scores[:, evals].ravel()
        ev_prog[ev_where] = np.tile(prog[evals], len(rows))
        params = w.loss_params[rows]
        losses = exp_loss(prog[None, :], *(params[:, k:k + 1] for k in range(4)))
        chk_loss[where] = losses.ravel()
        paced = w.paced[rows]
        work = work_rows(w.schedule_points(s), w.eval_work[at[paced]], paced, prog)
        chk_work[where] = work.ravel()
    return {"chk_ptr": chk_ptr, "chk_prog": chk_prog, "chk_work": chk_work, "chk_idx": chk_idx,
            "chk_score": chk_score, "chk_loss": chk_loss, "ev_ptr": ev_ptr, "ev_score": ev_score,
            "ev_prog": ev_prog}
