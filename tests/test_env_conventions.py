"""Gymnasium's and SB3's conventions: masks in Gymnasium's format, render modes, float32 spaces
with true bounds, VecNormalize over the masked Dict, and the paper metrics in SB3's logger."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym.env import CLUSTER_FIELDS, JOB_FIELDS, ROW_FIELDS

SMALL = {"workload.n_jobs": 30}
MAX_JOBS = 12


def make(control: str = "stop", **kwargs) -> gym.Env:
    extra = {"max_jobs": MAX_JOBS} if control == "full" else {}
    return gym.make("EvalStopCluster-v0", config="e2", control=control, **SMALL, **extra,
                    **kwargs)


@pytest.mark.parametrize("control", ["stop", "full"])
def test_space_sample_takes_the_info_mask_and_keeps_to_it(control):
    """`action_space.sample(mask=info["action_mask"])` works at every step of an episode and only
    picks options the flat mask (MaskablePPO's) allows."""
    env = make(control)
    env.action_space.seed(1)
    _, info = env.reset(seed=3)
    done, steps = False, 0
    while not done:
        mask = info["action_mask"]
        action = env.action_space.sample(mask=mask)
        flat = env.unwrapped.action_masks()
        if control == "stop":
            assert mask.dtype == np.int8 and mask.shape == (2,)
        else:
            assert isinstance(mask, tuple) and len(mask) == MAX_JOBS + 1
            assert all(m.dtype == np.int8 for m in mask)
            assert np.array_equal(np.concatenate(mask).astype(bool), flat)
            offsets = np.concatenate([[0], np.cumsum(env.action_space.nvec)[:-1]])
            assert flat[offsets + action].all()
        _, _, done, _, info = env.step(action)
        steps += 1
    assert steps > 5


@pytest.mark.parametrize("control", ["stop", "full"])
def test_every_observation_of_an_episode_lies_in_its_float32_space(control):
    env = make(control)
    space = env.observation_space
    boxes = [s for s in space.spaces.values() if isinstance(s, gym.spaces.Box)]
    assert boxes and all(s.dtype == np.float32 for s in boxes)
    env.action_space.seed(0)
    obs, _ = env.reset(seed=5)
    done, seen = False, 0
    while not done:
        assert space.contains(obs), {k: v for k, v in obs.items() if not space[k].contains(v)}
        obs, _, done, _, _ = env.step(env.action_space.sample())
        seen += 1
    assert space.contains(obs) and seen > 5


def test_bounds_are_the_true_ones():
    """One-hots and fractions in [0, 1]; counts and sizes bounded by the config."""
    env = make("stop")
    job, cluster = env.observation_space["job"], env.observation_space["cluster"]
    col = {f: i for i, f in enumerate(JOB_FIELDS)}
    for f in ("lora", "dpo", "rlhf", "progress", "is_eval"):
        assert (job.low[col[f]], job.high[col[f]]) == (0.0, 1.0), f
    n_evals = env.observation_space["eval_scores"].shape[0]
    assert job.high[col["n_evals"]] == job.high[col["declines"]] == n_evals
    assert job.high[col["gpus"]] == np.float32(64 / 8) and job.high[col["best_gap"]] == 0
    c = {f: i for i, f in enumerate(CLUSTER_FIELDS)}
    assert cluster.high[c["free_frac"]] == 1.0
    assert cluster.high[c["queue"]] == np.float32(30 / 64)
    assert env.observation_space["eval_progress"].high.max() == 1.0
    table = make("full").observation_space["jobs"]
    assert table.shape == (MAX_JOBS * len(ROW_FIELDS),) and table.high[:3].tolist() == [1, 1, 1]


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_render_modes(mode):
    env = make("stop", render_mode=mode)
    assert mode in env.metadata["render_modes"]
    env.reset(seed=42)
    for i in range(30):
        *_, done, _, _ = env.step(i % 2)
        assert not done
    frame = env.render()
    if mode == "ansi":
        assert isinstance(frame, str)
        for part in ("free GPUs", "running:", "queued:", "last decisions:", ": stop"):
            assert part in frame, part
    else:
        assert frame.dtype == np.uint8 and frame.ndim == 3 and frame.shape[0] == 64
        assert frame.shape[1] == 31   # one column per decision point (reset and 30 steps)
        assert (frame != frame[0, 0]).any(), "GPUs held show as coloured columns"


def test_no_render_mode_renders_nothing_and_a_bad_one_is_refused():
    from evalstop_gym.env import EvalStopClusterEnv

    env = make("stop")
    env.reset(seed=0)
    assert env.render() is None
    with pytest.raises(ValueError, match="render_mode='human'"):
        EvalStopClusterEnv(render_mode="human")


@pytest.mark.parametrize("control", ["stop", "full"])
@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_checkers_pass_with_each_render_mode(control, mode):
    from gymnasium.utils.env_checker import check_env
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make(control, render_mode=mode).unwrapped)
        sb3_check_env(make(control, render_mode=mode).unwrapped)


