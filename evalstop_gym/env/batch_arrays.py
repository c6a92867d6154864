"""The compiled batch's state: the engine's arrays with a row per env, plus what its reward reads.

Every array is 2-D (3-D for the heaps): row i is env i's cluster, padded to the largest workload
seen; growing keeps every row's contents, so a big workload mid-episode costs the others
nothing. `batch_load.load_row` packs one workload into a row (`load_truth` adds the hidden
truth the reward reads); `batch_step.step_all` runs the rows in compiled code.
"""

from __future__ import annotations

from typing import Any, NamedTuple

import numpy as np

from ..sim.jit import njit
from ..sim.native_kernel import N_FLOAT_SLOTS, N_INT_SLOTS, Jobs, LoopState, Outcome

# per-env reward state: ints (arrivals admitted, open jobs), floats (booked integrals,
# integrals at the last decision, the episode's term totals)
R_ADMITTED, R_OPEN = 0, 1
R_BOOKED, R_LAST, R_TOTAL = 0, 3, 6
N_REWARD_FLOATS = 11


class Extra(NamedTuple):
    """What the reward reads beyond the engine's arrays (hidden truth; never the observation)."""

    is_hacking: np.ndarray
    peak_prog: np.ndarray    # true peak progress
    ev_point: np.ndarray     # per job, in its ev_* span: its eval points, in schedule order
    ev_true: np.ndarray      # and the true score at each


class BatchArrays(NamedTuple):
    """Everything `batch_step.step_all` reads and writes, a row per env."""

    jobs: Jobs
    out: Outcome
    loop: LoopState
    extra: Extra
    open: np.ndarray         # the reward's open jobs (arrived, end not booked), in admission order
    order: np.ndarray        # job ids by arrival: the reward admits them in this order
    reward_ints: np.ndarray     # R_ADMITTED, R_OPEN
    reward_floats: np.ndarray   # R_BOOKED, R_LAST, R_TOTAL spans


def allocate(num_envs: int, n: int, n_chk: int, n_ev: int, old: BatchArrays | None
             ) -> BatchArrays:
    """Arrays for n jobs, n_chk checks and n_ev evals per env, holding `old`'s contents."""
    size = {"job": n, "ptr": n + 1, "chk": n_chk, "ev": n_ev}
    rows = (2 * n + 17, 4 * n + 17)         # heaps keep what they grew to
    if old is not None:
        rows = (max(rows[0], old.loop.heap.shape[1]), max(rows[1], old.loop.rheap.shape[1]))

    def arr(kind: str, dtype: Any, fill: Any = 0) -> np.ndarray:
        return np.full((num_envs, size[kind]), fill, dtype)

    f, i, b = np.float64, np.int64, np.bool_
    new = BatchArrays(
        Jobs(arr("job", f), arr("job", i, 1), arr("job", f, 1.0), arr("job", f), arr("job", f),
             arr("job", f), arr("job", f, 1.0), arr("job", i), arr("job", b), arr("ptr", i),
             arr("chk", f), arr("chk", f), arr("chk", i), arr("chk", f), arr("ptr", i),
             arr("ev", f), arr("ev", f)),
        Outcome(arr("job", i), arr("job", f), arr("job", i), arr("job", i), arr("job", b),
                arr("job", f, np.nan), arr("job", f, np.nan), arr("job", f), arr("job", f),
                arr("job", i), arr("job", f), arr("chk", f, np.nan), arr("job", f, np.nan)),
        LoopState(arr("job", i), arr("job", i), arr("job", i), arr("job", i), arr("job", i),
                  arr("job", i), arr("job", i), arr("job", f), arr("job", i, -1),
                  arr("job", i), arr("job", i, -1), arr("job", i), arr("job", i),
                  np.zeros((num_envs, rows[0], 4)), np.zeros((num_envs, rows[1], 5)),
                  np.zeros((num_envs, N_INT_SLOTS), i), np.zeros((num_envs, N_FLOAT_SLOTS)),
                  arr("chk", i)),
        Extra(arr("job", b), arr("job", f), arr("ev", f), arr("ev", f)),
        arr("job", i), arr("job", i), np.zeros((num_envs, 2), i),
        np.zeros((num_envs, N_REWARD_FLOATS)))
    if old is not None:
        for new_t, old_t in zip(new[:4], old[:4], strict=True):
            for a, o in zip(new_t, old_t, strict=True):
                _keep(a, o)
        for a, o in zip(new[4:], old[4:], strict=True):
            _keep(a, o)
    return new


def _keep(new: np.ndarray, old: np.ndarray) -> None:
    """`old`'s rows into the bigger `new` (a heap's last row is scratch: not kept)."""
    if new.ndim == 3:
        new[:, :old.shape[1] - 1] = old[:, :-1]
    else:
        new[:, :old.shape[1]] = old


def grown_heaps(loop: LoopState) -> LoopState:
    """`loop` with both heaps twice as long, their rows kept."""
    bigger = [np.zeros((h.shape[0], 2 * h.shape[1], h.shape[2])) for h in (loop.heap, loop.rheap)]
    for new, old in zip(bigger, (loop.heap, loop.rheap), strict=True):
        _keep(new, old)
    return loop._replace(heap=bigger[0], rheap=bigger[1])


@njit(cache=True)
def load_truth(extra, i, workload):
    """Row i's hidden truth: each job's label, true peak, eval points and true scores (in its
    ev_* span: a job has one eval check per eval point)."""
    w = workload
    n = w.arrival.shape[0]
    extra.is_hacking[i, :n] = w.is_hacking
    extra.peak_prog[i, :n] = w.peak_progress
    for j in range(n):
        points = w.points[w.sched_ptr[w.schedule[j]]:]
        for e in range(w.ev_ptr[j], w.ev_ptr[j + 1]):
            extra.ev_point[i, e] = points[e - w.ev_ptr[j]]
            extra.ev_true[i, e] = w.eval_true[e]
