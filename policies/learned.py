"""A learned stop rule: a saved stable-baselines3 model acting as a detector.

The model sees exactly what it saw in training, the control="stop" observation of
`EvalStopCluster-v0`, encoded here from the same `SchedulerJobView` and `ClusterView`, so a model
acts identically through the env and through `simulate`. Needs the `rl` extra (imported lazily).

A model trained on normalised observations (`MaskedVecNormalize`) only makes sense with the same
normaliser: `save_detector_model` saves it where rl-baselines3-zoo does,
`DIR/NAME/vecnormalize.pkl` beside `DIR/NAME.zip`, and marks the model as trained on normalised
observations, so loading it without its normaliser is refused rather than scored as a different
policy.
"""

from __future__ import annotations

import pickle
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.env.observation import StopObservation
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, stop

NORMALISER = "vecnormalize.pkl"   # rl-baselines3-zoo's name, in a folder named after the model
NORMALISED = "evalstop_normalised_obs"   # saved in the model's data: True when trained on them


def normaliser_path(model_path: str | Path) -> Path:
    """Where a model's normaliser lives: `DIR/NAME/vecnormalize.pkl` for `DIR/NAME.zip`."""
    path = Path(model_path)
    return path.parent / path.stem / NORMALISER


def model_files(model_path: str | Path) -> list[Path]:
    """The files a `model:` detector is built from (the model, and its normaliser if saved)."""
    return [p for p in (Path(model_path), normaliser_path(model_path)) if p.is_file()]


def save_detector_model(model: Any, path: str | Path, normaliser: Any = None) -> Path:
    """`model.save(path)`, and its observation normaliser (`normaliser`, else the model's own
    VecNormalize env, if it normalises observations) saved where `LearnedDetector.load` finds
    it; the model is marked so that loading it without that file is refused. Returns the zip."""
    if normaliser is None:
        normaliser = model.get_vec_normalize_env()
    normalised = bool(normaliser is not None and getattr(normaliser, "norm_obs", False))
    setattr(model, NORMALISED, normalised)
    path = Path(path).with_suffix(".zip")
    model.save(path)
    if normalised:
        normaliser_path(path).parent.mkdir(parents=True, exist_ok=True)
        normaliser.save(normaliser_path(path))
    return path


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
                                "evalstop-bench train")
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
    """The saved model does not answer continue-or-stop (it was trained with control="full"),
    or cannot be scored as it was trained (its observation normaliser is missing)."""


def load_normaliser(model_path: str | Path, model: Any) -> Any:
    """The VecNormalize saved beside `model_path` (training off: its statistics stay fixed), or
    None when there is none and the model was not trained on normalised observations."""
    path = normaliser_path(model_path)
    if not path.is_file():
        if getattr(model, NORMALISED, False):
            raise NotADetectorModel(f"model file {model_path} was trained on normalised "
                                    f"observations but its normaliser {path} is missing; save "
                                    "both with policies.learned.save_detector_model")
        return None
    from stable_baselines3.common.vec_env import VecNormalize

    try:
        with open(path, "rb") as fh:
            normaliser = pickle.load(fh)
    except (pickle.UnpicklingError, EOFError, AttributeError, ImportError) as exc:
        raise NotADetectorModel(f"normaliser {path} cannot be read ({type(exc).__name__}); "
                                "expected a VecNormalize saved with .save()") from None
    if not isinstance(normaliser, VecNormalize):
        raise NotADetectorModel(f"normaliser {path} holds a {type(normaliser).__name__}; "
                                "expected a VecNormalize saved with .save()")
    normaliser.training = False
    return normaliser


class LearnedDetector(DetectorBase):
    """Stops a monitored job when the model's deterministic action is 1 (stop)."""

    needs = ("evals", "loss", "progress")   # what the stop observation encodes

    def __init__(self, model: Any, name: str = "learned", normaliser: Any = None) -> None:
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
        self.normaliser = normaliser   # a VecNormalize whose obs statistics the model expects

    @classmethod
    def load(cls, path: str | Path) -> LearnedDetector:
        """The model at `path`, with the normaliser saved beside it (see the module's doc)."""
        model = load_sb3_model(path)
        return cls(model, name=f"model:{path}", normaliser=load_normaliser(path, model))

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if self.act(self.encoder.encode(job, cluster)) == 1:
            return stop("learned policy")
        return CONTINUE

    def act(self, obs: dict[str, np.ndarray]) -> int:
        # a MaskablePPO model without masks acts as with the env's stop-mode mask (both allowed)
        if self.normaliser is not None:   # masks pass unchanged (MaskedVecNormalize's keys)
            obs = self.normaliser.normalize_obs(obs)
        action, _ = self.model.predict(obs, deterministic=True)
        return int(np.asarray(action).reshape(-1)[0])

    def predict(self, observation: Any, state: Any = None, episode_start: Any = None,
                deterministic: bool = True) -> tuple[Any, Any]:
        """SB3's shape, so `evaluate_policy` scores this detector like any model."""
        if self.normaliser is not None:
            observation = self.normaliser.normalize_obs(observation)
        return self.model.predict(observation, state, episode_start, deterministic)
