"""Simulator invariants: GPUs never over-allocated, jobs end once, time never goes back."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.policies import parse_policy
from evalstop_gym.sim.cluster import CheckRequest, Cluster
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.kernel import EventQueue, SimulationError
from evalstop_gym.sim.protocols import Allocation
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate

POLICIES = ["SRTF-Est", "FIFO", "SJF-Est", "LossAware", "EvalSched", "EvalStop-2+SRTF-Est",
            "StopAt-0.65+SRTF-Est", "LossPlateau+FIFO", "EvalStop-1+LossAware"]


def drive(config, spec, seed):
    """Run a policy through the pull API, checking invariants at every decision."""
    policy = parse_policy(spec)
    jobs = generate_workload(config, seed)
    cluster = Cluster(config, jobs, milestones=policy.milestones)
    last_time, ended = 0.0, []
    while (req := cluster.next_decision()) is not None:
        assert cluster.now >= last_time, "time went backwards"
        last_time = cluster.now
        if isinstance(req, CheckRequest):
            assert req.job.state == "running"
            cluster.answer_check(policy.on_check(req.job, req.cluster))
        else:
            held = sum(v.gpus for v in req.running)
            assert held + req.cluster.free_gpus == config.cluster.gpus
            assert 0 <= req.cluster.free_gpus <= config.cluster.gpus
            cluster.answer_schedule(policy.schedule(req.cluster, req.waiting, req.running))
            assert 0 <= cluster.free_gpus <= config.cluster.gpus
        ended += [v.job_id for v in cluster.pop_finished()]
    return cluster, jobs, ended


@pytest.mark.parametrize("spec", POLICIES)
def test_invariants_hold_for_every_policy(small_config, spec):
    cluster, jobs, ended = drive(small_config, spec, seed=7)
    assert sorted(ended) == [j.job_id for j in jobs], "each job must end exactly once"
    assert all(j.state.finished for j in jobs)
    assert cluster.free_gpus == small_config.cluster.gpus
    used = sum(j.gpu_minutes for j in jobs)
    assert cluster.busy_gpu_minutes == pytest.approx(used, rel=1e-9), "GPU-minutes must add up"
    for job in jobs:
        assert 0.0 <= job.progress <= 1.0
        assert job.end_time >= job.arrival
        assert job.gpu_minutes_after_peak <= job.gpu_minutes + 1e-6
        if job.state.value == "completed":
            assert job.progress == pytest.approx(1.0)
            # never less GPU time than the training itself needs
            assert job.gpu_minutes >= job.gpus * job.duration - 1e-6


def test_a_completed_job_costs_training_plus_evals_plus_restarts(small_config):
    _, jobs, _ = drive(small_config, "SRTF-Est", seed=3)
    overhead = small_config.cluster.preemption_overhead_min
    for job in jobs:
        if job.n_preemptions == 0:
            expected = job.gpus * (job.duration + len(job.eval_points) * job.eval_minutes)
            assert job.gpu_minutes == pytest.approx(expected, rel=1e-9)
        else:  # preemption adds restarts and possibly an interrupted eval, never less
            lower = job.gpus * (job.duration + len(job.eval_points) * job.eval_minutes)
            assert job.gpu_minutes >= lower - 1e-6
            assert job.gpu_minutes <= lower + job.n_preemptions * job.gpus * (
                overhead + job.eval_minutes) + 1e-6


def test_stopped_jobs_release_gpus_and_keep_best_checkpoint(e2_config):
    result = simulate(e2_config, parse_policy("EvalStop-2+SRTF-Est"), seed=42)
    stopped = [r for r in result.records if r["stopped"]]
    assert stopped, "EvalStop-2 should stop some hacking jobs on E2"
    for r in stopped:
        assert r["best_score"] == r["best_score"]  # not NaN
        assert r["best_progress"] <= r["end_progress"]
        assert r["saved_gpu_minutes"] >= 0


def test_over_allocation_is_refused(small_config):
    cfg = small_config.with_overrides({"cluster.gpus": 8})
    jobs = [hand_job(0, "rlhf", 6, 0.0, 50.0, {1.0: 0.5}),
            hand_job(1, "rlhf", 6, 0.0, 50.0, {1.0: 0.5})]
    cluster = Cluster(cfg, jobs)
    req = cluster.next_decision()
    assert len(req.waiting) == 2
    with pytest.raises(SimulationError, match="needs 12 GPUs; only 8"):
        cluster.answer_schedule(Allocation(start=(0, 1)))


def test_illegal_allocations_name_the_problem(small_config):
    jobs = generate_workload(small_config, 1)
    cluster = Cluster(small_config, jobs)
    cluster.next_decision()
    with pytest.raises(SimulationError, match="not running"):
        cluster.answer_schedule(Allocation(preempt=(0,)))


def test_event_queue_refuses_the_past_and_orders_ties():
    q = EventQueue()
    q.schedule(5.0, kind=0, job_id=2)
    q.schedule(5.0, kind=0, job_id=1)
    q.schedule(1.0, kind=0, job_id=3)
    assert [q.pop().job_id for _ in range(3)] == [3, 2, 1]  # time, then insertion order
    with pytest.raises(SimulationError, match="before now"):
        q.schedule(4.0, kind=0, job_id=9)


def test_job_larger_than_cluster_is_rejected(small_config):
    cfg = small_config.with_overrides({"cluster.gpus": 4})
    with pytest.raises(SimulationError, match="needs"):
        Cluster(cfg, generate_workload(cfg, 0))


def hand_job(job_id, job_type, gpus, arrival, duration, scores, eval_minutes=0.0):
    """A job with a given eval schedule (progress -> observed score), no noise."""
    points = np.array(sorted(scores))
    values = np.array([scores[p] for p in points])
    return Job(job_id=job_id, tenant=0, job_type=job_type, gpus=gpus, arrival=arrival,
               duration_estimate={"lora": 35.0, "dpo": 75.0, "rlhf": 210.0}[job_type],
               duration=duration, is_hacking=False, peak_progress=1.0, eval_points=points,
               eval_true=values, eval_observed=values, eval_minutes=eval_minutes,
               loss_params=(2.0, 0.3, 0.6, 0.05), curve_params=())


def test_preemption_pays_restart_overhead(small_config):
    """A long job preempted by a short arrival finishes later by the short job plus 2 minutes."""
    cfg = small_config.with_overrides({"cluster.gpus": 4})
    long = hand_job(0, "rlhf", 4, 0.0, 100.0, {0.5: 0.4, 1.0: 0.6})
    short = hand_job(1, "lora", 4, 10.0, 20.0, {1.0: 0.5})
    cluster = Cluster(cfg, [long, short])
    cluster.run(parse_policy("SRTF-Est"))
    assert short.end_time == pytest.approx(30.0)
    assert long.n_preemptions == 1
    assert long.end_time == pytest.approx(100.0 + 20.0 + 2.0)
    assert long.gpu_minutes == pytest.approx(4 * (100.0 + 2.0))


def test_eval_time_holds_the_gpus(small_config):
    cfg = small_config.with_overrides({"cluster.gpus": 8})
    job = hand_job(0, "dpo", 8, 5.0, 60.0, {0.5: 0.3, 1.0: 0.4}, eval_minutes=3.0)
    cluster = Cluster(cfg, [job])
    cluster.run(parse_policy("FIFO"))
    assert job.end_time == pytest.approx(5.0 + 60.0 + 2 * 3.0)
    assert [o.time for o in job.observations] == pytest.approx([38.0, 71.0])


def test_evalstop_stops_on_the_second_decline_and_keeps_the_best(small_config):
    cfg = small_config.with_overrides({"cluster.gpus": 8})
    scores = {0.25: 0.4, 0.5: 0.6, 0.75: 0.5, 0.9: 0.45, 1.0: 0.3}
    job = hand_job(0, "rlhf", 8, 0.0, 100.0, scores)
    Cluster(cfg, [job]).run(parse_policy("EvalStop-2+FIFO"))
    assert job.state.value == "stopped"
    assert job.progress == pytest.approx(0.9)
    assert job.end_time == pytest.approx(90.0)
    assert job.best_checkpoint() == (0.6, 0.5)
