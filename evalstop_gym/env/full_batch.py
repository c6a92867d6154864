"""The batch core of control="full": N clusters whose agent stops running jobs and picks the
waiting job to start first at every scheduling pass (`EvalStopClusterEnv(control="full")`).

`ReferenceFullBatch` drives N single envs in Python, so row i is the single env by construction:
the reference that a compiled full-control core is held to, and the core the vector env runs in
control="full" today.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from ..config import SimConfig
from .batch_core import ReferenceBatch


def check_full_actions(actions: Any, num_envs: int, max_jobs: int) -> np.ndarray:
    """One MultiDiscrete([2] * max_jobs + [max_jobs + 1]) row per env, integers inside the space
    (the single env ignores an in-range part that its mask forbids, never an out-of-range one
    here: a batch refuses it before any env moves)."""
    array = np.asarray(actions)
    width = max_jobs + 1
    if array.shape != (num_envs, width) or not (array.dtype == np.bool_
                                                or np.issubdtype(array.dtype, np.integer)):
        raise ValueError(f"actions: expected integers of shape ({num_envs}, {width}), one row "
                         f"MultiDiscrete([2] * {max_jobs} + [{width}]) per env; got shape "
                         f"{array.shape} and dtype {array.dtype}")
    array = array.astype(np.int64, copy=False)
    stops, picks = array[:, :max_jobs], array[:, max_jobs]
    # one pass each in the common case: a stop bit has no bit but the lowest set (negatives
    # included), a pick read unsigned is at most max_jobs; the message names the first bad one
    if not (stops & ~1).any() and not (picks.view(np.uint64) > max_jobs).any():
        return array
    if ((stops != 0) & (stops != 1)).any():
        env, row = np.argwhere((stops != 0) & (stops != 1))[0]
        raise ValueError(f"actions[{env}, {row}]={stops[env, row]}: a stop bit (columns 0 to "
                         f"{max_jobs - 1}) is 0 (keep) or 1 (stop that running job)")
    if ((picks < 0) | (picks > max_jobs)).any():
        env = int(np.argmax((picks < 0) | (picks > max_jobs)))
        raise ValueError(f"actions[{env}, {max_jobs}]={picks[env]}: the pick (last column) is "
                         f"in [0, {max_jobs}] (0: the base allocates; 1 + row: start that "
                         f"waiting job first)")
    return array


class ReferenceFullBatch(ReferenceBatch):
    """`BatchCore` over N `EvalStopClusterEnv(control="full")`: actions are (N, max_jobs + 1)
    rows, and each env's valid options are read from its single env (`action_masks`)."""

    control = "full"

    def __init__(self, num_envs: int, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", monitored: Iterable[str] = ("rlhf", "dpo"),
                 milestones: Iterable[float] = (), max_jobs: int = 64, **overrides: Any) -> None:
        super().__init__(num_envs, config, base_scheduler, monitored, milestones,
                         max_jobs=max_jobs, **overrides)
        self.max_jobs: int = self.envs[0].encoder.max_jobs  # type: ignore[union-attr]

    def check_actions(self, actions: Any) -> np.ndarray:
        return check_full_actions(actions, self.num_envs, self.max_jobs)

    def flat_mask(self, i: int) -> np.ndarray:
        """Env i's valid options, flat over the action's components (MaskablePPO's form)."""
        return self.envs[i].action_masks()

    def action_masks(self) -> np.ndarray:
        """(num_envs, 3 * max_jobs + 1): every env's `flat_mask`, as MaskablePPO stacks them."""
        return np.stack([self.flat_mask(i) for i in range(self.num_envs)])

    def gym_mask(self, i: int) -> tuple[np.ndarray, ...]:
        """Env i's `info["action_mask"]`: one int8 array per component (what `sample` takes)."""
        return self._infos[i]["action_mask"]

    def gym_masks(self) -> np.ndarray:
        """Every env's `gym_mask`, as SyncVectorEnv's object array."""
        masks = np.empty(self.num_envs, object)
        for i in range(self.num_envs):
            masks[i] = self.gym_mask(i)
        return masks
