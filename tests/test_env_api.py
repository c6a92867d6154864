"""EvalStopCluster-v0 against the Gymnasium and SB3 checkers, seeding, vectorisation and info."""

from __future__ import annotations

import warnings

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import check_env, data_equivalence

import evalstop_gym  # noqa: F401
from evalstop_gym.env import EvalStopClusterEnv, HeuristicAgent
from evalstop_gym.sim.view import SchedulerJobView

SMALL = {"workload.n_jobs": 30}


def make(control: str = "stop", **kwargs) -> gym.Env:
    return gym.make("EvalStopCluster-v0", config="e2", control=control, **SMALL, **kwargs)


@pytest.mark.parametrize("control", ["stop", "full"])
def test_checkers_pass_without_warnings(control):
    """Both checkers accept the env; any warning (spaces included) fails the test."""
    from stable_baselines3.common.env_checker import check_env as sb3_check_env

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        check_env(make(control).unwrapped)
        sb3_check_env(make(control).unwrapped)


def _episode(env: gym.Env, seed: int, policy) -> list:
    obs, _ = env.reset(seed=seed)
    trace, done = [obs], False
    while not done:
        obs, reward, done, _, _ = env.step(policy(obs))
        trace.append((obs, reward))
    return trace


@pytest.mark.parametrize("control", ["stop", "full"])
def test_same_seed_same_episode(control):
    """Two envs reset with one seed give equal observations and rewards at every step."""
    envs = [make(control), make(control)]
    for env in envs:
        env.action_space.seed(3)
    traces = [_episode(env, 7, lambda _o, e=env: e.action_space.sample()) for env in envs]
    assert len(traces[0]) == len(traces[1]) > 10
    for a, b in zip(traces[0], traces[1], strict=True):
        assert data_equivalence(a, b, exact=True)


def test_unseeded_reset_is_reproducible_and_avoids_paper_seeds():
    env = make()
    env.reset(seed=1)
    env.reset()
    assert env.unwrapped._seed >= 10_000


def test_info_has_no_hidden_fields_until_the_end():
    """During an episode info carries only time, job id, the mask, the reporting job's view and
    views of ended jobs (the information boundary's plain records); metrics come at the end."""
    env = make()
    agent = HeuristicAgent.from_name("EvalStop-2")
    obs, info = env.reset(seed=5)
    done, ended = False, []
    while not done:
        assert set(info) <= {"time", "job_id", "action_mask", "ended_jobs", "view", "cluster"}
        assert type(info["view"]) is SchedulerJobView and info["view"].job_id == info["job_id"]
        assert all(type(v) is SchedulerJobView and v.state in ("completed", "stopped")
                   for v in info["ended_jobs"])
        ended += [v.job_id for v in info["ended_jobs"]]
        obs, _, done, _, info = env.step(agent.act(obs))
    assert len(ended) == len(set(ended)) > 0, "each ended job is reported once"
    assert {"metrics", "reward_terms"} <= set(info)
    assert info["metrics"]["n_stopped"] >= 0


def test_episode_sum_of_jobs_term_is_total_jct():
    """Decima's property: the jobs-in-system term sums to total JCT / time_scale."""
    env = make()
    _episode(env, 11, lambda _o: 0)
    result = env.unwrapped.episode_result()
    total_jct = sum(r["jct"] for r in result.records)
    terms = env.unwrapped._meter.total
    assert terms.jobs_in_system == pytest.approx(total_jct / 1000.0, rel=1e-9)


def test_overrides_by_keyword_and_dict():
    a = EvalStopClusterEnv(config="e2", **{"noise.sigma": 0.05})
    b = EvalStopClusterEnv(config="e2", overrides={"noise.sigma": 0.05})
    assert a.config == b.config and a.config.noise.sigma == 0.05


def test_unknown_control_is_rejected():
    with pytest.raises(ValueError, match="control"):
        EvalStopClusterEnv(control="both")


@pytest.mark.parametrize("control", ["stop", "full"])
def test_gymnasium_sync_vector_env(control):
    envs = gym.make_vec("EvalStopCluster-v0", num_envs=2, vectorization_mode="sync",
                        config="e2", control=control, **SMALL)
    obs, _ = envs.reset(seed=0)
    for _ in range(20):
        obs, reward, term, trunc, _ = envs.step(envs.action_space.sample())
    assert reward.shape == (2,)
    envs.close()


def test_sb3_make_vec_env():
    from stable_baselines3.common.env_util import make_vec_env

    venv = make_vec_env("EvalStopCluster-v0", n_envs=2, seed=0,
                        env_kwargs={"config": "e2", "overrides": SMALL, "render_mode": None})
    venv.reset()
    for _ in range(20):
        _, reward, _, _ = venv.step(np.zeros(2, dtype=np.int64))
    assert reward.shape == (2,)


@pytest.mark.parametrize("control", ["stop", "full"])
def test_episode_gpu_terms_sum_to_the_records(control):
    """GPU-minutes held (and, in control="full", wasted) sum to the run's per-job totals."""
    env = make(control)
    _episode(env, 13, lambda _o: np.zeros(env.action_space.shape, dtype=np.int64)
             if control == "full" else 0)
    records = env.unwrapped.episode_result().records
    terms = env.unwrapped._meter.total
    assert terms.gpu_minutes == pytest.approx(
        sum(r["gpu_minutes"] for r in records) / 1000.0, rel=1e-9)
    if control == "full":
        assert terms.wasted_gpu_minutes == pytest.approx(
            sum(r["gpu_minutes_after_peak"] for r in records) / 1000.0, rel=1e-9)


def test_a_detector_that_learns_from_ended_jobs_needs_the_info():
    """Without info['ended_jobs'] such a detector would silently never warm up: act says so."""
    env = gym.make("EvalStopCluster-v0", config="e2", **{"workload.n_jobs": 10})
    obs, info = env.reset(seed=0)
    agent = HeuristicAgent.from_name("MedianPruner")
    with pytest.raises(ValueError, match="info"):
        agent.act(obs)
    assert agent.act(obs, info) in (0, 1)
    assert info["ended_jobs"] == ()


def test_learning_from_ended_jobs_is_read_from_needs():
    """CUSUM with a fixed sigma has an on_job_end but learns nothing: obs alone will do."""
    env = gym.make("EvalStopCluster-v0", config="e2", **{"workload.n_jobs": 10})
    obs, _ = env.reset(seed=0)
    fixed = HeuristicAgent.from_name("CUSUM-0-3-0.05")
    assert fixed.detector.needs == ("evals",) and not fixed.learns_from_ends
    assert fixed.act(obs) in (0, 1)
    assert HeuristicAgent.from_name("CUSUM-0-3").learns_from_ends
    assert not HeuristicAgent.from_name("NoStop").learns_from_ends
