"""The compiled engine against the reference on random platforms, beyond the hand-picked grid.

Each case draws a platform (cluster size, load, restart cost, eval schedule and cost, GPU
demands, noise, job mix) and a native policy from a seeded generator, so the kernel meets
corners nobody listed: one-GPU clusters, jobs as large as the cluster, free evals, no final eval,
milestones on eval points. Every run must match the reference event for event and record for
record.
"""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.config import load_sim_config
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim import native
from evalstop_gym.sim.jobs import JobState
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate

DEFAULTS = Path(__file__).parent.parent / "configs" / "defaults.yaml"
BASES = ("FIFO", "SJF-Est", "SRTF-Est", "LossAware", "EvalSched")
DETECTORS = ("", "EvalStop-1+", "EvalStop-2+", "EvalStop-2-best+", "StopAt-0.3+", "StopAt-0.45+",
             "LossPlateau+", "LossPlateau-0.001-5+")
N_CASES = 120


def random_case(case: int) -> tuple[dict[str, object], str, int]:
    """Platform overrides, a policy name and a seed, all drawn from `case`."""
    rng = np.random.default_rng([2026, case])
    gpus = int(rng.choice([1, 2, 8, 16, 64]))
    demand = [sorted(int(g) for g in rng.integers(1, gpus + 1, 2)) for _ in range(3)]
    mix = rng.dirichlet([1.0, 1.0, 1.0])
    overrides: dict[str, object] = {
        "workload.n_jobs": int(rng.integers(1, 90)),
        "cluster.gpus": gpus,
        "cluster.preemption_overhead_min": float(rng.choice([0.0, 0.5, 2.0, 15.0])),
        "workload.arrival_rate_per_min": float(rng.choice([0.01, 0.1, 0.5, 3.0])),
        "workload.mix": {"lora": float(mix[0]), "dpo": float(mix[1]), "rlhf": float(mix[2])},
        "workload.hacking_fraction": float(rng.uniform(0.0, 1.0)),
        "evals.interval": float(rng.choice([0.05, 0.15, 0.3, 0.45])),
        "evals.final": bool(rng.integers(0, 2)),
        "noise.sigma": float(rng.choice([0.0, 0.02, 0.1])),
        "noise.model": str(rng.choice(["gaussian", "student_t", "ar1"])),
    }
    for job_type, (lo, hi) in zip(("lora", "dpo", "rlhf"), demand, strict=True):
        overrides[f"job_types.{job_type}.gpus"] = [lo, hi]
        overrides[f"job_types.{job_type}.eval_minutes"] = float(rng.choice([0.0, 0.5, 5.0]))
    policy = str(rng.choice(DETECTORS)) + str(rng.choice(BASES))
    return overrides, policy, int(rng.integers(0, 10_000))


def _same(a: object, b: object) -> bool:
    return repr(a) == repr(b) or (isinstance(a, float) and isinstance(b, float)
                                  and math.isnan(a) and math.isnan(b))


@pytest.mark.parametrize("case", range(N_CASES))
def test_random_platform_runs_match_the_reference(case: int) -> None:
    overrides, policy_name, seed = random_case(case)
    config = load_sim_config(DEFAULTS, overrides=overrides)
    reference = simulate(config, parse_policy(policy_name), seed, engine="python")
    compiled = simulate(config, parse_policy(policy_name), seed, engine="native")
    assert compiled.events == reference.events, (policy_name, overrides)
    for ref, got in zip(reference.records, compiled.records, strict=True):
        diff = [k for k in ref if not _same(ref[k], got[k])]
        assert not diff, (policy_name, overrides, ref["job_id"], diff)
    assert all(_same(reference.metrics[k], compiled.metrics[k]) for k in reference.metrics)


@pytest.mark.parametrize("case", range(0, N_CASES, 4))
def test_random_platform_runs_keep_the_invariants(case: int) -> None:
    """On its own, without the reference: every job ends exactly once, after it arrived and
    started, its checks in time order inside its life, and it uses no more GPU time than its
    plan plus what preemptions cost."""
    overrides, policy_name, seed = random_case(case)
    config = load_sim_config(DEFAULTS, overrides=overrides)
    policy = parse_policy(policy_name)
    jobs = generate_workload(config, seed)
    native.run(config, jobs, native.select(config, policy, "native"), policy)
    for job in jobs:
        assert job.state in (JobState.COMPLETED, JobState.STOPPED) and job.end_time is not None
        assert job.arrival <= job.first_start <= job.end_time
        times = [o.time for o in job.observations]
        assert times == sorted(times) and all(job.first_start <= t <= job.end_time for t in times)
        assert 0.0 <= job.gpu_minutes_after_peak <= job.gpu_minutes + 1e-6
        # beyond its plan, a preemption costs at most the interrupted restart or eval, and the
        # restart after it
        overhead = config.cluster.preemption_overhead_min
        lost = job.n_preemptions * job.gpus * (overhead + max(overhead, job.eval_minutes))
        # a time-sliced job (EvalSched's demoted ones) holds its GPUs 1 / share as long
        sliced = 1.0 / config.cluster.time_slice_share if "EvalSched" in policy_name else 1.0
        assert job.gpu_minutes <= (job.planned_gpu_minutes * sliced + lost) * (1 + 1e-9) + 1e-6
        assert (job.state is JobState.COMPLETED) == (job.progress == 1.0 and not job.stop_reason)
