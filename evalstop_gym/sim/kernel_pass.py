"""The compiled scheduling pass: `PriorityScheduler.schedule` (policies/base.py: rank by (key,
arrival, id), fill greedily), for preemptive schedulers `kernel_allocate`'s lazy form of it, then
`Cluster._apply`: preempt the running jobs the allocation dropped, start the jobs it chose.

Steps as `kernel_steps`': the cluster's NamedTuples or the arrays they use one by one, the
loop's scalars in `slots`.
"""

from __future__ import annotations

import numpy as np

from .kernel_allocate import allocate
from .kernel_jobs import first_phase
from .kernel_layout import (
    ERR_GPUS,
    OK,
    PREEMPTED,
    RUNNING,
    S_FREE,
    S_N_RUN,
    S_N_WAIT,
    S_RHEAP,
    S_STARTS,
)
from .kernel_queues import fill, store_running_key
from .kernel_steps import requeue, start_phase, step, stop_running


@step
def schedule_pass(spec, jobs, out, loop, space, now):
    """A pass with jobs waiting: the allocation, then its preemptions and starts. Returns OK, or
    ERR_GPUS if the starts overfill the cluster."""
    slots = loop.int_slots
    if spec.preemptive:
        n_after, n_start = allocate(spec, jobs, out, loop, space, now)
    else:
        n_after = 0
        n_start = fill(slots[S_FREE], space.after, 0, jobs.gpus, jobs.arrival, loop.cls,
                       loop.cls_gpus, loop.cls_off, loop.cls_size, loop.wait, loop.major,
                       loop.key, space.keep, space.to_start, 0)
    slots[S_N_WAIT] -= n_start
    n_drop = dropped(n_after, space.after, space.keep, space.to_preempt, loop.run_seq, loop.rheap,
                     loop.major, loop.key, jobs.arrival, loop.run_version, slots)
    if n_drop > 0:
        preempt(n_drop, now, spec.key_kind, space.to_preempt, loop.phase, out.work,
                out.phase_start, jobs.gpus, jobs.duration, jobs.speed, jobs.peak, out.gpu_min,
                out.gpu_after, out.state, out.epoch, out.n_pre, loop.run_list, loop.run_pos,
                loop.run_seq, out.next_check, jobs.arrival, jobs.dur_est, jobs.paced,
                jobs.chk_ptr, jobs.chk_prog, jobs.chk_work, jobs.chk_idx, jobs.chk_loss,
                jobs.ev_ptr, jobs.ev_score, loop.cls, loop.cls_off, loop.cls_size, loop.wait,
                loop.major, loop.key, slots)
    return start(n_start, now, spec.overhead, spec.preemptive, space.to_start, jobs.gpus,
                 jobs.arrival, out.state, out.first_start, out.has_run, loop.phase,
                 out.phase_start, out.work, out.next_check, out.epoch, jobs.chk_ptr,
                 jobs.chk_work, jobs.duration, jobs.speed, jobs.eval_min, loop.major, loop.key,
                 loop.heap, loop.rheap, loop.run_list, loop.run_pos, loop.run_seq,
                 loop.run_version, slots)


@step
def dropped(n_after, after, keep, to_preempt, run_seq, rheap, major, key, arrival, run_version,
            slots):
    """The ranked running jobs `after` the allocation did not keep, into `to_preempt` in start
    order (Cluster._apply's); those kept are filed again under their keys. Returns how many."""
    n_drop = 0
    for i in range(n_after):
        j = after[i]
        if keep[j]:
            slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], j, major, key, arrival,
                                               run_version)
        else:
            to_preempt[n_drop] = j
            n_drop += 1
    if n_drop > 1:
        to_preempt[:n_drop] = to_preempt[:n_drop][np.argsort(run_seq[to_preempt[:n_drop]])]
    return n_drop


@step
def preempt(n_drop, now, key_kind, to_preempt, phase, work, phase_start, gpus, duration, speed,
            peak, gpu_min, gpu_after, state, epoch, n_pre, run_list, run_pos, run_seq,
            next_check, arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
            ev_ptr, ev_score, cls, cls_off, cls_size, wait, major, key, slots):
    """Cluster._preempt of to_preempt[:n_drop], in order."""
    for i in range(n_drop):
        j = to_preempt[i]
        stop_running(j, PREEMPTED, now, phase, work, phase_start, gpus, duration, speed, peak,
                     gpu_min, gpu_after, state, epoch, run_list, run_pos, run_seq, slots)
        n_pre[j] += 1
        requeue(j, now, key_kind, work, next_check, arrival, dur_est, paced, chk_ptr, chk_prog,
                chk_work, chk_idx, chk_loss, ev_ptr, ev_score, phase, phase_start, gpu_min, gpus,
                cls, cls_off, cls_size, wait, major, key, slots)


@step
def start(n_start, now, overhead, preemptive, to_start, gpus, arrival, state, first_start,
          has_run, phase, phase_start, work, next_check, epoch, chk_ptr, chk_work, duration,
          speed, eval_min, major, key, heap, rheap, run_list, run_pos, run_seq, run_version,
          slots):
    """Cluster._start of to_start[:n_start], in order; ERR_GPUS if they overfill the cluster
    (Cluster._set_free's guard), else OK."""
    for i in range(n_start):
        j = to_start[i]
        slots[S_STARTS] += 1
        run_seq[j] = slots[S_STARTS]
        run_list[slots[S_N_RUN]] = j
        run_pos[j] = slots[S_N_RUN]
        slots[S_N_RUN] += 1
        slots[S_FREE] -= gpus[j]
        if slots[S_FREE] < 0:
            return ERR_GPUS
        if preemptive:                         # its waiting key: its key now, as it starts
            slots[S_RHEAP] = store_running_key(rheap, slots[S_RHEAP], j, major, key, arrival,
                                               run_version)
        state[j] = RUNNING
        if np.isnan(first_start[j]):
            first_start[j] = now
        new_phase = first_phase(has_run[j], overhead)
        has_run[j] = True
        start_phase(j, new_phase, now, overhead, phase, phase_start, work, next_check, epoch,
                    chk_ptr, chk_work, duration, speed, eval_min, heap, slots)
    return OK
