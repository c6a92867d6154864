"""The paper's metrics, computed after a run from its finished jobs (hidden truth included).

One function scores every run (`score_table`): the reference engine's `Job` records and the
compiled engine's arrays both become a `JobTable` (`table.py`), whose per-job columns one
compiled loop fills (`per_job.py`) and whose run-level numbers `run_metrics` sums in a fixed
order, so the engines and the compiled vector env agree to the bit. This package is the only
code outside `sim/` that reads hidden fields, and only once the run is over.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from ..config import MetricsConfig
from ..sim.jobs import JOB_TYPES, STATES, Job
from .per_job import (
    BEST_PROGRESS,
    BEST_SCORE,
    DELIVERED,
    N_SCORED,
    ORACLE,
    SAVED,
    TTFUC,
    useful_time,
)
from .table import STOPPED, JobTable, JobTruth, table_of_arrays, table_of_jobs, truth_of

__all__ = ["METRIC_COLUMNS", "JobMetrics", "JobTable", "JobTruth", "aggregate", "jain_index",
           "job_metrics", "job_records", "ordered_sum", "run_metrics", "score_table",
           "table_of_arrays", "table_of_jobs", "truth_of", "ttfuc"]

METRIC_COLUMNS = ("jct", "ttfuc", "wasted_frac", "saved_frac", "precision", "recall",
                  "recall_early", "fpr", "fpr_all", "f1", "jain", "n_stopped", "quality_regret",
                  "makespan", "utilization")
RLHF, LORA = JOB_TYPES.index("rlhf"), JOB_TYPES.index("lora")


class JobMetrics(NamedTuple):
    """Each job's scored columns, in job order: what `run_metrics` reads."""

    stopped: np.ndarray
    is_hacking: np.ndarray
    jtype: np.ndarray
    tenant: np.ndarray
    gpus: np.ndarray
    arrival: np.ndarray
    end_time: np.ndarray
    end_progress: np.ndarray
    jct: np.ndarray
    ttfuc: np.ndarray
    gpu_minutes: np.ndarray
    gpu_after_peak: np.ndarray
    planned: np.ndarray
    saved: np.ndarray
    best_score: np.ndarray
    best_progress: np.ndarray
    delivered: np.ndarray
    oracle: np.ndarray


def score_table(table: JobTable, cfg: MetricsConfig, total_gpus: int
                ) -> tuple[JobMetrics, dict[str, float]]:
    """A finished run's per-job columns and its run-level metrics."""
    scored = job_metrics(table, cfg)
    return scored, run_metrics(scored, total_gpus)


def job_metrics(t: JobTable, cfg: MetricsConfig) -> JobMetrics:
    """Each job's scored columns (`per_job.score_jobs`, compiled)."""
    from .compiled import score_jobs

    stopped = t.state == STOPPED
    out = np.empty((N_SCORED, len(t.gpus)))
    score_jobs(stopped, t.gpus, t.duration, t.eval_min, t.work, t.progress, t.arrival, t.ev_ptr,
               t.ev_point, t.ev_true, t.obs_ptr, t.obs_score, t.obs_prog, t.obs_time,
               float(cfg.tau), float(cfg.min_improvement), out)
    planned = t.gpus * (t.duration + np.diff(t.ev_ptr) * t.eval_min)
    return JobMetrics(stopped, t.is_hacking, t.jtype, t.tenant, t.gpus, t.arrival, t.end_time,
                      t.progress, t.end_time - t.arrival, out[TTFUC], t.gpu_min, t.gpu_after,
                      planned, out[SAVED], out[BEST_SCORE], out[BEST_PROGRESS], out[DELIVERED],
                      out[ORACLE])


def job_records(t: JobTable, m: JobMetrics, stop_reasons: Sequence[str]
                ) -> list[dict[str, Any]]:
    """Each finished job as a flat dict of Python values: what happened, and the hidden truth
    to score it (`RunResult.records`)."""
    columns: dict[str, list] = {
        "job_id": t.job_id.tolist(), "tenant": t.tenant.tolist(),
        "job_type": [JOB_TYPES[k] for k in t.jtype.tolist()], "gpus": t.gpus.tolist(),
        "arrival": t.arrival.tolist(),
        "first_start": [None if math.isnan(x) else x for x in t.first_start.tolist()],
        "end_time": t.end_time.tolist(), "jct": m.jct.tolist(), "ttfuc": _nan_once(m.ttfuc),
        "outcome": [STATES[s].value for s in t.state.tolist()], "stopped": m.stopped.tolist(),
        "end_progress": m.end_progress.tolist(), "stop_reason": list(stop_reasons),
        "n_preemptions": t.n_pre.tolist(), "n_evals": np.diff(t.obs_ptr).tolist(),
        "gpu_minutes": m.gpu_minutes.tolist(), "gpu_minutes_after_peak": m.gpu_after_peak.tolist(),
        "planned_gpu_minutes": m.planned.tolist(), "saved_gpu_minutes": m.saved.tolist(),
        "best_score": _nan_once(m.best_score), "best_progress": _nan_once(m.best_progress),
        "delivered_true_score": _nan_once(m.delivered), "oracle_true_score": _nan_once(m.oracle),
        # hidden truth, for scoring only
        "duration": t.duration.tolist(), "is_hacking": m.is_hacking.tolist(),
        "peak_progress": t.peak_progress.tolist(),
    }
    keys = list(columns)
    return [dict(zip(keys, row, strict=True)) for row in zip(*columns.values(), strict=True)]


