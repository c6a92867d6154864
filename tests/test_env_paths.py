"""The env path reproduces the direct simulator path, and observations carry no hidden truth."""

from __future__ import annotations

import dataclasses
import importlib
import math

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401
from evalstop_gym.env import HeuristicAgent, StopObservation, TableObservation
from evalstop_gym.policies import make_policy
from evalstop_gym.sim.jobs import JobState, Observation
from evalstop_gym.sim.view import ClusterView, make_view
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate

SMALL = {"workload.n_jobs": 40}
simulate_module = importlib.import_module("evalstop_gym.simulate")  # the module, not the function
SKIP = {"stop_reason"}  # the env records "stopped by agent", the detector its own reason


def _same(a: dict, b: dict) -> bool:
    return all(a[k] == b[k] or (isinstance(a[k], float) and math.isnan(a[k]) and math.isnan(b[k]))
               for k in a if k not in SKIP)


def run_env(agent, seed: int, control: str = "stop", with_info: bool = False, **overrides):
    env = gym.make("EvalStopCluster-v0", config="e2", control=control,
                   milestones=getattr(agent, "milestones", ()), **{**SMALL, **overrides})
    obs, info = env.reset(seed=seed)
    done = False
    while not done:
        action = agent.act(obs, info) if with_info else agent.predict(obs)[0]
        obs, _, done, _, info = env.step(action)
    return env.unwrapped, info


@pytest.mark.parametrize("detector", ["EvalStop-2", "StopAt-0.65", "NoStop"])
@pytest.mark.parametrize("seed", [42, 123])
def test_env_path_equals_direct_path(detector, seed):
    """Same seed: same per-job outcomes and the same metrics through the env as via simulate."""
    env, info = run_env(HeuristicAgent.from_name(detector), seed, with_info=True)
    direct = simulate(env.config, make_policy("SRTF-Est", detector), seed)
    via_env = env.episode_result()
    assert len(direct.records) == len(via_env.records)
    for a, b in zip(direct.records, via_env.records, strict=True):
        assert _same(a, b), (a, b)
    assert _same(direct.metrics, info["metrics"])
    if detector != "NoStop":
        assert direct.metrics["n_stopped"] > 0


@pytest.mark.parametrize("detector", ["MedianPruner", "CUSUM", "BOCPD"])
def test_detectors_that_learn_from_ended_jobs_act_the_same_through_the_env(detector):
    """Fed info['ended_jobs'], a detector that learns across jobs (on_job_end) makes the same
    decisions through the env as in simulate, where the cluster calls on_job_end itself."""
    agent = HeuristicAgent.from_name(detector)
    agent.reset()
    env, info = run_env(agent, 7, with_info=True, **{"workload.n_jobs": 120})
    direct = simulate(env.config, make_policy("SRTF-Est", detector), 7)
    for a, b in zip(direct.records, env.episode_result().records, strict=True):
        assert _same(a, b), (a, b)
    assert _same(direct.metrics, info["metrics"])
    assert direct.metrics["n_stopped"] > 0


@pytest.mark.parametrize("base", ["SRTF-Est", "EvalSched"])
def test_full_mode_with_no_stops_and_no_picks_is_the_base_scheduler(base):
    """EvalSched too: its time slicing is the platform's, whoever allocates."""
    class Zero:
        def predict(self, obs):
            return np.zeros(65, dtype=np.int64), None

    env, info = run_env(Zero(), 42, control="full", base_scheduler=base)
    direct = simulate(env.config, make_policy(base), 42)
    assert _same(direct.metrics, info["metrics"])


def test_the_stop_mode_waste_term_charges_what_the_cluster_charges_under_time_slicing():
    """The reward's wasted GPU-minutes follow a time-sliced job's slower pace (EvalSched), as
    the cluster's own accounting does."""
    by_base = {}
    for base in ("SRTF-Est", "EvalSched"):
        env = gym.make("EvalStopCluster-v0", config="e2", base_scheduler=base,
                       monitored=("lora", "dpo", "rlhf"), **SMALL)
        env.reset(seed=1)
        done = False
        while not done:
            _, _, done, _, info = env.step(0)
        wasted = info["reward_terms"]["wasted_gpu_minutes"] * env.unwrapped.config.reward.\
            time_scale_min   # the term is in units of T minutes
        charged = sum(j.gpu_minutes_after_peak for j in env.unwrapped._jobs)
        by_base[base] = (wasted, charged)
    for wasted, charged in by_base.values():
        assert wasted == pytest.approx(charged, rel=0.05)
    assert by_base["EvalSched"][1] > 2 * by_base["SRTF-Est"][1]


