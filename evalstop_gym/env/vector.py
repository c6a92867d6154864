"""`EvalStopCluster-v0` batched: N clusters behind Gymnasium's `VectorEnv` API, in both controls.

    venv = gym.make_vec("EvalStopCluster-v0", num_envs=64, vectorization_mode="vector_entry_point")

One `step` advances every cluster inside a batch core (`batch_core.py`): the compiled engine
where the base scheduler has a compiled form (`compiled_batch.py`, `compiled_full.py`), else N
single envs in Python (`batch_core.py`, `full_batch.py`). Env i gives the same episodes as a
single `EvalStopClusterEnv` with the same seed and actions, autoresets included.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from functools import partial
from typing import TYPE_CHECKING, Any

import numpy as np
from gymnasium import spaces
from gymnasium.vector import AutoresetMode, VectorEnv
from gymnasium.vector.utils import batch_space

from ..config import SimConfig
from ..policies import make_policy
from ..sim import native
from ..simulate import resolve_config
from .arguments import check_max_jobs
from .batch_core import BatchCore, EpisodeSeeds, ReferenceBatch, check_num_envs, check_stop
from .cluster_env import CONTROLS
from .full_batch import ReferenceFullBatch

if TYPE_CHECKING:
    from .compiled_full import CompiledFullBatch

ENGINES = native.ENGINES   # "auto", "native", "python": as `simulate`'s engine argument


def compiled_core() -> type[BatchCore]:
    """The compiled batch core's class, imported when first chosen (it imports numba)."""
    from .compiled_batch import CompiledBatch

    return CompiledBatch