def _nan_once(values: np.ndarray) -> list[float]:
    """`values` as Python floats, every NaN the one `math.nan` object: records compare equal
    (`==` takes an object as equal to itself) as they did when built by hand."""
    return [math.nan if v != v else v for v in values.tolist()]


def ttfuc(job: Job, cfg: MetricsConfig) -> float:
    """Minutes from arrival to the first eval above tau beating the previous best by the margin."""
    evals = [(o.score, o.time) for o in job.observations if o.score is not None]
    return useful_time([s for s, _ in evals], [t for _, t in evals], cfg.tau,
                       cfg.min_improvement) - job.arrival


def jain_index(values: Sequence[float]) -> float:
    """Jain's fairness index (sum x)^2 / (n sum x^2): 1 when all equal, 1/n at worst."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0 or not np.any(x):
        return math.nan
    return float(x.sum() ** 2 / (len(x) * np.sum(x**2)))


def _ratio(num: float, den: float) -> float:
    return num / den if den > 0 else math.nan


def ordered_sum(values: np.ndarray) -> float:
    """Left-to-right float sum from 0, as Python's `sum` gives it up to 3.11 (3.12 compensates):
    the same bits on every Python version."""
    return 0.0 + float(np.add.accumulate(values)[-1]) if len(values) else 0.0


def run_metrics(m: JobMetrics, total_gpus: int) -> dict[str, float]:
    """Run-level metrics from the jobs' columns (see README for the definitions). Sums run left
    to right in job order, means are numpy's (pairwise) over the columns in job order."""
    stopped, hacking = m.stopped, m.is_hacking
    healthy_rlhf = (m.jtype == RLHF) & ~hacking
    early = m.end_progress < 1.0  # stopped with compute left
    tp = int(np.sum(stopped & hacking))
    fp = int(np.sum(stopped & ~hacking))
    precision = _ratio(tp, tp + fp)
    recall = _ratio(tp, int(hacking.sum()))
    f1 = (2 * precision * recall / (precision + recall)
          if precision + recall > 0 else math.nan)
    used = ordered_sum(m.gpu_minutes)
    makespan = float(np.max(m.end_time)) - float(np.min(m.arrival))
    return {
        "jct": float(np.mean(m.jct)),
        "ttfuc": float(np.nanmean(m.ttfuc)) if not np.isnan(m.ttfuc).all() else math.nan,
        "wasted_frac": _ratio(ordered_sum(m.gpu_after_peak), used),
        "saved_frac": _ratio(ordered_sum(m.saved), ordered_sum(m.planned)),
        "precision": precision, "recall": recall,
        "fpr": _ratio(int(np.sum(stopped & healthy_rlhf)), int(healthy_rlhf.sum())),
        "fpr_all": _ratio(fp, int((~hacking).sum())),
        "f1": f1,
        "jain": jain_index(_tenant_service(m)),
        "n_stopped": int(stopped.sum()),
        "recall_early": _ratio(int(np.sum(stopped & hacking & early)), int(hacking.sum())),
        "quality_regret": _quality_regret(m),
        "makespan": makespan,
        "utilization": _ratio(used, total_gpus * makespan),
    }


def aggregate(records: Sequence[dict[str, Any]], total_gpus: int) -> dict[str, float]:
    """Run-level metrics from job records (`job_records`' fields; see README)."""
    def column(key: str, dtype: type = np.float64) -> np.ndarray:
        return np.array([r[key] for r in records], dtype)

    nan = np.full(len(records), math.nan)
    return run_metrics(JobMetrics(
        column("stopped", np.bool_), column("is_hacking", np.bool_),
        np.array([JOB_TYPES.index(r["job_type"]) for r in records], np.int64),
        column("tenant", np.int64), column("gpus", np.int64), column("arrival"),
        column("end_time"), column("end_progress"), column("jct"), column("ttfuc"),
        column("gpu_minutes"), column("gpu_minutes_after_peak"), column("planned_gpu_minutes"),
        column("saved_gpu_minutes"), nan, nan, column("delivered_true_score"),
        column("oracle_true_score")), total_gpus)


def _quality_regret(m: JobMetrics) -> float:
    """Mean true score lost against each monitored job's best checkpoint (NaN if none scored)."""
    scored = (m.jtype != LORA) & ~np.isnan(m.delivered)
    gaps = m.oracle[scored] - m.delivered[scored]
    return float(np.mean(gaps)) if len(gaps) else math.nan


def _tenant_service(m: JobMetrics) -> list[float]:
    """Per tenant, the mean fraction of its jobs' time in the system spent holding GPUs."""
    with np.errstate(divide="ignore", invalid="ignore"):
        share = np.where(m.jct > 0, (m.gpu_minutes / m.gpus) / m.jct, 1.0)
    return [float(np.mean(share[m.tenant == t])) for t in np.unique(m.tenant).tolist()]
