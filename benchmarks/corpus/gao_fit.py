"""Gao, Schulman & Hilton's R(d) = d (alpha - beta ln d), d = sqrt(KL), fitted to the corpus's
hacking reward runs, in the simulator's terms.

R is the gold reward gained since the run's first eval. The fit is linear least squares in
(alpha, beta) per run. In the simulator's normalised form (`sim.curves.gao_hacking`) the same
curve is gain * u (1 - ln u) with u = d / d_peak, d_peak = exp(alpha / beta - 1) and
gain = beta * d_peak; the simulator's `collapse` exponent is the slope of ln d against
ln progress (d grows as progress ** collapse), and its peak progress is where d = d_peak.
"""

from __future__ import annotations

import csv
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.config import load_sim_config
from evalstop_gym.traces.corpus import CorpusRun


def read_kl(path: Path) -> dict[str, np.ndarray]:
    """Each run's KL to its start at every eval (the `kl` column)."""
    kl: dict[str, list[float]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            kl.setdefault(row["job_id"], []).append(float(row["kl"]))
    return {k: np.array(v) for k, v in kl.items()}


def fit_run(d: np.ndarray, gain: np.ndarray) -> tuple[float, float, float]:
    """(alpha, beta, R^2) of gain = alpha d - beta d ln d, least squares."""
    keep = d > 0
    a = np.column_stack([d[keep], -d[keep] * np.log(d[keep])])
    coef, *_ = np.linalg.lstsq(a, gain[keep], rcond=None)
    resid = gain[keep] - a @ coef
    total = float(np.sum((gain[keep] - gain[keep].mean()) ** 2))
    return float(coef[0]), float(coef[1]), 1.0 - float(resid @ resid) / total if total else 0.0


def collapse_exponent(d: np.ndarray, progress: np.ndarray) -> float:
    """Slope of ln d on ln progress up to the peak of d's growth (least squares)."""
    keep = d > 0
    return float(np.polyfit(np.log(progress[keep]), np.log(d[keep]), 1)[0])


def fit_hacking_runs(runs: Sequence[CorpusRun], path: Path) -> dict[str, Any]:
    """Per-run fits of the hacking reward runs and their medians, beside the simulator's ranges."""
    kl = read_kl(path)
    fits = []
    for run in runs:
        if not run.declines:
            continue
        d = np.sqrt(np.maximum(kl[run.run_id], 0.0))
        alpha, beta, r2 = fit_run(d, run.test_score - run.test_score[0])
        d_peak = math.exp(alpha / beta - 1.0) if beta > 0 else math.inf
        progress = run.steps / run.max_steps
        peak_at = float(np.interp(d_peak, d, progress)) if np.all(np.diff(d) > 0) else math.nan
        fits.append({"run_id": run.run_id, "alpha": alpha, "beta": beta, "r2": r2,
                     "d_peak": d_peak, "gain": beta * d_peak,
                     "collapse": collapse_exponent(d, progress), "peak_progress": peak_at,
                     "test_peak_progress": run.peak_progress})
    median = {k: float(np.nanmedian([f[k] for f in fits])) for k in
              ("alpha", "beta", "r2", "d_peak", "gain", "collapse", "test_peak_progress")}
    sim = load_sim_config().curves.rlhf_hacking   # the ranges the simulator draws from
    return {"n_runs": len(fits), "median": median, "runs": fits,
            "simulator": {"collapse": list(sim.collapse), "peak_progress": list(sim.peak_progress),
                          "gain": list(sim.gain),
                          "source": "configs/defaults.yaml curves.rlhf_hacking"}}