def select_core(engine: str, config: SimConfig, base_scheduler: str) -> type[BatchCore]:
    """The core to run: compiled when the base has a compiled form, numba is present and the
    cluster is homogeneous ("auto"; "native" insists), else the reference."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: choose one of {', '.join(ENGINES)}")
    policy = make_policy(base_scheduler)   # an unknown name fails here, before any work
    # the engine choice `simulate` makes for the base alone (native.select: the same reasons,
    # the same errors); the agent's stops are the compiled loop's RULE_AGENT
    return ReferenceBatch if native.select(config, policy, engine) is None else compiled_core()


def select_full_core(engine: str, config: SimConfig, base_scheduler: str
                     ) -> type[ReferenceFullBatch] | type[CompiledFullBatch]:
    """The control="full" core, chosen as `select_core` chooses: compiled (`compiled_full.py`)
    where the base has a compiled form ("auto"; "native" insists), else N single envs."""
    if engine not in ENGINES:
        raise ValueError(f"engine={engine!r}: choose one of {', '.join(ENGINES)}")
    policy = make_policy(base_scheduler)   # an unknown name fails here, before any work
    if native.select(config, policy, engine) is None:
        return ReferenceFullBatch
    from .compiled_full import CompiledFullBatch

    return CompiledFullBatch


class EvalStopClusterVectorEnv(VectorEnv):
    """N independent `EvalStopCluster-v0` clusters, stepped together.

    Gymnasium 1.x conventions: batched `Dict` observations (`observation_space`, built with
    `batch_space` from `single_observation_space`), `action_space` the single env's batched
    (control="stop": MultiDiscrete([2] * N); control="full": an integer Box of shape
    (N, max_jobs + 1), a MultiDiscrete row per env, as `batch_space` batches it), float64
    rewards, bool terminations (never truncated), next-step autoreset (an env that ended
    at step t is reset at step t + 1: its action ignored, reward 0, terminated False).
    `reset(seed=s)` seeds env i with s + i, `reset(seed=[...])` one each; an unseeded autoreset
    draws the workload seed from env i's own generator, as `EvalStopClusterEnv.reset()` does.
    Infos are dicts of arrays with `_key` masks: `job_id` (stop) and `action_mask` every step,
    `metrics` and `reward_terms` (dicts of arrays) at episode end; in control="full"
    `info["action_mask"]` is SyncVectorEnv's object array of the single envs' mask tuples
    (`single_action_space.sample(mask=m)` for each m draws a valid row), and
    `action_masks()` gives them flat, (N, 3 * max_jobs + 1), for MaskablePPO. `engine`: "auto"
    (compiled core where possible), "native" (compiled or an error) or "python" (N single
    envs). Other arguments as `EvalStopClusterEnv`.
    """

    metadata: dict[str, Any] = {"autoreset_mode": AutoresetMode.NEXT_STEP, "render_modes": []}

    def __init__(self, num_envs: int = 1, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", control: str = "stop",
                 monitored: Iterable[str] = ("rlhf", "dpo"), milestones: Iterable[float] = (),
                 max_jobs: int = 64, overrides: Mapping[str, Any] | None = None,
                 engine: str = "auto", render_mode: str | None = None,
                 **dotted_overrides: Any) -> None:
        if control not in CONTROLS:
            raise ValueError(f"control={control!r}: choose one of {', '.join(CONTROLS)}")
        max_jobs = check_max_jobs(max_jobs)
        if render_mode is not None:
            raise ValueError(f"render_mode={render_mode!r}: the vector env does not render "
                             f"(use None, or a single env)")
        num_envs = check_num_envs(num_envs)
        if overrides is not None and not isinstance(overrides, Mapping):
            resolve_config(config, overrides)   # raises, naming the argument
        self.config = resolve_config(config, {**(overrides or {}), **dotted_overrides})
        self.control = control
        self.num_envs = num_envs
        if control == "full":
            full = select_full_core(engine, self.config, base_scheduler)(
                num_envs, self.config, base_scheduler, tuple(monitored), tuple(milestones),
                max_jobs)
            self.full: ReferenceFullBatch | CompiledFullBatch | None = full
            self.core: BatchCore = full
            self.single_action_space: spaces.Space = full.single_action_space
            self.check_actions: Callable[[Any], np.ndarray] = full.check_actions
        else:
            self.full = None
            self.core = select_core(engine, self.config, base_scheduler)(
                num_envs, self.config, base_scheduler, monitored, milestones)
            self.single_action_space = spaces.Discrete(2)
            self.check_actions = partial(check_stop, num_envs=num_envs)
        self.render_mode = None
        self.single_observation_space = self.core.single_observation_space
        self.observation_space = batch_space(self.single_observation_space, num_envs)
        self.action_space = batch_space(self.single_action_space, num_envs)
        self.seeds = EpisodeSeeds(num_envs)
        self._autoreset = np.zeros(num_envs, dtype=bool)
        self._started = False

    def reset(self, *, seed: int | list[int | None] | None = None,
              options: dict[str, Any] | None = None) -> tuple[dict[str, np.ndarray],
                                                              dict[str, Any]]:
        """Reset every env (or those of `options["reset_mask"]`, a bool array, as
        SyncVectorEnv), seeded per Gymnasium's vector convention."""
        self._check_open("reset")
        seeds = EpisodeSeeds.spread(seed, self.num_envs)
        mask = np.ones(self.num_envs, dtype=bool)
        if options is not None and (not isinstance(options, dict) or set(options) - {"reset_mask"}):
            raise ValueError(f"options={options!r:.60}: expected None or a dict whose one key is "
                             f"'reset_mask' (a bool array of shape ({self.num_envs},))")
        if options and "reset_mask" in options:
            mask = np.asarray(options["reset_mask"])
            if mask.shape != (self.num_envs,) or mask.dtype != np.bool_ or not mask.any():
                raise ValueError(f"options['reset_mask']: expected a bool array of shape "
                                 f"({self.num_envs},) with at least one True")
        if not self._started and not mask.all():
            raise ValueError("options['reset_mask']: the first reset() resets every env (none "
                             "has an episode yet); a mask applies to the resets after it")
        indices = np.flatnonzero(mask).tolist()
        self.core.reset(indices, self.seeds.draw(indices, [seeds[i] for i in indices]))
        self._autoreset[indices] = False
        self._started = True
        return self._observations(), self._infos(mask)

    def step(self, actions: Any) -> tuple[dict[str, np.ndarray], np.ndarray, np.ndarray,
                                          np.ndarray, dict[str, Any]]:
        self._check_open("step")
        if not self._started:
            raise RuntimeError("call reset() before step()")
        resetting = self._autoreset
        indices = np.flatnonzero(resetting).tolist()
        if indices:   # refused before the resets' seeds are drawn; else the core's check does
            actions = self.check_actions(actions)
        # envs that ended last step are terminated in the core: not stepped, reset; the core
        # checks the actions before any env moves
        self.core.step_and_reset(actions, indices,
                                 self.seeds.draw(indices, [None] * len(indices)))
        reward = self.core.reward.copy()
        reward[resetting] = 0.0
        terminated = self.core.terminated & ~resetting
        self._autoreset = terminated.copy()
        return (self._observations(), reward, terminated,
                np.zeros(self.num_envs, dtype=bool), self._infos())

    def _check_open(self, method: str) -> None:
        if self.closed:   # gymnasium's VectorEnv.close sets it
            raise RuntimeError(f"{method}() after close(): the env is closed; make a new one")

    def action_masks(self) -> np.ndarray:
        """Valid actions, a flat row per env, as MaskablePPO wants them: (num_envs, 2), both
        always, in control="stop"; each env's stop bits and picks in control="full"."""
        if self.full is not None:
            return self.full.action_masks()
        return np.ones((self.num_envs, 2), dtype=bool)

    def _observations(self) -> dict[str, np.ndarray]:
        return {key: rows.copy() for key, rows in self.core.obs.items()}

    def _infos(self, given: np.ndarray | None = None) -> dict[str, Any]:
        """The single envs' infos in Gymnasium's vector form: what SyncVectorEnv would give for
        the keys the core carries, from every env or (`given`, a bool mask) the envs reset."""
        given = np.ones(self.num_envs, dtype=bool) if given is None else given
        live = ~self.core.terminated & given
        infos: dict[str, Any] = {}
        if self.full is not None:
            masks = self.full.gym_masks()   # SyncVectorEnv's form: None where not given
            masks[~given] = None
            infos["action_mask"] = masks
        else:
            infos["job_id"] = np.where(live, self.core.job_ids(), 0)
            infos["_job_id"] = live
            infos["action_mask"] = np.zeros((self.num_envs, 2), dtype=np.int8)
            infos["action_mask"][given] = 1
        infos["_action_mask"] = given.copy()
        for i in np.flatnonzero(given & self.core.terminated).tolist():
            self._add_info(infos, {"metrics": self.core.metrics(i),
                                   "reward_terms": self.core.reward_terms(i)}, i)
        return infos
