"""`CompiledFullBatch`: N full-control clusters advanced inside compiled code.

The control="full" counterpart of `CompiledBatch`: each env is the compiled engine's event loop
paused at every scheduling pass (`EvalStopClusterEnv(control="full")` returns at every
`ScheduleRequest`), and one jitted call (`full_step.full_step_all`) applies every env's action,
runs it to its next pass and writes its table row, reward and terminated flag. Row i equals the
single env with the same seed and actions, bit for bit (`tests/test_compiled_full.py`). Loading a
workload, the episode's metrics and reward totals are `CompiledBatch`'s.

The one part left to numpy is each row's training loss (`curves.exp_loss` at the view's
progress): numpy's exp and log, which the single env calls, round differently from compiled
code's in the last bit, so the rows whose loss changed are listed by the step and computed in
one numpy call after it, from each job's `curves.loss_terms` (its log taken once, at a reset).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from gymnasium import spaces

from ..config import SimConfig
from ..sim import native_kernel as kernel
from ..sim.curves import loss_at, loss_terms
from ..sim.kernel_layout import PASS, S_AGENT_PASSES
from ..sim.workload import eval_points
from .arguments import check_max_jobs
from .compiled_batch import CompiledBatch
from .full_batch import check_full_actions
from .full_masks import changed_envs, write_masks
from .full_step import full_step_all
from .full_table import LOSS
from .observation import Limits, TableObservation

FULL_FIELDS = ("jobs", "job_mask", "cluster")   # the table's fields, as full_step_all takes them


def _row_options() -> np.ndarray:
    """The two (keep, stop) masks a row can have, running and not, as read-only int8 arrays
    that every row's mask shares: a view per row and env cost ~0.1 us, 7.7 of a step's ~35 us
    per env at max_jobs=64."""
    options = np.empty(2, object)
    for k, values in enumerate(([1, 1], [1, 0])):
        options[k] = np.array(values, np.int8)
        options[k].flags.writeable = False
    return options


ROW_OPTIONS = _row_options()   # [running, else]


class CompiledFullBatch(CompiledBatch):
    """N independent `EvalStopCluster-v0` (control="full") envs on the compiled engine: actions
    are (N, max_jobs + 1) rows, the valid options each env's `action_masks`."""

    control = "full"

    def __init__(self, num_envs: int, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", monitored: Sequence[str] = ("rlhf", "dpo"),
                 milestones: Sequence[float] = (), max_jobs: int = 64, **overrides: Any) -> None:
        super().__init__(num_envs, config, base_scheduler, monitored, milestones, **overrides)
        # in control="full" no check pauses: every one is answered "continue" inside the loop
        self._platform = self._platform._replace(
            k_by_type=np.zeros_like(self._platform.k_by_type))
        self.max_jobs = check_max_jobs(max_jobs)
        n, m = self.num_envs, self.max_jobs
        n_evals = len(eval_points(self.config.evals.interval, self.config.evals.final))
        self.table = TableObservation(m, Limits.of(self.config, n_evals))
        self.single_observation_space: spaces.Dict = self.table.space
        self.single_action_space = spaces.MultiDiscrete([2] * m + [m + 1])
        self.obs = {k: np.zeros((n, *s.shape), s.dtype)   # type: ignore[misc]
                    for k, s in self.table.space.spaces.items()}
        boxes = [self.table.space[k] for k in ("jobs", "cluster")]
        self._table_bounds = tuple((np.asarray(b.low, np.float64), np.asarray(b.high, np.float64))
                                   for b in boxes if isinstance(b, spaces.Box))
        self._row_job = np.full((n, m), -1, np.int64)
        self._row_state = np.full((n, m), -1, np.int8)
        self._row_prog = np.zeros((n, m))
        self._row_gpus = np.zeros((n, m), np.int64)
        self._row_keys = np.zeros((n, m, 3), np.int64)   # a row's job's history, as shown
        # the rows whose loss is to compute: where in the flat table, progress and parameters
        self._fresh = (np.zeros(n * m, np.int64), np.zeros((4, n * m)), np.zeros(1, np.int64))
        self._actions = np.zeros((n, m + 1), np.int64)
        self._pending = np.zeros(n, np.bool_)
        self._answered = np.zeros(n, np.bool_)
        self._lost = np.zeros(n)
        self._false_stops = np.zeros(n)
        self._loss_params = np.zeros((3, n, 1))   # (`loss_terms` part, env, job)
        self._mask_cache: tuple[np.ndarray, np.ndarray] | None = None
        self._changed = np.zeros(n, np.int64)   # the envs whose gym masks changed
        self._gym_masks: tuple[np.ndarray, np.ndarray] | None = None   # the last decision's
        self._flat_table = self.obs["jobs"].reshape(-1)   # a view
        # every row's loss column has the same bounds (the table's rows tile one row's)
        self._loss_bounds = (float(self._table_bounds[0][0][LOSS]),
                             float(self._table_bounds[0][1][LOSS]))

    # ------------------------------------------------------------------ the contract

    def check_actions(self, actions: Any) -> np.ndarray:
        return check_full_actions(actions, self.num_envs, self.max_jobs)

    def step(self, actions: Any) -> None:
        """Apply every live env's action row at its pass and run it to its next pass."""
        self._actions[:] = self.check_actions(actions)
        live = ~self.terminated
        self._pending[:] = live
        self._answered[:] = live
        self.reward[self.terminated] = 0.0
        self._run(live, fresh=True)

    def action_masks(self) -> np.ndarray:
        """(num_envs, 3 * max_jobs + 1): each env's (keep, stop) per row, then its picks."""
        return self._masks()[0].copy()

    def flat_mask(self, i: int) -> np.ndarray:
        return self._masks()[0][i].copy()

    def gym_mask(self, i: int) -> tuple[np.ndarray, ...]:
        """Env i's `info["action_mask"]`: one int8 array per component (what `sample` takes)."""
        return self._gym_tuples(np.array([i]))[0]

    def gym_masks(self) -> np.ndarray:
        """Every env's `gym_mask`, as SyncVectorEnv's object array, built once per decision: an
        env whose options did not change since the last one (~80% of them a step at N=64)
        hands out the same tuple again (its arrays are never written)."""
        flat = self._masks()[0]
        if self._gym_masks is None:
            masks, changed = np.empty(self.num_envs, object), np.arange(self.num_envs)
        else:
            masks = self._gym_masks[1].copy()
            changed = self._changed[:changed_envs(flat, self._gym_masks[0], self._changed)]
        masks[changed] = self._gym_tuples(changed)
        self._gym_masks = (flat, masks)
        return masks.copy()

    def _gym_tuples(self, envs: np.ndarray) -> np.ndarray:
        """`gym_mask` of each of `envs`, as an object array: each row's (keep, stop) one of
        `ROW_OPTIONS`, then the env's picks (a new array each decision: the tuples handed out
        keep their values)."""
        flat, picks = self._masks()
        m = self.max_jobs
        rows = ROW_OPTIONS[(~flat[envs, 1:2 * m:2]).astype(np.intp)].tolist()
        return np.fromiter([(*r, p) for r, p in zip(rows, picks[envs], strict=True)],
                           dtype=object, count=len(envs))

    def _masks(self) -> tuple[np.ndarray, np.ndarray]:
        """This decision's masks, computed once: flat (bool, a new array each decision) and
        each env's picks (int8)."""
        if self._mask_cache is None:
            n, m = self.num_envs, self.max_jobs
            flat, picks = np.empty((n, 3 * m + 1), np.bool_), np.empty((n, m + 1), np.int8)
            write_masks(self._row_state, self._row_gpus,
                        self._arrays.loop.int_slots[:, kernel.S_FREE], flat, picks)
            self._mask_cache = (flat, picks)
        return self._mask_cache

    def job_id(self, i: int) -> int:
        return -1   # a pass reports no single job

    # ------------------------------------------------------------------ internals

    _kernel: Any = staticmethod(full_step_all)
    _paused = PASS
    _kernel_loads = False   # full_step_all loads nothing: `_load` fills a row before it runs

    def _load(self, i: int, seed: int) -> None:
        super()._load(i, seed)
        self._arrays.loop.int_slots[i, S_AGENT_PASSES] = 1
        workload = self._workloads[i]
        assert workload is not None
        n = workload.n_jobs
        if n > self._loss_params.shape[2]:
            grown = np.zeros((3, self.num_envs, n))
            grown[:, :, :self._loss_params.shape[2]] = self._loss_params
            self._loss_params = grown
        self._loss_params[:, i, :n] = loss_terms(*workload.loss_params.T)
        self._pending[i] = self._answered[i] = False
        self._lost[i] = self._false_stops[i] = 0.0
        self._row_job[i], self._row_state[i], self._row_gpus[i] = -1, -1, 0   # a new workload:
        for rows in self.obs.values():                                      # no row shows a job
            rows[i] = 0

    def _run(self, todo: np.ndarray, fresh: bool) -> None:
        self._mask_cache = None
        self._fresh[2][0] = 0
        super()._run(todo, fresh)
        self._fill_losses()

    def _arguments(self, todo: np.ndarray, fresh: bool, status: np.ndarray) -> tuple[Any, ...]:
        """`full_step_all`'s arguments (`fresh` is `pending`: a resumed env's action is kept)."""
        return (self._platform, self._arrays, self._scratch, self._weights, self._actions,
                self._pending, self._answered, self.terminated, self.reward,
                tuple(self.obs[k] for k in FULL_FIELDS), self._table_bounds, self._row_job,
                self._row_state, self._row_prog, self._row_gpus, self._row_keys,
                (self._loss_params, *self._fresh), self._lost, self._false_stops, todo, status)

    def _fill_losses(self) -> None:
        """The training loss of each row the step listed (a job new to its row, or whose
        progress moved), as `Job.loss_at` computes it, over every env's at once; every other
        row keeps the loss it shows (the same job at the same progress)."""
        where, values, count = self._fresh
        k = int(count[0])
        if k:
            loss = loss_at(*values[:, :k])
            self._flat_table[where[:k]] = np.clip(loss, *self._loss_bounds)
