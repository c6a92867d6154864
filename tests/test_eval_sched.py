"""EvalSched, time-sliced (the paper's) and strict: GPU accounting, holding, slowing, engines."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.config import SimConfig
from evalstop_gym.policies import parse_policy
from evalstop_gym.policies.eval_sched import past_peak
from evalstop_gym.sim.cluster import Cluster, ScheduleRequest
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate

LOADED = {"workload.n_jobs": 70, "cluster.gpus": 24, "workload.arrival_rate_per_min": 0.3}


def drive(config: SimConfig, name: str, seed: int) -> tuple[Cluster, list[int], list[bool]]:
    """Run `name` through the pull API, checking the allocation at every decision; returns the
    cluster, the GPUs held at each decision, and per preemption whether the job was demoted."""
    policy = parse_policy(name)
    cluster = Cluster(config, generate_workload(config, seed))
    cluster.adopt(policy)
    held, demoted_preempted = [], []
    while (req := cluster.next_decision()) is not None:
        held.append(sum(job.gpus for job in cluster.running.values()))
        if isinstance(req, ScheduleRequest):
            alloc = policy.schedule(req.cluster, req.waiting, req.running)
            demoted_preempted += [past_peak(v) for v in req.running if v.job_id in alloc.preempt]
            cluster.answer_schedule(alloc)
        else:
            cluster.answer_check(policy.on_check(req.job, req.cluster))
    return cluster, held, demoted_preempted


@pytest.mark.parametrize("seed", (1, 2))
def test_time_sliced_run_conserves_gpu_minutes_and_never_over_allocates(seed: int) -> None:
    config = SimConfig().with_overrides(LOADED)
    cluster, held, demoted_preempted = drive(config, "EvalSched", seed)
    assert max(held) <= config.cluster.gpus and cluster.free_gpus == config.cluster.gpus
    charged = sum(job.gpu_minutes for job in cluster.jobs)
    assert charged == pytest.approx(cluster.busy_gpu_minutes, rel=1e-9)
    assert not any(demoted_preempted), "a demoted job gave its GPUs away"
    assert any(job.speed < 1.0 for job in cluster.jobs), "no job was ever time-sliced"


def test_strict_form_preempts_demoted_jobs() -> None:
    """The strict-priority option gives demoted jobs' GPUs away (the time-sliced one never)."""
    config = SimConfig().with_overrides(LOADED)
    cluster, held, demoted_preempted = drive(config, "EvalSched-Strict", 1)
    assert max(held) <= config.cluster.gpus
    assert any(demoted_preempted)
    assert all(job.speed == 1.0 for job in cluster.jobs)


@pytest.mark.parametrize("share", (0.1, 0.5))
def test_a_demoted_job_progresses_at_its_share_of_time(share: float) -> None:
    """One noiseless hacking job alone: after its first decline it takes 1 / share as long."""
    config = SimConfig().with_overrides({
        "workload.n_jobs": 1, "workload.mix": {"lora": 0.0, "dpo": 0.0, "rlhf": 1.0},
        "workload.hacking_fraction": 1.0, "noise.sigma": 0.0, "cluster.time_slice_share": share})
    job = generate_workload(config, 4)[0]
    Cluster(config, [job]).run(parse_policy("EvalSched"))
    scores = [o.score for o in job.observations]
    first = next(i for i in range(1, len(scores)) if scores[i] < max(scores[:i]))
    at = job.observations[first]
    evals_after = int(np.sum(job.eval_points > at.progress + 1e-9))
    work = (1.0 - job.work_at(at.progress)) * job.duration + evals_after * job.eval_minutes
    assert job.end_time - at.time == pytest.approx(work / share, rel=1e-9)


@pytest.mark.parametrize("name", ("EvalSched", "EvalSched-Strict", "EvalStop-2+EvalSched"))
@pytest.mark.parametrize("share", (0.1, 0.35))
def test_engines_agree_on_both_forms(name: str, share: float) -> None:
    config = SimConfig().with_overrides({**LOADED, "cluster.time_slice_share": share})
    native = simulate(config, parse_policy(name), 9, engine="native")
    python = simulate(config, parse_policy(name), 9, engine="python")
    assert native.records == python.records and native.events == python.events


def test_time_slicing_makes_eval_sched_slower_than_strict_priority() -> None:
    """Holding GPUs while barely progressing costs more JCT than giving them away."""
    config = SimConfig().with_overrides({**LOADED, "cluster.time_slice_share": 0.1})
    jct = {n: np.mean([simulate(config, parse_policy(n), s).metrics["jct"] for s in (1, 2, 3)])
           for n in ("SRTF-Est", "EvalSched", "EvalSched-Strict")}
    assert jct["EvalSched"] > jct["EvalSched-Strict"] > jct["SRTF-Est"]
