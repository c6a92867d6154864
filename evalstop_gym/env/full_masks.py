"""The full-control masks of every env, in one compiled pass over the table's row states.

`CompiledFullBatch` hands out each decision's masks flat (MaskablePPO's `action_masks`) and as
SyncVectorEnv's per-env tuples; a handful of numpy calls over (N, 3 * max_jobs + 1) arrays cost
more than the loop that writes them, and comparing with the last decision's tells which envs
need a new tuple.
"""

from __future__ import annotations

from ..sim.jit import njit


@njit(cache=True)
def write_masks(row_state, row_gpus, free, flat, picks):
    """Each env's options into `flat` (bool): per row, keep (always) then stop (running rows);
    then the base's pick (always) and each row's pick (a waiting job that fits in `free`); its
    picks into `picks` (int8, the last max_jobs + 1 of `flat`)."""
    n, m = row_state.shape
    for i in range(n):
        flat[i, 2 * m] = True
        picks[i, 0] = 1
        for r in range(m):
            state = row_state[i, r]
            can_pick = state > 0 and row_gpus[i, r] <= free[i]
            flat[i, 2 * r] = True
            flat[i, 2 * r + 1] = state == 0
            flat[i, 2 * m + 1 + r] = can_pick
            picks[i, r + 1] = can_pick


@njit(cache=True)
def changed_envs(flat, last, out):
    """The envs whose row of `flat` differs from `last`'s, ascending, into `out`; how many."""
    n, width = flat.shape
    k = 0
    for i in range(n):
        for c in range(width):
            if flat[i, c] != last[i, c]:
                out[k] = i
                k += 1
                break
    return k