def test_learned_detector_acts_the_same_through_env_and_simulate(tmp_path):
    """An (untrained) SB3 model: `model:` detector via simulate == model.predict via the env."""
    from stable_baselines3 import PPO

    from evalstop_gym.policies import parse_policy

    env = gym.make("EvalStopCluster-v0", config="e2", **SMALL)
    model = PPO("MultiInputPolicy", env, n_steps=64, seed=0, device="cpu")
    model.save(tmp_path / "m.zip")
    policy = parse_policy(f"model:{tmp_path / 'm.zip'}+SRTF-Est")
    direct = simulate(env.unwrapped.config, policy, 42)
    _, info = run_env(policy.detector, 42)
    assert _same(direct.metrics, info["metrics"])


def test_a_maskable_ppo_stop_model_scores_as_a_detector_cell(tmp_path):
    """sb3-contrib's MaskablePPO in control="stop": loaded as a `model:` cell, it acts as it does
    through the env (where every stop-mode mask allows both actions)."""
    from sb3_contrib import MaskablePPO

    from evalstop_gym.policies import parse_policy

    env = gym.make("EvalStopCluster-v0", config="e2", **SMALL)
    model = MaskablePPO("MultiInputPolicy", env, n_steps=64, seed=0, device="cpu")
    model.save(tmp_path / "m.zip")
    policy = parse_policy(f"model:{tmp_path / 'm.zip'}+SRTF-Est")
    assert type(policy.detector.model).__name__ == "MaskablePPO"
    direct = simulate(env.unwrapped.config, policy, 42)
    _, info = run_env(policy.detector, 42)
    assert _same(direct.metrics, info["metrics"])
    obs, _ = env.reset(seed=3)
    masked, _ = model.predict(obs, deterministic=True, action_masks=env.unwrapped.action_masks())
    assert policy.detector.act(obs) == int(masked)


def test_a_full_control_model_is_refused_as_a_detector_in_one_line(tmp_path):
    from sb3_contrib import MaskablePPO

    from evalstop_gym.policies import PolicyNameError, parse_policy

    env = gym.make("EvalStopCluster-v0", config="e2", control="full", **SMALL)
    MaskablePPO("MultiInputPolicy", env, n_steps=64, seed=0, device="cpu").save(tmp_path / "f")
    with pytest.raises(PolicyNameError, match=r"Discrete\(2\).*control='full'") as err:
        parse_policy(f"model:{tmp_path / 'f.zip'}+SRTF-Est")
    assert "\n" not in str(err.value)


def _twins():
    """A hacking and a healthy job whose observed histories are identical."""
    config = gym.make("EvalStopCluster-v0", config="e2").unwrapped.config
    job = next(j for j in generate_workload(config, 1) if j.job_type == "rlhf")
    other = dataclasses.replace(
        job, is_hacking=not job.is_hacking, peak_progress=0.6 if job.is_hacking else 1.0,
        duration=job.duration * 1.7, eval_true=job.eval_true[::-1].copy(),
        curve_params=tuple(p * 1.1 for p in job.curve_params))
    seen = [(0.15, 0.3), (0.3, 0.4), (0.45, 0.35)]
    for j in (job, other):
        j.progress, j.state = 0.45, JobState.RUNNING
        j.observations = [Observation(p, 10.0 * i, 2.0 - i / 10, s)
                          for i, (p, s) in enumerate(seen)]
    return job, other


def test_hacking_and_healthy_twins_are_observed_identically():
    job, other = _twins()
    assert job.is_hacking != other.is_hacking
    cluster = ClusterView(now=100.0, total_gpus=64, free_gpus=8, n_waiting=3, n_running=9)
    views = [make_view(j, 100.0) for j in (job, other)]
    stop = StopObservation(7)
    a, b = (stop.encode(v, cluster) for v in views)
    assert all(np.array_equal(a[k], b[k]) for k in a)
    table = TableObservation(4)
    a, b = (table.encode([v], cluster) for v in views)
    assert all(np.array_equal(a[k], b[k]) for k in a)


def test_observations_ignore_hidden_labels_over_a_whole_episode(monkeypatch):
    """Flip every hidden label, peak and true curve: the agent's observations do not change."""
    def run(flip: bool) -> list:
        def workload(config, seed):
            jobs = generate_workload(config, seed)
            if flip:
                for j in jobs:
                    j.is_hacking, j.peak_progress = not j.is_hacking, 1.0 - j.peak_progress
                    j.eval_true = -j.eval_true
            return jobs

        monkeypatch.setattr(simulate_module, "generate_workload", workload)
        env = gym.make("EvalStopCluster-v0", config="e2", **SMALL)
        obs, _ = env.reset(seed=9)
        trace, done = [obs], False
        while not done:
            obs, _, done, _, _ = env.step(0)
            trace.append(obs)
        return trace

    plain, flipped = run(False), run(True)
    assert len(plain) == len(flipped)
    for a, b in zip(plain, flipped, strict=True):
        assert all(np.array_equal(a[k], b[k]) for k in a)
