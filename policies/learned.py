"""A learned stop rule: a saved stable-baselines3 model acting as a detector.

The model sees exactly what it saw in training, the control="stop" observation of
`EvalStopCluster-v0`, encoded here from the same `SchedulerJobView` and `ClusterView`, so a model
acts identically through the env and through `simulate`. Needs the `rl` extra (imported lazily).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.env.observation import StopObservation
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, stop

NORMALISER = "vecnormalize.pkl"   # rl-baselines3-zoo's name, in a folder named after the model


def normaliser_path(model_path: str | Path) -> Path:
    """Where a model's normaliser lives: `DIR/NAME/vecnormalize.pkl` for `DIR/NAME.zip`."""
    path = Path(model_path)
    return path.parent / path.stem / NORMALISER


def model_files(model_path: str | Path) -> list[Path]:
    """The files a `model:` detector is built from (the model, and its normaliser if saved)."""
    return [p for p in (Path(model_path), normaliser_path(model_path)) if p.is_file()]


def load_sb3_model(path: str | Path) -> Any:
    """Load a saved SB3 model, choosing PPO, DQN, A2C or sb3-contrib's MaskablePPO from the
    policy class stored with it."""
    try:
        from stable_baselines3 import A2C, DQN, PPO
        from stable_baselines3.common.save_util import load_from_zip_file
    except ImportError as exc:  # pragma: no cover - depends on the install
        raise ImportError("loading a model: policy needs the rl extra: "
                          "pip install 'evalstop-gym[rl]'") from exc
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"model file {path} does not exist; train one with "
                                "python -m evalstop_gym.benchmarks.train_stop_policy")
    if path.is_dir():
        raise NotADetectorModel(f"model file {path} is a folder; expected the .zip a "
                                "training run saved in it")
    try:
        data, _, _ = load_from_zip_file(path, device="cpu", load_data=True)
    except (ValueError, AssertionError, KeyError, EOFError) as exc:   # SB3's words for "not mine"
        raise NotADetectorModel(f"model file {path} is not a saved stable-baselines3 model "
                                f"({' '.join(str(exc).split()) or type(exc).__name__}); save "
                                "one with evalstop-bench train") from None
    module = getattr((data or {}).get("policy_class"), "__module__", "")
    if not module:
        raise NotADetectorModel(f"model file {path} holds no stable-baselines3 policy; save "
                                "one with evalstop-bench train")
    if module.startswith("sb3_contrib.") and ".maskable." in module:
        from sb3_contrib import MaskablePPO  # in the rl extra

        return MaskablePPO.load(path, device="cpu")
    algo = DQN if ".dqn." in module else A2C if ".a2c." in module else PPO
    return algo.load(path, device="cpu")


class NotADetectorModel(ValueError):
    """The saved model does not answer continue-or-stop (it was trained with control="full")."""


class LearnedDetector(DetectorBase):
    """Stops a monitored job when the model's deterministic action is 1 (stop)."""

    needs = ("evals", "loss", "progress")   # what the stop observation encodes

    def __init__(self, model: Any, name: str = "learned") -> None:
        n = getattr(model.action_space, "n", None)
        if n != 2:
            space = model.action_space
            raise NotADetectorModel(
                "a detector model answers continue or stop (Discrete(2), control='stop'); this "
                f"one acts in a {type(space).__name__} of shape {getattr(space, 'shape', '?')}, "
                "which also schedules (control='full'): run it through the env")
        self.model = model
        self.encoder = StopObservation.for_space(model.observation_space)
        self.name = name

    @classmethod
    def load(cls, path: str | Path) -> LearnedDetector:
        return cls(load_sb3_model(path), name=f"model:{path}")

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if self.act(self.encoder.encode(job, cluster)) == 1:
            return stop("learned policy")
        return CONTINUE

    def act(self, obs: dict[str, np.ndarray]) -> int:
        # a MaskablePPO model without masks acts as with the env's stop-mode mask (both allowed)
        action, _ = self.model.predict(obs, deterministic=True)
        return int(np.asarray(action).reshape(-1)[0])

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[Any, Any]:
        """SB3's shape, so `evaluate_policy` scores this detector like any model."""
        return self.model.predict(observation, state, episode_start, deterministic)
