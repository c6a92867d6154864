"""control="full": action masks, safety under sampled actions, and a short PPO run."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym.env import ROW_FIELDS, TableEvalStopAgent

SMALL = {"workload.n_jobs": 30}
MAX_JOBS = 16


def make(control: str = "full") -> gym.Env:
    return gym.make("EvalStopCluster-v0", config="e2", control=control, max_jobs=MAX_JOBS,
                    **SMALL)


def _components(mask: np.ndarray) -> list[np.ndarray]:
    stops = mask[:2 * MAX_JOBS].reshape(MAX_JOBS, 2)
    return [*stops, mask[2 * MAX_JOBS:]]


def _masked_sample(env: gym.Env, mask: np.ndarray) -> np.ndarray:
    parts = _components(mask)
    rng = env.unwrapped.np_random
    return np.array([rng.choice(np.flatnonzero(p)) for p in parts], dtype=np.int64)


# Masked random play can stop every non-LoRA job before its first eval; the run's
# quality_regret is then a mean of nothing (a metrics-side NaN warning, not an env fault).
@pytest.mark.filterwarnings("ignore:Mean of empty slice:RuntimeWarning")
def test_masks_always_leave_a_valid_action_and_match_the_table():
    """Every component keeps an option; stop is offered exactly for running rows."""
    env = make()
    obs, info = env.reset(seed=4)
    running = ROW_FIELDS.index("running")
    done = False
    while not done:
        mask = env.unwrapped.action_masks()
        assert np.array_equal(np.concatenate(info["action_mask"]), mask)
        assert all(part.any() for part in _components(mask))
        table = obs["jobs"].reshape(MAX_JOBS, len(ROW_FIELDS))
        stop_ok = mask[:2 * MAX_JOBS].reshape(MAX_JOBS, 2)[:, 1]
        assert np.array_equal(stop_ok, (table[:, running] == 1) & (obs["job_mask"] == 1))
        obs, _, done, _, info = env.step(_masked_sample(env, mask))


def test_padding_rows_are_zero_and_masked():
    env = make()
    obs, _ = env.reset(seed=2)
    table = obs["jobs"].reshape(MAX_JOBS, len(ROW_FIELDS))
    assert not table[obs["job_mask"] == 0].any()


def test_sampled_actions_never_crash_or_over_allocate():
    """A whole episode of unmasked `action_space.sample()`: the run ends with every job ended."""
    env = make()
    env.action_space.seed(0)
    obs, _ = env.reset(seed=1)
    done, steps = False, 0
    while not done:
        obs, reward, done, _, info = env.step(env.action_space.sample())
        assert np.isfinite(reward)
        cluster = env.unwrapped._cluster
        assert 0 <= cluster.free_gpus <= cluster.total_gpus
        steps += 1
    assert info["metrics"]["n_stopped"] > 0 and steps > 5


def test_table_eval_stop_agent_stops_jobs():
    env = make()
    agent = TableEvalStopAgent(MAX_JOBS)
    obs, _ = env.reset(seed=42)
    done = False
    while not done:
        obs, _, done, _, info = env.step(agent.act(obs))
    assert info["metrics"]["n_stopped"] > 0


def test_ppo_smoke_on_both_modes():
    """PPO trains for a few hundred steps on each mode and its model predicts valid actions."""
    import torch
    from stable_baselines3 import PPO

    torch.set_num_threads(1)
    for control in ("stop", "full"):
        env = make(control)
        model = PPO("MultiInputPolicy", env, n_steps=64, batch_size=64, n_epochs=1, seed=0,
                    device="cpu")
        model.learn(total_timesteps=128)
        obs, _ = env.reset(seed=0)
        action, _ = model.predict(obs, deterministic=True)
        assert env.action_space.contains(np.asarray(action, dtype=np.int64))


def test_table_eval_stop_agent_uses_eval_stop_thresholds():
    from evalstop_gym.policies import make_detector

    for k in (1, 2, 4):
        assert TableEvalStopAgent(MAX_JOBS, k_rlhf=k).k == make_detector(f"EvalStop-{k}").k


def test_maskable_ppo_trains_and_acts_within_the_masks():
    """sb3-contrib's MaskablePPO reads `action_masks()` in its flat convention: after a short
    training run, every deterministic action of an episode picks only options the mask allows."""
    pytest.importorskip("sb3_contrib")
    from sb3_contrib import MaskablePPO
    from sb3_contrib.common.maskable.utils import get_action_masks

    env = make()
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, batch_size=32, seed=0,
                        device="cpu")
    model.learn(128)
    obs, _ = env.reset(seed=6)
    done, steps = False, 0
    while not done:
        mask = get_action_masks(env)
        action, _ = model.predict(obs, action_masks=mask, deterministic=True)
        assert all(part[a] for part, a in zip(_components(mask), action, strict=True))
        obs, _, done, _, info = env.step(action)
        steps += 1
    assert steps > 1 and info["metrics"]["jct"] > 0
