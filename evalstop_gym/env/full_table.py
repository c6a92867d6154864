"""The table observation of `full_step_all`: `TableObservation.encode` of a pass, compiled.

A table shows up to max_jobs jobs a pass (running by id, then waiting by arrival), 19 values a
row; most rows show the job they showed at the last pass with the same history, and only their
clock fields move (a waiting job's age alone), so such a row is rewritten in those fields only.
The values are `observation.py`'s plain functions (`fill_job_row`, split into
`fill_job_history` and `fill_job_clock`), compiled, so the single env and the batch observe the
same bits. A row's `loss` column is left to the caller: the loss curve is numpy's arithmetic
(`curves.exp_loss`), whose exp and log differ in the last bit from compiled code's, so the rows
whose loss changed are listed for one numpy call over every env.
"""

from __future__ import annotations

from ..sim import kernel_layout as layout
from ..sim import native_kernel as kernel
from ..sim.checkpoint import best_eval
from ..sim.kernel_jobs import reported
from ..sim.kernel_layout import IDLE, PENDING, PREEMPTED, RUNNING, TRAIN
from ..sim.kernel_steps import part
from ..sim.rules import decline_count
from ..sim.transitions import work_after
from .batch_rows import row
from .inlined import inlined, uncounted
from .observation import (
    CLOCK_FIELDS,
    JOB_FIELDS,
    age_field,
    clipped,
    fill_cluster_row,
    fill_job_clock,
    fill_job_history,
    fill_job_row,
)

# the shared functions a table row calls, inlined with what they call (`inlined.py`): a table is
# max_jobs rows of 19 values a step, and a call per row (a reference count per array it is
# handed) costs as much as the row
_age_field = inlined(age_field)
_fill_clock = inlined(fill_job_clock, age_field=_age_field)
_fill_row = inlined(fill_job_row, fill_job_clock=_fill_clock, fill_job_history=inlined(
    fill_job_history, decline_count=inlined(decline_count), best_eval=inlined(best_eval)))
_reported = inlined(reported)
_clipped = inlined(clipped)

N_STATES = 3          # the row's state one-hot (observation.STATES) before its JOB_FIELDS
ROW = N_STATES + len(JOB_FIELDS)
CLOCK_COLUMNS = tuple(N_STATES + JOB_FIELDS.index(f) for f in CLOCK_FIELDS)   # in a row
AGE_COLUMN = N_STATES + JOB_FIELDS.index("age")
LOSS = N_STATES + JOB_FIELDS.index("loss")


@uncounted
def _shown(loop, state, open_, n_open, ids, n_rows):
    """The first n_rows jobs a table shows, in row order, into `ids`: running by id, then
    waiting by (arrival, id), read off the open jobs (`open_[:n_open]`: arrived and not ended,
    in arrival order, as the reward keeps them). Returns how many."""
    n_run = loop.int_slots[layout.S_N_RUN]
    for q in range(n_run):                  # running, by id (insertion)
        j = loop.run_list[q]
        r = q
        while r > 0 and ids[r - 1] > j:
            ids[r] = ids[r - 1]
            r -= 1
        ids[r] = j
    n = n_run
    for q in range(n_open):
        if n >= n_rows:
            break
        j = open_[q]
        if state[j] == PENDING or state[j] == PREEMPTED:
            ids[n] = j
            n += 1
    return min(n, n_rows)


@part
def _list_loss(losses, i, j, at, progress):
    """List the loss entry `at` (of the flat table) for the caller: job j of env i at
    `progress`, with its loss curve's parameters, so that one numpy call covers every env."""
    params, where, values, count = losses
    k = count[0]
    where[k] = at
    values[0, k] = progress
    for p in range(params.shape[0]):
        values[1 + p, k] = params[p, i, j]
    count[0] = k + 1


