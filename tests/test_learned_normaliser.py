"""A model trained on normalised observations scores through `model:` with the normaliser saved
beside it, deciding as it does through the env wrapped in that normaliser; without the file, a
model marked as trained on normalised observations is refused in one line."""

from __future__ import annotations

import math

import gymnasium as gym
import pytest

pytest.importorskip("stable_baselines3")

from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.vec_env import DummyVecEnv, VecNormalize  # noqa: E402

from evalstop_gym.benchmarks.cli import main  # noqa: E402
from evalstop_gym.env.sb3 import MaskedVecNormalize  # noqa: E402
from evalstop_gym.policies import PolicyNameError, parse_policy  # noqa: E402
from evalstop_gym.policies.learned import (  # noqa: E402
    NORMALISED,
    load_sb3_model,
    normaliser_path,
    save_detector_model,
)
from evalstop_gym.simulate import simulate  # noqa: E402

SMALL = {"workload.n_jobs": 30}
SEEDS = (42, 123)


def make_env():
    return gym.make("EvalStopCluster-v0", config="e2", **SMALL)


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """A PPO stop model trained a few hundred steps on normalised observations, saved with its
    normaliser."""
    where = tmp_path_factory.mktemp("normalised")
    venv = MaskedVecNormalize(DummyVecEnv([make_env]), norm_obs=True, norm_reward=False)
    model = PPO("MultiInputPolicy", venv, n_steps=128, batch_size=64, n_epochs=2, seed=0,
                device="cpu")
    model.learn(384)
    return save_detector_model(model, where / "norm_stop.zip")


def through_env(model, normaliser_file, seed: int) -> dict:
    """The episode's metrics with the model acting through the env wrapped in its normaliser."""
    venv = VecNormalize.load(str(normaliser_file), DummyVecEnv([make_env]))
    venv.training, venv.norm_reward = False, False
    venv.seed(seed)
    obs = venv.reset()
    while True:
        action, _ = model.predict(obs, deterministic=True)
        obs, _, done, info = venv.step(action)
        if done[0]:
            return info[0]["metrics"]


def same(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k])
                                and math.isnan(b[k])) for k in a)


def test_the_normaliser_is_saved_where_the_zoo_keeps_it_and_the_model_is_marked(trained):
    assert trained.name == "norm_stop.zip"
    assert normaliser_path(trained) == trained.parent / "norm_stop" / "vecnormalize.pkl"
    assert normaliser_path(trained).is_file()
    assert getattr(load_sb3_model(trained), NORMALISED) is True


@pytest.mark.parametrize("seed", SEEDS)
def test_model_cell_decides_as_the_env_with_its_normaliser(trained, seed):
    policy = parse_policy(f"model:{trained}+SRTF-Est")
    assert policy.detector.normaliser is not None
    env = make_env()
    direct = simulate(env.unwrapped.config, policy, seed)
    via_env = through_env(policy.detector.model, normaliser_path(trained), seed)
    assert same(direct.metrics, via_env)


def test_the_normaliser_changes_what_the_model_decides(trained):
    """Else the test above could not tell a loaded normaliser from none: on some seed, the raw
    observations make the same model decide otherwise."""
    policy = parse_policy(f"model:{trained}+SRTF-Est")
    env = make_env()
    with_stats = [simulate(env.unwrapped.config, policy, s).metrics for s in SEEDS]
    policy.detector.normaliser = None
    raw = [simulate(env.unwrapped.config, policy, s).metrics for s in SEEDS]
    assert any(not same(a, b) for a, b in zip(with_stats, raw, strict=True))


def test_a_normalised_model_without_its_normaliser_is_refused(trained, tmp_path, capsys):
    lone = tmp_path / "lone.zip"
    lone.write_bytes(trained.read_bytes())   # the model, not its normaliser
    with pytest.raises(PolicyNameError, match="trained on normalised observations but its "
                                              "normaliser .*vecnormalize.pkl is missing"):
        parse_policy(f"model:{lone}+SRTF-Est")
    out = tmp_path / "out"
    assert main(["run", "e2", "--seeds", "0", "--out", str(out),
                 "--policy", f"model:{lone}+SRTF-Est"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and "normaliser" in err and not out.exists()


def test_a_model_trained_on_raw_observations_needs_no_normaliser(tmp_path):
    model = PPO("MultiInputPolicy", make_env(), n_steps=64, seed=0, device="cpu")
    path = save_detector_model(model, tmp_path / "raw.zip")
    assert not normaliser_path(path).exists()
    assert getattr(load_sb3_model(path), NORMALISED) is False
    assert parse_policy(f"model:{path}+SRTF-Est").detector.normaliser is None
