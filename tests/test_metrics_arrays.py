"""The metrics over arrays (`metrics.score_table`, which both engines and the compiled vector env
call) against the per-record code they replaced, bit for bit: every record's repr and every
metric's repr, NaN where NaN, over configs (synthetic, dense noisy evals with milestones, a
Philly trace, corpus curves), policies that stop and that do not, both engines, and an agent's
random stops in the compiled batch.

`reference_record` and `reference_aggregate` are the replaced code as it was, kept here as the
definition to check against. One change of spelling: its Python `sum` of floats is written as
the left-to-right fold it was on Python <= 3.11 (CI's 3.11 among them); 3.12's `sum`
compensates, and the metrics keep the left-to-right order on every version.
"""

from __future__ import annotations

import functools
import math
import operator
from typing import Any

import numpy as np
import pytest

from evalstop_gym.config import MetricsConfig
from evalstop_gym.env.cluster_env import EvalStopClusterEnv
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.metrics import ordered_sum
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim import native
from evalstop_gym.sim.jobs import Job, JobState
from evalstop_gym.sim.rules import ROUNDING
from evalstop_gym.simulate import resolve_config, run_jobs, simulate
from evalstop_gym.workloads import generate_workload

SMALL = {"workload.n_jobs": 80}
CORPUS = {"curves.source": "corpus", "curves.corpus_lora": "supervised",
          "curves.corpus_dpo": "supervised", "curves.corpus_rlhf": "supervised"}
CASES = {
    "e2": ("e2", {}, ()),
    "e1-dense-noisy": ("e1", {"noise.sigma": 0.05, "evals.interval": 0.05, **SMALL}, ()),
    "e8": ("e8", SMALL, ()),
    "philly": ("philly", {}, ()),
    "corpus": ("e2", {**CORPUS, **SMALL}, ()),
    "e2-16gpu-restart": ("e2", {"cluster.gpus": 16, "cluster.preemption_overhead_min": 7.0,
                                **SMALL}, (0.3, 0.65)),
}
POLICIES = ("EvalStop-2+SRTF-Est", "StopAt-0.65+FIFO", "DeclineTest-0.05+LossAware", "SRTF-Est")


def left_to_right(values: list[float]) -> float:
    return functools.reduce(operator.add, values, 0)


def reference_record(job: Job, cfg: MetricsConfig) -> dict[str, Any]:
    stopped = job.state is JobState.STOPPED
    best = job.best_checkpoint()
    delivered = math.nan
    if best is not None:
        last = next(o.progress for o in reversed(job.observations) if o.score is not None)
        delivered = job.true_score_at(best[1] if stopped else last)
    remaining_evals = int(np.sum(job.eval_points > job.progress + ROUNDING))
    saved = job.gpus * (job.duration * (1.0 - job.work) + remaining_evals * job.eval_minutes)
    return {
        "job_id": job.job_id, "tenant": job.tenant, "job_type": job.job_type, "gpus": job.gpus,
        "arrival": job.arrival, "first_start": job.first_start, "end_time": job.end_time,
        "jct": job.end_time - job.arrival, "ttfuc": reference_ttfuc(job, cfg),
        "outcome": job.state.value, "stopped": stopped, "end_progress": job.progress,
        "stop_reason": job.stop_reason, "n_preemptions": job.n_preemptions,
        "n_evals": len(job.observed_scores),
        "gpu_minutes": job.gpu_minutes, "gpu_minutes_after_peak": job.gpu_minutes_after_peak,
        "planned_gpu_minutes": job.planned_gpu_minutes,
        "saved_gpu_minutes": saved if stopped else 0.0,
        "best_score": best[0] if best else math.nan, "best_progress": best[1] if best else math.nan,
        "delivered_true_score": delivered,
        "oracle_true_score": float(np.max(job.eval_true)) if len(job.eval_true) else math.nan,
        "duration": job.duration, "is_hacking": job.is_hacking,
        "peak_progress": job.peak_progress,
    }


