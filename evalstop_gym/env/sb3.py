"""stable-baselines3 glue: normalising observations without the masks, the paper's metrics in
SB3's logger, and a progress bar. Needs the `rl` extra; `evalstop_gym.env` does not import it.

    from evalstop_gym.env.sb3 import EpisodeMetricsCallback, MaskedVecNormalize
    venv = MaskedVecNormalize(make_vec_env("EvalStopCluster-v0", n_envs=2))
    PPO("MultiInputPolicy", venv).learn(4_096, callback=EpisodeMetricsCallback())
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from gymnasium import spaces
from stable_baselines3.common.callbacks import BaseCallback
from stable_baselines3.common.vec_env import VecEnv, VecNormalize
from tqdm.auto import tqdm

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