def test_make_vec_env_does_not_warn():
    """SB3's make_vec_env asks for render_mode="rgb_array", which the env now declares."""
    from stable_baselines3.common.env_util import make_vec_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        venv = make_vec_env("EvalStopCluster-v0", n_envs=2, seed=0,
                            env_kwargs={"config": "e2", "overrides": SMALL})
        venv.reset()
        venv.step(np.zeros(2, dtype=np.int64))
    assert venv.get_attr("render_mode") == ["rgb_array", "rgb_array"]


@pytest.mark.parametrize("control", ["stop", "full"])
def test_masked_vec_normalize_normalises_features_and_keeps_masks(control):
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    from evalstop_gym.env.sb3 import MaskedVecNormalize

    kwargs = {"config": "e2", "control": control, "overrides": SMALL,
              **({"max_jobs": MAX_JOBS} if control == "full" else {})}
    venv = make_vec_env("EvalStopCluster-v0", n_envs=2, seed=0, env_kwargs=kwargs)
    with pytest.raises(ValueError):   # why the wrapper exists
        VecNormalize(venv)
    norm = MaskedVecNormalize(venv)
    masks = [k for k in venv.observation_space.spaces if k.endswith("_mask")]
    assert masks and set(norm.norm_obs_keys).isdisjoint(masks)
    obs = norm.reset()
    for _ in range(20):
        obs, _, _, _ = norm.step(np.stack([venv.action_space.sample() for _ in range(2)]))
        raw = norm.get_original_obs()
        for key in masks:
            assert np.array_equal(obs[key], raw[key]) and set(np.unique(obs[key])) <= {0, 1}
        assert all(np.abs(obs[k]).max() <= 10.0 for k in norm.norm_obs_keys)
    assert all(norm.obs_rms[k].count > 20 for k in norm.norm_obs_keys)


def test_ppo_logs_episode_metrics_to_sb3_logger(tmp_path):
    """During a short PPO run the callback puts each finished episode's JCT and wasted share
    into SB3's logger; the CSV the logger writes holds them."""
    import pandas as pd
    import torch
    from stable_baselines3 import PPO
    from stable_baselines3.common.logger import configure

    from evalstop_gym.env.sb3 import EpisodeMetricsCallback

    torch.set_num_threads(1)
    env = gym.make("EvalStopCluster-v0", config="e2", **{"workload.n_jobs": 8})
    model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                device="cpu")
    model.set_logger(configure(str(tmp_path), ["csv"]))
    model.learn(192, callback=EpisodeMetricsCallback())
    log = pd.read_csv(tmp_path / "progress.csv")
    assert {"episode/jct", "episode/wasted_frac", "rollout/ep_rew_mean"} <= set(log.columns)
    jct = log["episode/jct"].dropna()
    assert len(jct) == len(log) and (jct > 0).all()


@pytest.mark.parametrize("mode", ["ansi", "rgb_array"])
def test_rendering_leaves_the_episode_unchanged(mode):
    """Same seed and actions, rendered at every step or not: identical observations and rewards."""
    from gymnasium.utils.env_checker import data_equivalence

    traces = []
    for render_mode in (None, mode):
        env = make("stop", render_mode=render_mode)
        obs, _ = env.reset(seed=8)
        trace, done, i = [obs], False, 0
        while not done:
            obs, reward, done, _, _ = env.step(i % 3 == 0)
            env.render()
            trace.append((obs, reward))
            i += 1
        traces.append(trace)
    assert len(traces[0]) > 10 and data_equivalence(traces[0], traces[1], exact=True)
