"""stable-baselines3 glue: the batched vector env as an SB3 `VecEnv`, normalising observations
without the masks, the paper's metrics in SB3's logger, and a progress bar. Needs the `rl` extra;
`evalstop_gym.env` does not import it.

    from evalstop_gym.env.sb3 import EpisodeMetricsCallback, MaskedVecNormalize, VectorEnvAdapter
    venv = MaskedVecNormalize(VectorEnvAdapter.make(64, seed=10_000))   # or make_vec_env(...)
    PPO("MultiInputPolicy", venv).learn(4_096, callback=EpisodeMetricsCallback())
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from functools import partial
from numbers import Integral
from typing import Any

import gymnasium as gym
import numpy as np
from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from stable_baselines3.common.vec_env.base_vec_env import VecEnvIndices, VecEnvStepReturn
from tqdm.auto import tqdm

from .vector import EvalStopClusterVectorEnv

# The paper metrics an episode's last info carries in info["metrics"], logged by default.
LOGGED_METRICS = ("jct", "wasted_frac", "precision", "recall", "fpr", "n_stopped", "ttfuc")


def feature_keys(space: spaces.Space) -> list[str]:
    """The Box entries of a Dict observation: what may be normalised (masks are MultiBinary)."""
    if not isinstance(space, spaces.Dict):
        raise ValueError(f"expected a Dict observation space, got {space}")
    return [k for k, sub in space.spaces.items() if isinstance(sub, spaces.Box)]


class MaskedVecNormalize(VecNormalize):
    """`VecNormalize` over the env's float features only: the validity masks pass unchanged
    (plain `VecNormalize` refuses a Dict holding MultiBinary masks unless given the keys)."""

    def __init__(self, venv: VecEnv, **kwargs: Any) -> None:
        kwargs.setdefault("norm_obs_keys", feature_keys(venv.observation_space))
        super().__init__(venv, **kwargs)


class EpisodeMetricsCallback(BaseCallback):
    """Records each finished episode's `info["metrics"]` in SB3's logger as `episode/<metric>`
    (averaged over the episodes that end between two log dumps), beside `rollout/ep_rew_mean`."""

    def __init__(self, metrics: Sequence[str] = LOGGED_METRICS, verbose: int = 0) -> None:
        super().__init__(verbose)
        self.metrics = tuple(metrics)

    def _on_step(self) -> bool:
        for done, info in zip(self.locals["dones"], self.locals["infos"], strict=True):
            values = info.get("metrics") if done else None
            if not values:
                continue
            for name in self.metrics:
                value = float(values.get(name, math.nan))
                if math.isfinite(value):
                    self.logger.record_mean(f"episode/{name}", value)
        return True


class ProgressBarCallback(BaseCallback):
    """A tqdm bar over training steps (SB3's own `progress_bar=True` needs the `rich` package)."""

    def __init__(self, total: int, disable: bool = False) -> None:
        super().__init__()
        self.total, self.disable = total, disable

    def _on_training_start(self) -> None:
        self.bar = tqdm(total=self.total, unit="step", desc="training", disable=self.disable)

    def _on_step(self) -> bool:
        self.bar.update(self.training_env.num_envs)
        return True

    def _on_training_end(self) -> None:
        self.bar.close()


def check_adapter_seed(seed: Any) -> None:
    """None or a whole number >= 0 (not a bool, a float or a text), else a one-line ValueError."""
    if seed is not None and (isinstance(seed, bool) or not isinstance(seed, Integral)
                             or int(seed) < 0):
        raise ValueError(f"seed={seed!r}: expected None or a whole number >= 0 (env i's next "
                         f"reset is seeded seed + i)")


class VectorEnvAdapter(VecEnv):
    """SB3's `VecEnv` over `EvalStopClusterVectorEnv`'s batch core, with DummyVecEnv's conventions:
    same-step autoreset (an ended env's last observation in `info["terminal_observation"]`, the
    returned row already its next episode's first), one info dict per env (`metrics` and
    `reward_terms` at episode end, `job_id` while running in control="stop", `action_mask` as
    the single env gives it, `TimeLimit.truncated` False), float32 rewards, and seeds from
    `seed()` used once at the next `reset()`. Env i gives the episodes of DummyVecEnv's env i
    over single envs seeded alike, in both controls. `action_masks()` and
    `env_method("action_masks")` serve MaskablePPO. Drive it or the vector env, not both."""

    PER_ENV = ("action_masks", "metrics", "reward_terms", "job_id")   # env_method's calls

    def __init__(self, venv: EvalStopClusterVectorEnv) -> None:
        self.venv, self.core = venv, venv.core
        super().__init__(venv.num_envs, venv.single_observation_space, venv.single_action_space)
        self.actions = np.zeros(venv.num_envs, dtype=np.int64)
        self._started = False

    @classmethod
    def make(cls, num_envs: int, seed: int | None = None, **kwargs: Any) -> VectorEnvAdapter:
        """The adapter over a new vector env (`kwargs` as `EvalStopClusterVectorEnv`), its first
        reset seeding env i with seed + i (as `make_vec_env(seed=...)`)."""
        check_adapter_seed(seed)   # before any env is built
        adapter = cls(EvalStopClusterVectorEnv(num_envs, **kwargs))
        adapter.seed(seed)
        return adapter

    def seed(self, seed: int | None = None) -> Sequence[int | None]:
        """Env i's next reset seeded with seed + i (None: a random seed, as SB3 draws it);
        anything but None or a whole number >= 0 is a one-line ValueError."""
        check_adapter_seed(seed)
        return super().seed(seed)

    def reset(self) -> dict[str, np.ndarray]:
        every = range(self.num_envs)
        self.core.reset(every, self.venv.seeds.draw(every, self._seeds))
        self.reset_infos = [self._info(i) for i in every]
        self._reset_seeds()
        self._reset_options()
        self._started = True
        return self._observations()

    def step_async(self, actions: np.ndarray) -> None:
        if not self._started:
            raise RuntimeError("VectorEnvAdapter: call reset() before step() (as every VecEnv)")
        self.venv._check_open("step")
        array = np.asarray(actions)   # (num_envs,) as predict() gives, or one column of them
        self.actions = self.venv.check_actions(
            array[:, 0] if array.ndim == 2 and array.shape[1:] == (1,) else array)

    def step_wait(self) -> VecEnvStepReturn:
        core = self.core
        core.step(self.actions)
        rewards = core.reward.astype(np.float32)
        dones = core.terminated.copy()
        infos = [self._info(i) for i in range(self.num_envs)]
        ended = np.flatnonzero(dones).tolist()
        for i in ended:
            infos[i]["terminal_observation"] = {k: rows[i].copy() for k, rows in core.obs.items()}
        if len(ended):
            core.reset(ended, self.venv.seeds.draw(ended, [None] * len(ended)))
            for i in ended:
                self.reset_infos[i] = self._info(i)
        return self._observations(), rewards, dones, infos

    def _info(self, i: int) -> dict[str, Any]:
        """Env i's info as DummyVecEnv passes it on (the keys the core carries)."""
        full = self.venv.full
        info: dict[str, Any] = {
            "action_mask": full.gym_mask(i) if full is not None else np.ones(2, dtype=np.int8),
            "TimeLimit.truncated": False}
        if self.core.terminated[i]:
            info["metrics"] = self.core.metrics(i)
            info["reward_terms"] = self.core.reward_terms(i)
        elif full is None:   # the full-control single env names no reporting job
            info["job_id"] = self.core.job_id(i)
        return info

    def _observations(self) -> dict[str, np.ndarray]:
        return {key: rows.copy() for key, rows in self.core.obs.items()}

    def action_masks(self) -> np.ndarray:
        """Valid actions, a flat row per env (`EvalStopClusterVectorEnv.action_masks`)."""
        return self.venv.action_masks()

    def close(self) -> None:
        self.venv.close()

    def _call(self, name: str, i: int) -> Any:
        if name == "action_masks":
            if self.venv.full is not None:
                return self.venv.full.flat_mask(i)
            return np.ones(2, dtype=bool)
        return getattr(self.core, name)(i)

    def get_attr(self, attr_name: str, indices: VecEnvIndices = None) -> list[Any]:
        """Per env: the `PER_ENV` calls bound to env i, the single spaces, else the vector env's
        attribute shared by all (config, render_mode, ...)."""
        targets = list(self._get_indices(indices))
        if attr_name in self.PER_ENV:
            return [partial(self._call, attr_name, i) for i in targets]
        if attr_name in ("observation_space", "action_space"):
            return [getattr(self, attr_name)] * len(targets)
        return [getattr(self.venv, attr_name)] * len(targets)

    def set_attr(self, attr_name: str, value: Any, indices: VecEnvIndices = None) -> None:
        if sorted(self._get_indices(indices)) != list(range(self.num_envs)):
            raise ValueError(f"indices={indices!r}: the envs of a batch share their attributes; "
                             f"set {attr_name!r} for all of them (indices=None)")
        setattr(self.venv, attr_name, value)

    def env_method(self, method_name: str, *method_args: Any, indices: VecEnvIndices = None,
                   **method_kwargs: Any) -> list[Any]:
        return [call(*method_args, **method_kwargs)
                for call in self.get_attr(method_name, indices)]

    def env_is_wrapped(self, wrapper_class: type[gym.Wrapper],
                       indices: VecEnvIndices = None) -> list[bool]:
        """No env of a batch is wrapped (add `VecMonitor` for episode returns)."""
        return [False for _ in self._get_indices(indices)]
