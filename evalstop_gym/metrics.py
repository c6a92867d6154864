"""The paper's metrics, computed after a run from the finished job records (hidden truth included).

This is the only module outside `sim/` that reads hidden fields, and only once the run is over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

import numpy as np

from .config import MetricsConfig
from .sim.jobs import Job, JobState
from .sim.rules import ROUNDING

METRIC_COLUMNS = ("jct", "ttfuc", "wasted_frac", "saved_frac", "precision", "recall",
                  "recall_early", "fpr", "fpr_all", "f1", "jain", "n_stopped", "quality_regret",
                  "makespan", "utilization")


def job_record(job: Job, cfg: MetricsConfig) -> dict[str, Any]:
    """One finished job as a flat dict: what happened, and the hidden truth to score it."""
    if not job.state.finished or job.end_time is None:
        raise ValueError(f"job {job.job_id} has not ended (state {job.state.value})")
    stopped = job.state is JobState.STOPPED
    best = job.best_checkpoint()
    delivered = _delivered_true_score(job, stopped)
    remaining_evals = int(np.sum(job.eval_points > job.progress + ROUNDING))
    saved = job.gpus * (job.duration * (1.0 - job.work) + remaining_evals * job.eval_minutes)
    return {
        "job_id": job.job_id, "tenant": job.tenant, "job_type": job.job_type, "gpus": job.gpus,
        "arrival": job.arrival, "first_start": job.first_start, "end_time": job.end_time,
        "jct": job.end_time - job.arrival, "ttfuc": ttfuc(job, cfg),
        "outcome": job.state.value, "stopped": stopped, "end_progress": job.progress,
        "stop_reason": job.stop_reason, "n_preemptions": job.n_preemptions,
        "n_evals": len(job.observed_scores),
        "gpu_minutes": job.gpu_minutes, "gpu_minutes_after_peak": job.gpu_minutes_after_peak,
        "planned_gpu_minutes": job.planned_gpu_minutes,
        "saved_gpu_minutes": saved if stopped else 0.0,
        "best_score": best[0] if best else math.nan, "best_progress": best[1] if best else math.nan,
        "delivered_true_score": delivered,
        "oracle_true_score": float(np.max(job.eval_true)) if len(job.eval_true) else math.nan,
        # hidden truth, for scoring only
        "duration": job.duration, "is_hacking": job.is_hacking,
        "peak_progress": job.peak_progress,
    }


def _delivered_true_score(job: Job, stopped: bool) -> float:
    """True quality of the checkpoint the user gets: the best observed if stopped, else the last."""
    best = job.best_checkpoint()
    if best is None:
        return math.nan
    last = next(o.progress for o in reversed(job.observations) if o.score is not None)
    return job.true_score_at(best[1] if stopped else last)


def ttfuc(job: Job, cfg: MetricsConfig) -> float:
    """Minutes from arrival to the first eval above tau beating the previous best by the margin."""
    best = -math.inf
    for o in job.observations:
        if o.score is None:
            continue
        improves = best == -math.inf or o.score >= best + cfg.min_improvement * abs(best)
        if o.score > cfg.tau and improves:
            return o.time - job.arrival
        best = max(best, o.score)
    return math.nan


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n at worst."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0 or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (len(x) * np.sum(x**2)))


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def aggregate(records: Sequence[dict[str, Any]], total_gpus: int) -> dict[str, float]:
    """Run-level metrics from job records (see README for the definitions)."""
    rec = records
    stopped = np.array([r["stopped"] for r in rec], dtype=bool)
    hacking = np.array([r["is_hacking"] for r in rec], dtype=bool)
    healthy_rlhf = np.array([r["job_type"] == "rlhf" and not r["is_hacking"] for r in rec])
    early = np.array([r["end_progress"] < 1.0 for r in rec])  # stopped with compute left
    tp = int(np.sum(stopped & hacking))
    fp = int(np.sum(stopped & ~hacking))
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, int(hacking.sum()))
    f1 = (2 * precision * recall / (precision + recall)
          if precision + recall > 0 else math.nan)
    used = sum(r["gpu_minutes"] for r in rec)
    makespan = max(r["end_time"] for r in rec) - min(r["arrival"] for r in rec)
    return {
        "jct": float(np.mean([r["jct"] for r in rec])),
        "ttfuc": float(np.nanmean([r["ttfuc"] for r in rec]))
        if any(not math.isnan(r["ttfuc"]) for r in rec) else math.nan,
        "wasted_frac": _ratio(sum(r["gpu_minutes_after_peak"] for r in rec), used),
        "saved_frac": _ratio(sum(r["saved_gpu_minutes"] for r in rec),
                             sum(r["planned_gpu_minutes"] for r in rec)),
        "precision": precision, "recall": recall,
        "fpr": _ratio(int(np.sum(stopped & healthy_rlhf)), int(healthy_rlhf.sum())),
        "fpr_all": _ratio(fp, int((~hacking).sum())),
        "f1": f1,
        "jain": jain_index(_tenant_service(rec)),
        "n_stopped": int(stopped.sum()),
        "recall_early": _ratio(int(np.sum(stopped & hacking & early)), int(hacking.sum())),
        "quality_regret": _quality_regret(rec),
        "makespan": makespan,
        "utilization": _ratio(used, total_gpus * makespan),
    }


def _quality_regret(rec: Sequence[dict[str, Any]]) -> float:
    """Mean true score lost against each monitored job's best checkpoint (NaN if none scored)."""
    gaps = [r["oracle_true_score"] - r["delivered_true_score"] for r in rec
            if r["job_type"] != "lora" and not math.isnan(r["delivered_true_score"])]
    return float(np.mean(gaps)) if gaps else math.nan


def _tenant_service(rec: Sequence[dict[str, Any]]) -> list[float]:
    """Per tenant, the mean fraction of its jobs' time in the system spent holding GPUs."""
    by_tenant: dict[int, list[float]] = {}
    for r in rec:
        share = (r["gpu_minutes"] / r["gpus"]) / r["jct"] if r["jct"] > 0 else 1.0
        by_tenant.setdefault(r["tenant"], []).append(share)
    return [float(np.mean(v)) for _, v in sorted(by_tenant.items())]
