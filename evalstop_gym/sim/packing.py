"""The compiled engine's arrays of a workload: its jobs' fields and every job's checks end to end.

One packer, from `WorkloadArrays`: `native.run` packs job records through `arrays_of`, the
compiled vector env packs the arrays a reset draws, so both lay out the same numbers. It runs
in three parts: each schedule's check points (`check_layout`), each check's training loss
(`check_losses`, numpy: the single env's `Job.loss_at` rounds with numpy's exp and log, which
compiled code's differ from in the last bit) and the rest, compiled (`fill_packed`), which
`pack` calls and the vector env's compiled step calls on an env's row when it resets it.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from .checks import check_points
from .curves import exp_loss
from .jit import jitable, njit
from .kernel_layout import Jobs
from .pace import knot_progress, point_work, segment_work
from .workload_arrays import WorkloadArrays

for _plain in (knot_progress, segment_work, point_work):   # called by `fill_packed`
    jitable(_plain)


class Layout(NamedTuple):
    """Every eval schedule's check points end to end: schedule s's are ptr[s]:ptr[s + 1]."""

    ptr: np.ndarray    # int64 (schedules + 1)
    prog: np.ndarray   # each check's progress
    idx: np.ndarray    # int64: its eval index, or transitions.MILESTONE / COMPLETION


def check_layout(w: WorkloadArrays, milestones: tuple[float, ...]) -> Layout:
    """The check points (evals, milestones, completion) of each of `w`'s eval schedules."""
    extra = sorted({round(float(m), 10) for m in milestones if 0.0 < m < 1.0})
    layouts = [check_points(w.schedule_points(s), extra) for s in range(len(w.sched_ptr) - 1)]
    ptr = np.zeros(len(layouts) + 1, np.int64)
    ptr[1:] = np.cumsum([len(c) for c in layouts])
    return Layout(ptr, np.array([p for c in layouts for p, _ in c], np.float64),
                  np.array([i for c in layouts for _, i in c], np.int64))


def check_pointers(w: WorkloadArrays, layout: Layout) -> np.ndarray:
    """Where each job's checks start, end to end (n + 1 offsets)."""
    chk_ptr = np.zeros(w.n_jobs + 1, np.int64)
    chk_ptr[1:] = np.cumsum(np.diff(layout.ptr)[w.schedule]) if w.n_jobs else []
    return chk_ptr


def check_losses(w: WorkloadArrays, layout: Layout, chk_ptr: np.ndarray) -> np.ndarray:
    """Each check's training loss, computed per schedule as a matrix over the jobs that share
    it (numpy's rounding: the one `Job.loss_at` has)."""
    if len(layout.ptr) == 2:   # one schedule (a drawn workload): every job's checks in a row
        return _loss_matrix(layout.prog, w.loss_params).ravel()
    loss = np.empty(int(chk_ptr[-1]))
    for s in range(len(layout.ptr) - 1):
        rows = np.flatnonzero(w.schedule == s)
        if not len(rows):
            continue
        prog = layout.prog[layout.ptr[s]:layout.ptr[s + 1]]
        where = (chk_ptr[rows][:, None] + np.arange(len(prog))).ravel()
        loss[where] = _loss_matrix(prog, w.loss_params[rows]).ravel()
    return loss


def _loss_matrix(prog: np.ndarray, params: np.ndarray) -> np.ndarray:
    """The loss of each job of `params` (a row each) at each of `prog`."""
    return exp_loss(prog[None, :], *(params[:, k:k + 1] for k in range(4)))


def pack(w: WorkloadArrays, milestones: tuple[float, ...]) -> dict[str, Any]:
    """The jobs of `w` as arrays named as `native_kernel.run`'s parameters; each job's check
    points (evals, milestones, completion) laid end to end."""
    layout = check_layout(w, milestones)
    chk_ptr = check_pointers(w, layout)
    n, n_chk, n_ev = w.n_jobs, int(chk_ptr[-1]), int(w.ev_ptr[-1])
    f, i = np.float64, np.int64
    jobs = Jobs(np.empty(n), np.empty(n, i), np.empty(n), np.empty(n), np.empty(n), np.empty(n),
                np.empty(n), np.empty(n, i), np.empty(n, np.bool_), np.empty(n + 1, i),
                np.empty(n_chk), np.empty(n_chk), np.empty(n_chk, i),
                check_losses(w, layout, chk_ptr), np.empty(n + 1, i), np.empty(n_ev, f),
                np.empty(n_ev, f))
    fill_packed(w, layout, chk_ptr, jobs)
    chk_score = np.full(n_chk, np.nan)   # what each check's eval reported (the records')
    chk_score[jobs.chk_idx >= 0] = jobs.ev_score
    return {**jobs._asdict(), "chk_score": chk_score}


@njit(cache=True)
def fill_packed(w, layout, chk_ptr, jobs):
    """`jobs` (arrays at least as long as `w`'s, chk_loss already filled) from `w`: each job's
    fields (a fresh job runs at speed 1), and its checks and evals end to end (progress,
    kind, work, the scores its evals report, in check order: the history the rules read)."""
    n = w.arrival.shape[0]
    for j in range(n):
        jobs.arrival[j], jobs.gpus[j], jobs.duration[j] = w.arrival[j], w.gpus[j], w.duration[j]
        jobs.dur_est[j], jobs.eval_min[j], jobs.peak[j] = w.dur_est[j], w.eval_min[j], \
            w.peak_work[j]
        jobs.speed[j], jobs.jtype[j], jobs.paced[j] = 1.0, w.jtype[j], w.paced[j]
    jobs.chk_ptr[:n + 1] = chk_ptr
    jobs.ev_ptr[:n + 1] = w.ev_ptr
    last, knots = -1, np.empty(0)
    for j in range(n):
        s = w.schedule[j]
        points = w.points[w.sched_ptr[s]:w.sched_ptr[s + 1]]
        if s != last:   # jobs of one schedule share its knots
            last, knots = s, knot_progress(points)
        e0 = w.ev_ptr[j]
        work = w.eval_work[e0:e0 + points.shape[0]]
        c, e = chk_ptr[j], e0
        for q in range(layout.ptr[s], layout.ptr[s + 1]):
            prog, idx = layout.prog[q], layout.idx[q]
            jobs.chk_prog[c], jobs.chk_idx[c] = prog, idx
            jobs.chk_work[c] = point_work(knots, work, prog) if w.paced[j] else prog
            if idx >= 0:
                jobs.ev_score[e], jobs.ev_prog[e] = w.eval_observed[e0 + idx], prog
                e += 1
            c += 1
