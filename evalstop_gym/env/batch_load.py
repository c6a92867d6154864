"""Workloads staged for the compiled step: drawn in Python, packed into env rows in compiled code.

A reset draws its workload with numpy (numba's generators do not give numpy's bits) and computes
what must round as numpy rounds (each check's training loss: `packing.check_losses`); the rest
of loading it, packing the jobs and their checks into env i's row (`packing.fill_packed`, the
packer `native.run` uses too) and clearing the row's loop state, runs in compiled code,
inside the same call that runs the env to its first decision (`batch_step.step_all`). The
workloads reset in one call are staged together, each field of all of them end to end in one
buffer per dtype (`Staged`), so a step passes three arrays whatever the number of resets.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..sim import native_kernel as kernel
from ..sim.jit import njit
from ..sim.packing import Layout, fill_packed
from ..sim.workload_arrays import WorkloadArrays
from .batch_arrays import load_truth
from .batch_rows import jobs_row, loop_row, out_row, row

_F: Any = np.float64
_I: Any = np.int64
_B: Any = np.bool_
# each field's dtype, in `staged_workload`'s order: the workload's fields, its layout's, its
# check pointers and losses
DTYPES = (*WorkloadArrays(_I, _I, _I, _F, _F, _F, _F, _B, _F, _F, _B, _F, _I, _F, _I, _I, _F, _I,
                          _F, _F, _F), *Layout(_I, _F, _I), _I, _F)
KINDS = (_F, _I, _B)   # the buffers of `Staged`, by dtype


class Staged(NamedTuple):
    """Workloads staged for loading: every field of all of them end to end, in one buffer per
    dtype (the compiled step is typed once and unboxes three arrays, not one per field);
    workload k's part of field f (`DTYPES` order) is [start[f, k], start[f, k + 1]) of its
    dtype's buffer (`loss_params` flat, four to a job)."""

    floats: np.ndarray
    ints: np.ndarray
    bools: np.ndarray
    start: np.ndarray       # int64 (fields, workloads + 1)


def stage(parts: list[tuple[WorkloadArrays, Layout, np.ndarray, np.ndarray]]) -> Staged:
    """The workloads of `parts` (each with its layout, check pointers (`packing.
    check_pointers`) and checks' losses (`packing.check_losses`)), staged."""
    columns = [[*w, *layout, chk_ptr, loss] for w, layout, chk_ptr, loss in parts]
    buffers: list[list[np.ndarray]] = [[] for _ in KINDS]
    used = [0] * len(KINDS)
    start = np.zeros((len(DTYPES), len(parts) + 1), np.int64)
    for f, dtype in enumerate(DTYPES):
        kind = KINDS.index(dtype)
        start[f, 0] = used[kind]
        for k, column in enumerate(columns):
            buffers[kind].append(column[f].ravel())
            used[kind] += column[f].size
            start[f, k + 1] = used[kind]
    floats, ints, bools = (np.concatenate(b, dtype=dtype) if b else np.zeros(0, dtype)
                           for b, dtype in zip(buffers, KINDS, strict=True))
    return Staged(floats, ints, bools, start)


@njit(cache=True, inline="always")
def _part(a, start, f, k):
    return a[start[f, k]:start[f, k + 1]]


@njit(cache=True)
def staged_workload(staged, k):
    """Staged workload k: its arrays, layout, check pointers and losses."""
    fl, it, b, s = staged.floats, staged.ints, staged.bools, staged.start
    loss_params = _part(fl, s, 11, k)
    return (WorkloadArrays(
        _part(it, s, 0, k), _part(it, s, 1, k), _part(it, s, 2, k), _part(fl, s, 3, k),
        _part(fl, s, 4, k), _part(fl, s, 5, k), _part(fl, s, 6, k), _part(b, s, 7, k),
        _part(fl, s, 8, k), _part(fl, s, 9, k), _part(b, s, 10, k),
        loss_params.reshape((loss_params.shape[0] // 4, 4)), _part(it, s, 12, k),
        _part(fl, s, 13, k), _part(it, s, 14, k), _part(it, s, 15, k), _part(fl, s, 16, k),
        _part(it, s, 17, k), _part(fl, s, 18, k), _part(fl, s, 19, k), _part(fl, s, 20, k)),
        Layout(_part(it, s, 21, k), _part(fl, s, 22, k), _part(it, s, 23, k)),
        _part(it, s, 24, k), _part(fl, s, 25, k))


@njit(cache=True)
def load_row(total_gpus, arrays, i, staged, k):
    """Env i's row holds staged workload k before its first event: its jobs and checks packed,
    its hidden truth, a clear outcome, an empty cluster, no reward booked."""
    w, layout, chk_ptr, chk_loss = staged_workload(staged, k)
    n = w.arrival.shape[0]
    jobs, out, loop = jobs_row(arrays.jobs, i), out_row(arrays.out, i), loop_row(arrays.loop, i)
    jobs.chk_loss[:chk_loss.shape[0]] = chk_loss
    fill_packed(w, layout, chk_ptr, jobs)
    load_truth(arrays.extra, i, w)
    out.state[:], out.work[:], out.next_check[:], out.epoch[:] = 0, 0.0, 0, 0
    out.has_run[:], out.first_start[:], out.end_time[:] = False, np.nan, np.nan
    out.gpu_min[:], out.gpu_after[:], out.n_pre[:], out.phase_start[:] = 0.0, 0.0, 0, 0.0
    out.chk_time[:], out.stop_value[:] = np.nan, np.nan
    loop.phase[:], loop.major[:], loop.key[:], loop.run_version[:] = 0, 0, 0.0, 0
    loop.run_seq[:], loop.run_pos[:] = -1, -1
    kernel.setup(total_gpus, jobs.arrival[:n], jobs.gpus[:n], loop.cls_gpus, loop.cls,
                 loop.cls_off, loop.cls_size, loop.arrivals, loop.int_slots, loop.float_slots)
    row(arrays.order, i)[:n] = loop.arrivals[:n]
    row(arrays.reward_ints, i)[:] = 0
    row(arrays.reward_floats, i)[:] = 0.0


@njit(cache=True)
def load_rows(total_gpus, arrays, staged, slot):
    """Load env i's staged workload slot[i] into its row, for every i with one (a core whose
    step does not load them itself); each slot is cleared."""
    for i in range(slot.shape[0]):
        if slot[i] >= 0:
            load_row(total_gpus, arrays, i, staged, slot[i])
            slot[i] = -1
