"""Heterogeneous GPUs: jobs gang on one kind, speed scales time, no kind is ever over-allocated."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

import evalstop_gym  # noqa: F401  (registers the env)
from evalstop_gym.config import ConfigError, load_sim_config
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim.cluster import CheckRequest, Cluster
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.protocols import Allocation
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate

TWO_KINDS = [{"name": "fast", "count": 16, "speed": 1.5},
             {"name": "slow", "count": 16, "speed": 0.75}]
POLICIES = ["FIFO", "SJF-Est", "SRTF-Est", "LossAware", "EvalSched", "EvalStop-2+SRTF-Est",
            "StopAt-0.65+FIFO"]


@pytest.fixture(scope="module")
def het_config():
    return load_sim_config(overrides={"workload.n_jobs": 60, "cluster.gpus": 32,
                                      "cluster.kinds": TWO_KINDS})


@pytest.mark.parametrize("spec", POLICIES)
def test_every_base_scheduler_respects_every_kind(het_config, spec):
    policy = parse_policy(spec)
    jobs = generate_workload(het_config, 3)
    cluster = Cluster(het_config, jobs, milestones=policy.milestones)
    totals, ended = (16, 16), []
    while (req := cluster.next_decision()) is not None:
        if isinstance(req, CheckRequest):
            cluster.answer_check(policy.on_check(req.job, req.cluster))
        else:
            held = [sum(v.gpus for v in req.running if v.gpu_kind == k) for k in (0, 1)]
            assert all(v.gpu_kind in (0, 1) for v in req.running)
            free = req.cluster.free_by_kind
            assert [h + f for h, f in zip(held, free, strict=True)] == list(totals)
            cluster.answer_schedule(policy.schedule(req.cluster, req.waiting, req.running))
            assert all(0 <= f <= t for f, t in zip(cluster.pool.free, totals, strict=True))
        ended += [v.job_id for v in cluster.pop_finished()]
    assert sorted(ended) == [j.job_id for j in jobs]
    assert cluster.pool.free == list(totals)
    assert {j.speed for j in jobs if j.has_run} <= {1.5, 0.75}


def hand_job(job_id, gpus, duration):
    points = np.array([0.5, 1.0])
    scores = np.array([0.4, 0.5])
    return Job(job_id=job_id, tenant=0, job_type="rlhf", gpus=gpus, arrival=0.0,
               duration_estimate=210.0, duration=duration, is_hacking=False, peak_progress=1.0,
               eval_points=points, eval_true=scores, eval_observed=scores, eval_minutes=2.0,
               loss_params=(2.0, 0.3, 0.6, 0.05), curve_params=())


def test_speed_scales_training_and_eval_time(het_config):
    cfg = het_config.with_overrides({"cluster.gpus": 8, "cluster.kinds": [
        {"name": "fast", "count": 4, "speed": 2.0}, {"name": "slow", "count": 4, "speed": 0.5}]})
    first, second = hand_job(0, 4, 100.0), hand_job(1, 4, 100.0)
    Cluster(cfg, [first, second]).run(parse_policy("FIFO"))
    assert first.end_time == pytest.approx((100.0 + 2 * 2.0) / 2.0)   # the fast kind
    assert second.end_time == pytest.approx((100.0 + 2 * 2.0) / 0.5)  # the slow kind
    assert second.gpu_minutes == pytest.approx(4 * 208.0)


def test_one_kind_of_speed_one_is_the_homogeneous_cluster(e2_config):
    same = e2_config.with_overrides({"cluster.kinds": [{"name": "gpu", "count": 64,
                                                         "speed": 1.0}]})
    for spec in ("SRTF-Est", "EvalStop-2+SRTF-Est", "FIFO"):
        a = simulate(e2_config, parse_policy(spec), 42)
        b = simulate(same, parse_policy(spec), 42)
        assert a.metrics == b.metrics


def test_a_job_must_fit_in_one_kind(het_config):
    cfg = het_config.with_overrides({"cluster.gpus": 12, "cluster.kinds": [
        {"name": "a", "count": 6, "speed": 1.0}, {"name": "b", "count": 6, "speed": 1.0}]})
    with pytest.raises(Exception, match="6 of one kind"):
        Cluster(cfg, generate_workload(cfg, 0))


def test_kinds_must_add_up_to_the_cluster():
    with pytest.raises(ConfigError, match=r"cluster.gpus: 64 must equal the total"):
        load_sim_config(overrides={"cluster.kinds": TWO_KINDS})


def test_the_env_runs_on_a_heterogeneous_cluster(het_config):
    env = gym.make("EvalStopCluster-v0", config=het_config, control="stop")
    obs, info = env.reset(seed=1)
    done = False
    while not done:
        obs, reward, done, truncated, info = env.step(0)
    assert info["metrics"]["n_stopped"] == 0
    with pytest.raises(ValueError, match="homogeneous clusters only"):
        gym.make("EvalStopCluster-v0", config=het_config, control="full")


def test_cluster_view_follows_a_move_between_kinds_at_one_instant(het_config):
    """Same total free GPUs, same queue lengths, but GPUs moved kind: the view must say so."""
    cfg = het_config.with_overrides({"cluster.gpus": 8, "cluster.kinds": [
        {"name": "a", "count": 4, "speed": 1.0}, {"name": "b", "count": 4, "speed": 1.0}]})
    cluster = Cluster(cfg, [hand_job(0, 4, 100.0), hand_job(1, 4, 100.0)])
    cluster.next_decision()
    cluster.answer_schedule(Allocation(start=(0,), kinds=(0,)))
    assert cluster.cluster_view().free_by_kind == (0, 4)
    cluster._apply(Allocation(start=(1,), preempt=(0,), kinds=(1,)))  # same instant
    assert cluster.cluster_view().free_by_kind == (4, 0)
