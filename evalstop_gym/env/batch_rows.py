"""Env i's rows of the compiled batch's arrays, as the 1-D arrays the engine's loop takes.

`step_all` hands `sim.native_kernel.advance` one env's jobs, outcome and loop state: about 50
rows of the batch's 2-D arrays per env step. A numba view holds a reference to its parent, and
taking and dropping one costs two atomic reference-count calls that numba's pruning did not
remove in `step_all` (measured at N=64, per env step: `advance` with its rows 3.3 us with
references, 1.8 without; the reward 3.0 us, 0.6 without). `row`
takes the same view without the reference: `step_all`'s arguments keep every parent alive for
the whole call, and no row outlives it (nothing stores or returns one). `sim/borrowed.py`
holds `row`; the engine's loop borrows its own arrays the same way.
"""

from __future__ import annotations

from ..sim.borrowed import row
from ..sim.jit import njit
from ..sim.native_kernel import Jobs, LoopState, Outcome
from .batch_arrays import Extra


@njit(cache=True, inline="always")
def jobs_row(a, i):
    return Jobs(row(a.arrival, i), row(a.gpus, i), row(a.duration, i), row(a.dur_est, i),
                row(a.eval_min, i), row(a.peak, i), row(a.speed, i), row(a.jtype, i),
                row(a.paced, i), row(a.chk_ptr, i), row(a.chk_prog, i), row(a.chk_work, i),
                row(a.chk_idx, i), row(a.chk_loss, i), row(a.ev_ptr, i), row(a.ev_score, i),
                row(a.ev_prog, i))


@njit(cache=True, inline="always")
def out_row(a, i):
    return Outcome(row(a.state, i), row(a.work, i), row(a.next_check, i), row(a.epoch, i),
                   row(a.has_run, i), row(a.first_start, i), row(a.end_time, i),
                   row(a.gpu_min, i), row(a.gpu_after, i), row(a.n_pre, i),
                   row(a.phase_start, i), row(a.chk_time, i), row(a.stop_value, i))


@njit(cache=True, inline="always")
def loop_row(a, i):
    return LoopState(row(a.phase, i), row(a.cls_gpus, i), row(a.cls, i), row(a.cls_off, i),
                     row(a.cls_size, i), row(a.wait, i), row(a.major, i), row(a.key, i),
                     row(a.run_seq, i), row(a.run_list, i), row(a.run_pos, i),
                     row(a.run_version, i), row(a.arrivals, i), row(a.heap, i),
                     row(a.rheap, i), row(a.int_slots, i), row(a.float_slots, i),
                     row(a.continued, i))


@njit(cache=True, inline="always")
def truth_row(a, i):
    return Extra(row(a.is_hacking, i), row(a.peak_prog, i), row(a.ev_point, i),
                 row(a.ev_true, i))
