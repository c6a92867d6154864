"""The suite's anchors, measured once and stored beside it: NoStop's measure and the reference's.

Simulated tasks: the reference is the Bayes oracle (`detectors.oracle.BayesOracle`, which knows
the generative model the simulator draws from), run on the task's seeds never stopping and
recording each RLHF job's highest posterior; a job would be stopped at threshold t exactly when
its peak passes t, so one run gives the oracle's recall and FPR at every threshold, and the
reference is its informedness at the threshold that maximises the mean over the seeds (the best
the limit can do, chosen in hindsight). Real tasks have no generative model: the reference is
the best known, the best of the suite's `reference_candidates`, named in the file.

`evalstop-bench score --measure-references --suite FILE.yaml` writes FILE.references.json; a
packaged suite's references are part of its pinned digest.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
from tqdm.auto import tqdm

from .. import durable
from ..detectors.oracle import oracle_peaks
from ..scoring.measures import informedness
from ..scoring.probes import run_probes
from ..scoring.tasks import run_tasks
from ..sweep.runner import DEFAULT_OPTIONS
from . import real
from .suite import Suite

log = logging.getLogger(__name__)
ORACLE_SOURCE = "Bayes oracle (knows the generative model), best threshold over the seeds"


def best_threshold(jobs: pd.DataFrame) -> dict[str, Any]:
    """The threshold maximising the mean over seeds of recall - FPR, and each seed's value
    there (a threshold above every peak stops nothing: 0, so the best is >= 0)."""
    candidates = np.unique(np.append(jobs["peak"].to_numpy(), np.inf))
    per_seed = {}
    for seed, g in jobs.groupby("seed"):
        hack, healthy = g.peak[g.is_hacking].to_numpy(), g.peak[~g.is_hacking].to_numpy()
        zero = np.zeros(len(candidates))
        recall = (hack[None, :] > candidates[:, None]).mean(1) if len(hack) else zero + np.nan
        fpr = (healthy[None, :] > candidates[:, None]).mean(1) if len(healthy) else zero
        per_seed[int(seed)] = recall - fpr
    mean = np.nanmean(np.vstack(list(per_seed.values())), axis=0)
    best = int(np.argmax(mean))
    return {"value": float(mean[best]), "threshold": float(candidates[best]),
            "per_seed": {str(s): float(v[best]) for s, v in per_seed.items()}}


def simulated_references(suite: Suite, out: Path, workers: int) -> dict[str, dict[str, Any]]:
    """NoStop's mean measure (through the scoring runs themselves) and the oracle's, per task."""
    nostop = run_tasks(suite.simulated, suite.base, suite.seeds, ["none"], out, workers,
                       DEFAULT_OPTIONS).runs
    low = informedness(nostop).groupby(nostop["task"]).mean()
    peaks = run_probes(oracle_peaks, suite.simulated, suite.base, suite.seeds, out, workers)
    refs = {}
    for task in suite.simulated:
        jobs = peaks[peaks["task"] == task.id]
        refs[task.id] = {"nostop": float(low[task.id]), **best_threshold(jobs),
                         "source": ORACLE_SOURCE}
    return refs


def real_references(suite: Suite, out: Path) -> dict[str, dict[str, Any]]:
    """NoStop's measure and the best candidate's, per real task."""
    runs = real.public_runs(suite, measuring=True)
    refs = {}
    for task in tqdm(suite.real, desc="real tasks", unit="task"):
        rows = pd.DataFrame([real.real_row(name, name, task, suite, out, runs)
                             for name in ("none", *suite.candidates)])
        measure = informedness(rows)
        best = int(measure.iloc[1:].idxmax())
        refs[task.id] = {"nostop": float(measure.iloc[0]), "value": float(measure[best]),
                         "source": f"best known: {rows.policy[best]}",
                         "data": real.data_digest()}
    return refs


def measure_references(suite: Suite, out: Path, workers: int) -> Path:
    """Every task's anchors, written atomically beside the suite; returns the file."""
    refs = {**simulated_references(suite, out, workers), **real_references(suite, out)}
    for task_id, ref in refs.items():
        if not ref["value"] > ref["nostop"]:
            raise ValueError(f"task {task_id}: the reference ({ref['value']:.4g}) does not beat "
                             f"NoStop ({ref['nostop']:.4g}); the task cannot be normalised")
    path = suite.references_path
    durable.write_text(path, json.dumps(refs, indent=1, sort_keys=True) + "\n")
    log.info("wrote %s", path)
    return path
