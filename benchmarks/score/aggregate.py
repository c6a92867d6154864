"""A policy's score file: per task its metrics and normalised score, then the aggregates.

Per task: the mean over the test seeds of recall, early recall, FPR, JCT and wasted compute, the
measure and the normalised score. Per family of tasks (simulated; real, for detectors): the
interquartile mean of the normalised scores of every (task, seed) run with its stratified-
bootstrap 95% CI (`analysis.iqm`, seeds resampled within each task; a family of one run per task
resamples the tasks), and the plain mean of the task scores. The file records what it was
scored on and with: the suite's name and digest, the package's version and code digest, and the
digest of the policy's own files (a user's source, a model's bytes).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from ..analysis.iqm import iqm_ci
from .suite import Suite

RESAMPLES = 2000
TASK_COLUMNS = ("recall", "recall_early", "fpr", "jct", "wasted_frac", "decline_avoided",
                "measure", "normalised")
FAMILIES = ("simulated", "real")


def shown(policy: str) -> str:
    """A row's name on the page and in figures: 'none' (the base alone) as NoStop."""
    return "NoStop" if policy == "none" else policy


def _number(x: Any) -> float | None:
    """A float for JSON, None for NaN (so a file never holds a bare NaN)."""
    return None if x is None or pd.isna(x) else float(x)


def family_aggregate(runs: pd.DataFrame) -> dict[str, Any]:
    """IQM [95% CI] of the runs' normalised scores and the mean of the task scores."""
    if runs.empty:
        return {"iqm": None, "low": None, "high": None, "mean": None, "tasks": 0}
    matrix = runs.pivot_table(index=["member", "seed"], columns="task", values="normalised",
                              aggfunc="first", dropna=False).to_numpy()
    iqm, low, high = iqm_ci(matrix, RESAMPLES)
    return {"iqm": _number(iqm), "low": _number(low), "high": _number(high),
            "mean": _number(runs.groupby("task")["normalised"].mean().mean()),
            "tasks": int(runs["task"].nunique())}


def score_record(policy: str, runs: pd.DataFrame, suite: Suite,
                 provenance: dict[str, Any]) -> dict[str, Any]:
    """The score file's content for one row (`runs`: its normalised rows, `member` naming the
    policy of each: one, or several training runs of one learned policy scored together)."""
    real_ids = {t.id for t in suite.real}
    runs = runs.assign(family=np.where(runs["task"].isin(real_ids), "real", "simulated"))
    order = {t.id: i for i, t in enumerate(suite.tasks)}
    runs = runs.sort_values(["task", "member", "seed"], key=lambda c: c.map(order)
                            if c.name == "task" else c).reset_index(drop=True)
    tasks = []
    for task, group in runs.groupby("task", sort=False):
        means = group.reindex(columns=list(TASK_COLUMNS)).astype(float).mean()
        tasks.append({"task": task, "runs": len(group),
                      **{c: _number(means[c]) for c in TASK_COLUMNS}})
    return {"policy": policy, **provenance,
            "tasks": tasks,
            "runs": [{"task": r.task, "member": r.member, "seed": int(r.seed),
                      "normalised": _number(r.normalised)} for r in runs.itertuples()],
            "aggregate": {f: family_aggregate(runs[runs.family == f]) for f in FAMILIES}}
