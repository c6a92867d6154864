"""The compiled allocation of preemptive schedulers: `lazy_fill`'s walk down the ranking, with
each running job it asks for re-keyed here (`running_key`), as a view taken now gives it; the
reference engine's `PriorityIndex` walks the same way, asking the cluster for fresh views.
"""

from __future__ import annotations

from .kernel_jobs import running_key
from .kernel_layout import S_FREE, S_N_RUN, S_RHEAP
from .kernel_queues import store_running_key
from .kernel_steps import part, step
from .lazy_fill import walk


@part
def rekey_all_running(now, key_kind, phase, work, phase_start, speed, duration, gpu_min, gpus,
                      arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                      next_check, ev_ptr, ev_score, major, key, rheap, run_list, run_version,
                      slots):
    """Keys that rose as their jobs ran (`Platform.rekeys_at_passes`), all stored afresh."""
    n_rheap = 0
    for q in range(slots[S_N_RUN]):
        j = run_list[q]
        major[j], key[j] = running_key(key_kind, j, now, phase, work, phase_start, speed,
                                       duration, gpu_min, gpus, arrival, dur_est, paced, chk_ptr,
                                       chk_prog, chk_work, chk_idx, chk_loss, next_check, ev_ptr,
                                       ev_score)
        n_rheap = store_running_key(rheap, n_rheap, j, major, key, arrival, run_version)
    slots[S_RHEAP] = n_rheap


@step
def allocate(spec, jobs, out, loop, space, now):
    """The pass's allocation: the jobs to start in `to_start`, the ranked running jobs in
    `after` (ascending), those that keep their GPUs marked in `keep`. Returns (n_after,
    n_start)."""
    key_kind, total_gpus, arrival, gpus = spec.key_kind, spec.total_gpus, jobs.arrival, jobs.gpus
    duration, dur_est, speed, paced = jobs.duration, jobs.dur_est, jobs.speed, jobs.paced
    chk_ptr, chk_prog, chk_work, chk_idx = jobs.chk_ptr, jobs.chk_prog, jobs.chk_work, jobs.chk_idx
    chk_loss, ev_ptr, ev_score = jobs.chk_loss, jobs.ev_ptr, jobs.ev_score
    work, next_check, gpu_min, phase_start = out.work, out.next_check, out.gpu_min, out.phase_start
    phase, cls_gpus, cls, cls_off = loop.phase, loop.cls_gpus, loop.cls, loop.cls_off
    cls_size, wait, major, key = loop.cls_size, loop.wait, loop.major, loop.key
    run_list, run_pos, run_version = loop.run_list, loop.run_pos, loop.run_version
    rheap, slots = loop.rheap, loop.int_slots
    after, top, pending, prefix = space.after, space.top, space.pending, space.prefix
    sizes, keep, to_start = space.sizes, space.keep, space.to_start
    if spec.rekeys_at_passes:
        rekey_all_running(now, key_kind, phase, work, phase_start, speed, duration, gpu_min, gpus,
                          arrival, dur_est, paced, chk_ptr, chk_prog, chk_work, chk_idx, chk_loss,
                          next_check, ev_ptr, ev_score, major, key, rheap, run_list, run_version,
                          slots)
    j, state = -1, (-1, 0, 0, 0, slots[S_FREE])
    while True:
        j, state, n_after, n_start = walk(j, state, total_gpus, gpus, arrival, cls, cls_gpus,
                                          cls_off, cls_size, wait, major, key, rheap, run_pos,
                                          run_version, after, top, pending, prefix, sizes, keep,
                                          to_start, slots)
        if j < 0:
            return n_after, n_start
        major[j], key[j] = running_key(key_kind, j, now, phase, work, phase_start, speed,
                                       duration, gpu_min, gpus, arrival, dur_est, paced, chk_ptr,
                                       chk_prog, chk_work, chk_idx, chk_loss, next_check, ev_ptr,
                                       ev_score)