@uncounted
def write_table(i, spec, jobs, out, loop, sp, open_, n_open, rows, bounds, tmp, row_job,
                row_state, row_prog, row_gpus, row_keys, losses):
    """`TableObservation.encode` of env i's pass: running jobs by id, then waiting ones by
    (arrival, id), at most max_jobs rows. A row that shows the job it showed at the last pass,
    in the same state and with the same history (checks passed, preemptions: `row_keys`), has
    only its clock fields rewritten. A row whose loss column (left to the caller, see the top)
    must be computed again (a job new to it, or whose progress moved) is listed in `losses`
    (`_list_loss`); the others keep theirs. The row loop reads plain arrays only (a
    NamedTuple handed to a call costs a reference count per array it holds, per call)."""
    o_jobs, o_mask, o_cluster = rows
    int_slots, phase, now = loop.int_slots, loop.phase, loop.float_slots[layout.F_NOW]
    state, next_check, n_pre = out.state, out.next_check, out.n_pre
    gpus, arrival, ev_prog = jobs.gpus, jobs.arrival, jobs.ev_prog
    ids, n_rows = sp.pending, row_job.shape[1]
    n = _shown(loop, state, open_, n_open, ids, n_rows)
    table, low, high = row(o_jobs, i), bounds[0][0], bounds[0][1]
    keys = row(row_keys, i)
    for r in range(n_rows):
        at = r * ROW
        if r >= n:
            if row_job[i, r] >= 0:          # an empty row stays all zero
                row_job[i, r], row_state[i, r], row_gpus[i, r], o_mask[i, r] = -1, -1, 0, 0
                for k in range(ROW):
                    table[at + k] = 0.0
            continue
        j = ids[r]
        st = 0 if state[j] == RUNNING else (1 if state[j] == PENDING else 2)
        if st > 0 and row_job[i, r] == j and row_state[i, r] == st:
            # waiting at both passes: nothing but its age moved (a waiting job passes no check,
            # and it is preempted only once seen running)
            table[at + AGE_COLUMN] = _clipped(_age_field(now - arrival[j]), low[at + AGE_COLUMN],
                                             high[at + AGE_COLUMN])
            continue
        same = row_job[i, r] == j and row_state[i, r] == st and keys[r, 0] == next_check[j] \
            and keys[r, 1] == n_pre[j]
        progress, attained = _view_clock(j, now, jobs, out, phase)
        e0 = jobs.ev_ptr[j]
        if same:                            # its history unchanged: the clock fields alone
            n_ev = keys[r, 2]
            _fill_clock(tmp[N_STATES:], progress, ev_prog[e0 + max(n_ev - 1, 0):e0 + n_ev],
                        now - arrival[j], attained)
            for k in CLOCK_COLUMNS:
                table[at + k] = _clipped(tmp[k], low[at + k], high[at + k])
            if progress != row_prog[i, r]:
                _list_loss(losses, i, j, i * table.shape[0] + at + LOSS, progress)
            row_prog[i, r] = progress
            continue
        row_job[i, r], row_state[i, r], row_gpus[i, r], o_mask[i, r] = j, st, gpus[j], 1
        row_prog[i, r] = progress
        last, n_ev = kernel.passed(j, jobs.chk_ptr, jobs.chk_idx, next_check)
        keys[r, 0], keys[r, 1], keys[r, 2] = next_check[j], n_pre[j], n_ev
        _list_loss(losses, i, j, i * table.shape[0] + at + LOSS, progress)
        _rewrite_row(table, at, low, high, tmp, jobs, j, st, progress, attained, now, last,
                     n_ev, n_pre[j])
    fill_cluster_row(tmp, now, spec.total_gpus, int_slots[layout.S_FREE],
                     int_slots[layout.S_N_WAIT], int_slots[layout.S_N_RUN])
    cluster, low, high = row(o_cluster, i), bounds[1][0], bounds[1][1]
    for k in range(cluster.shape[0]):
        cluster[k] = _clipped(tmp[k], low[k], high[k])


@part
def _view_clock(j, now, jobs, out, phase):
    """Job j's progress and attained minutes as a view taken now shows them (`make_view`)."""
    w = out.work[j]
    if phase[j] == TRAIN:
        w = work_after(TRAIN, w, now - out.phase_start[j], jobs.speed[j], jobs.duration[j])
    progress = _reported(j, w, jobs.paced, jobs.chk_ptr, out.next_check, jobs.chk_prog,
                         jobs.chk_work)
    attained = out.gpu_min[j] / jobs.gpus[j]
    if phase[j] != IDLE:
        attained += now - out.phase_start[j]
    return progress, attained


@part
def _rewrite_row(table, at, low, high, tmp, jobs, j, st, progress, attained, now, last, n_ev,
                 n_pre):
    """The whole row at `at` of job j in state `st`, its checks passed to `last` and its
    evals `n_ev`, preempted `n_pre` times, clipped to its bounds (the loss column is the
    caller's)."""
    e0, c0 = jobs.ev_ptr[j], jobs.chk_ptr[j]
    for s in range(N_STATES):
        tmp[s] = 1.0 if s == st else 0.0
    _fill_row(tmp[N_STATES:], jobs.jtype[j], progress, 0.0, jobs.ev_score[e0:e0 + n_ev],
              jobs.ev_prog[e0:e0 + n_ev], jobs.chk_loss[c0:last], jobs.dur_est[j], jobs.gpus[j],
              now - jobs.arrival[j], attained, n_pre)
    for k in range(ROW):
        table[at + k] = _clipped(tmp[k], low[at + k], high[at + k])