def reference_ttfuc(job: Job, cfg: MetricsConfig) -> float:
    best = -math.inf
    for o in job.observations:
        if o.score is None:
            continue
        improves = best == -math.inf or o.score >= best + cfg.min_improvement * abs(best)
        if o.score > cfg.tau and improves:
            return o.time - job.arrival
        best = max(best, o.score)
    return math.nan


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def reference_aggregate(rec: list[dict[str, Any]], total_gpus: int) -> dict[str, float]:
    stopped = np.array([r["stopped"] for r in rec], dtype=bool)
    hacking = np.array([r["is_hacking"] for r in rec], dtype=bool)
    healthy_rlhf = np.array([r["job_type"] == "rlhf" and not r["is_hacking"] for r in rec])
    early = np.array([r["end_progress"] < 1.0 for r in rec])
    tp, fp = int(np.sum(stopped & hacking)), int(np.sum(stopped & ~hacking))
    precision, recall = _ratio(tp, tp + fp), _ratio(tp, int(hacking.sum()))
    used = left_to_right([r["gpu_minutes"] for r in rec])
    makespan = max(r["end_time"] for r in rec) - min(r["arrival"] for r in rec)
    by_tenant: dict[int, list[float]] = {}
    for r in rec:
        share = (r["gpu_minutes"] / r["gpus"]) / r["jct"] if r["jct"] > 0 else 1.0
        by_tenant.setdefault(r["tenant"], []).append(share)
    service = np.asarray([float(np.mean(v)) for _, v in sorted(by_tenant.items())])
    gaps = [r["oracle_true_score"] - r["delivered_true_score"] for r in rec
            if r["job_type"] != "lora" and not math.isnan(r["delivered_true_score"])]
    return {
        "jct": float(np.mean([r["jct"] for r in rec])),
        "ttfuc": float(np.nanmean([r["ttfuc"] for r in rec]))
        if any(not math.isnan(r["ttfuc"]) for r in rec) else math.nan,
        "wasted_frac": _ratio(left_to_right([r["gpu_minutes_after_peak"] for r in rec]), used),
        "saved_frac": _ratio(left_to_right([r["saved_gpu_minutes"] for r in rec]),
                             left_to_right([r["planned_gpu_minutes"] for r in rec])),
        "precision": precision, "recall": recall,
        "fpr": _ratio(int(np.sum(stopped & healthy_rlhf)), int(healthy_rlhf.sum())),
        "fpr_all": _ratio(fp, int((~hacking).sum())),
        "f1": (2 * precision * recall / (precision + recall)
               if precision + recall > 0 else math.nan),
        "jain": float(service.sum() ** 2 / (len(service) * np.sum(service**2)))
        if np.any(service) else math.nan,
        "n_stopped": int(stopped.sum()),
        "recall_early": _ratio(int(np.sum(stopped & hacking & early)), int(hacking.sum())),
        "quality_regret": float(np.mean(gaps)) if gaps else math.nan,
        "makespan": makespan,
        "utilization": _ratio(used, total_gpus * makespan),
    }


def expected_metrics(config, jobs: list[Job]) -> tuple[list[dict[str, Any]], dict[str, float]]:
    records = [reference_record(j, config.metrics) for j in jobs]
    return records, reference_aggregate(records, config.cluster.gpus)


@pytest.mark.parametrize("engine", ["python", "auto"])
@pytest.mark.parametrize("case", list(CASES))
def test_simulate_scores_as_the_job_records_did(case: str, engine: str) -> None:
    name, overrides, _ = CASES[case]
    config = resolve_config(name, overrides)
    stops = 0
    for seed in (0, 5, 9):
        for spec in POLICIES:
            result = simulate(config, spec, seed, engine=engine)
            policy = parse_policy(spec)
            policy.reset()
            jobs = generate_workload(config, seed)
            # the compiled engine's jobs written back by native._unpack: another path to them
            run_jobs(config, jobs, policy, native.select(config, policy, engine))
            records, metrics = expected_metrics(config, jobs)
            assert repr(result.records) == repr(records), f"{case}/{spec}/{seed}"
            assert repr(result.metrics) == repr(metrics), f"{case}/{spec}/{seed}"
            stops += result.metrics["n_stopped"]
    assert stops > 0


@pytest.mark.parametrize("case", ["e2-16gpu-restart", "e1-dense-noisy", "corpus"])
def test_the_compiled_batch_scores_an_agents_stops_as_the_job_records_did(case: str) -> None:
    """The batch's metrics, from its arrays, against the replaced code on the single env's
    jobs after the same random stops."""
    name, overrides, milestones = CASES[case]
    seeds = [3, 4]
    batch = CompiledBatch(len(seeds), name, milestones=milestones, **overrides)
    envs = [EvalStopClusterEnv(name, milestones=milestones, **overrides) for _ in seeds]
    batch.reset(range(len(seeds)), seeds)
    for env, seed in zip(envs, seeds, strict=True):
        env.reset(seed=seed)
    rng, done, agent_stops = np.random.default_rng(len(case)), [False] * len(seeds), 0
    while not all(done):
        stop = (rng.random(len(seeds)) < 0.2).astype(np.int64)
        batch.step(stop)
        for i, env in enumerate(envs):
            if done[i]:
                continue
            done[i] = env.step(int(stop[i]))[2]
            if done[i]:
                config = env.unwrapped.config
                _, metrics = expected_metrics(config, env.unwrapped._jobs)
                assert repr(batch.metrics(i)) == repr(metrics), f"{case}: env {i}"
                agent_stops += batch.metrics(i)["n_stopped"]
    assert agent_stops > 0


def test_the_run_level_sums_go_left_to_right() -> None:
    """A pairwise or compensated sum of these differs from the left-to-right one."""
    values = np.array([1.0, 1e-16, 1e-16, 1e-16, 1e-16])
    assert ordered_sum(values) == left_to_right(values.tolist()) == 1.0
    assert math.fsum(values.tolist()) != 1.0
    assert ordered_sum(np.array([-0.0])) == 0.0 and math.copysign(1, ordered_sum(
        np.array([-0.0]))) == 1.0
