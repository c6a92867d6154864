"""`evalstop-bench corpus noise-fit`: the simulator's `drift` noise model fitted to public runs.

The model (`evalstop_gym.sim.drift`): an eval is the run's trend plus noise of variance sd^2, a
share q of it a smooth Ornstein-Uhlenbeck drift in progress p (correlation exp(-|p - p'| / l))
and the rest i.i.d. Gaussian. Per kind of training, q and l are fitted jointly to the runs of the
DESIGN half of the public corpus (`traces.public_runs`; the test half is held back for judging
detectors); each run keeps its own sd.

The trend is separated from the noise without fitting it first (residuals from a fitted smooth
curve absorb the drift and read it as ~0): the likelihood is that of the run's second
differences, which remove any straight stretch of the trend, and their mean is a quadratic in
progress (a quartic trend), profiled out by restricted maximum likelihood (REML), so only what
the trend cannot explain is read as noise. Evals must be evenly spaced in progress (every run of
the corpus is), so the second differences' covariance is Toeplitz; their exact Gaussian
likelihood under the model is summed over the kind's runs, each run's sd profiled out, and
maximised over a grid of (q, l), then polished (L-BFGS-B). Declining runs are left out: their
turn at the peak is no quartic and would be read as drift. A drift slower than `SCALE_RANGE`'s
upper end is not told from the trend within one run, so l is bounded there.

Units: each run's scores are divided by its span (hindsight_label's: the smoothed curve's best
minus its lowest), so kinds on different metrics compare; per kind the median run's sd is
reported with its quartiles. The simulator's curves gain 0.3-0.5 of its 0..1 score scale, so its
`noise.sigma` is sd x `SIM_GAIN` (their mean gain), `noise.drift_share` q, `noise.drift_scale` l.
"""

from __future__ import annotations

import argparse
import json
import logging
import math
from collections.abc import Sequence
from typing import Any

import numpy as np
from scipy.linalg import cho_factor, cho_solve, toeplitz
from scipy.optimize import minimize

from evalstop_gym.sim.drift import drift_correlation
from evalstop_gym.traces.public_runs import PublicRun, hindsight_label, load_public

from ..durable import write_text

log = logging.getLogger(__name__)
FILE_NAME = "noise_fit.json"
TREND_DEGREE = 2             # the second differences' mean: a polynomial of this degree
SCALE_RANGE = (0.01, 0.25)   # the drift's time-scale, progress units
SHARE_MAX = 1.0              # all drift, no i.i.d. part: still a proper (OU) likelihood
SHARE_GRID = np.linspace(0.0, 0.9, 10)
SCALE_GRID = np.geomspace(*SCALE_RANGE, 12)
MIN_EVALS = 10
SIM_GAIN = 0.4               # the simulator's mean gain (configs/defaults.yaml curves: 0.3-0.5)
DIGITS = 4                   # rounding of the written fit


def second_difference_cov(n: int, spacing: float, share: float, scale: float) -> np.ndarray:
    """Covariance of the n - 2 second differences of n evals `spacing` apart, unit noise sd."""
    lag = np.arange(n + 2)
    r = share * drift_correlation(lag * spacing, scale)
    r[0] += 1.0 - share
    full = np.concatenate([r[:0:-1], r])            # r at lags -(n+1) .. n+1
    k = np.arange(n - 2) + len(r) - 1
    first = 6 * full[k] - 4 * (full[k - 1] + full[k + 1]) + full[k - 2] + full[k + 2]
    return toeplitz(first)


class RunCurve:
    """One run's second differences (scores in units of its span) and their trend basis."""

    def __init__(self, progress: np.ndarray, scores: np.ndarray) -> None:
        self.n = len(scores)
        self.spacing = float(np.median(np.diff(progress)))
        self.d = np.diff(np.asarray(scores, dtype=float), 2)
        self.basis = np.vander(np.linspace(-1.0, 1.0, len(self.d)), TREND_DEGREE + 1)

    def restricted_loglik(self, share: float, scale: float) -> tuple[float, float]:
        """(REML log-likelihood with the run's sd profiled out, that sd squared)."""
        factor = cho_factor(second_difference_cov(self.n, self.spacing, share, scale),
                            lower=True)
        sx, sd = cho_solve(factor, self.basis), cho_solve(factor, self.d)
        xsx = self.basis.T @ sx
        xsd = self.basis.T @ sd
        dof = len(self.d) - self.basis.shape[1]
        s2 = max(float(self.d @ sd - xsd @ np.linalg.solve(xsx, xsd)) / dof, 1e-300)
        logdet = 2.0 * float(np.sum(np.log(np.diag(factor[0])))) + np.linalg.slogdet(xsx)[1]
        return -0.5 * (logdet + dof * math.log(s2)), s2


def usable(progress: np.ndarray, scores: np.ndarray) -> str | None:
    """Why a run cannot be fitted, or None."""
    if len(scores) < MIN_EVALS:
        return f"{len(scores)} evals (< {MIN_EVALS})"
    gaps = np.diff(progress)
    if gaps.min() <= 0 or gaps.max() > 1.01 * gaps.min():
        return "evals not evenly spaced in progress"
    return None


def fit_curves(curves: Sequence[RunCurve]) -> dict[str, Any]:
    """The shared (q, l) of `curves` and the distribution of their sds."""
    def cost(share: float, scale: float) -> float:
        return -sum(c.restricted_loglik(share, scale)[0] for c in curves)

    grid = np.array([[cost(q, s) for s in SCALE_GRID] for q in SHARE_GRID])
    i, j = np.unravel_index(int(np.argmin(grid)), grid.shape)
    bounds = [(0.0, SHARE_MAX), (math.log(SCALE_RANGE[0]), math.log(SCALE_RANGE[1]))]
    best = minimize(lambda x: cost(x[0], math.exp(x[1])), [SHARE_GRID[i], math.log(SCALE_GRID[j])],
                    method="L-BFGS-B", bounds=bounds)
    share, scale = float(best.x[0]), math.exp(float(best.x[1]))
    sds = np.sqrt([c.restricted_loglik(share, scale)[1] for c in curves])
    sd = float(np.median(sds))
    return {"n_runs": len(curves), "drift_share": share, "drift_scale": scale, "sd": sd,
            "sd_quartiles": [float(np.percentile(sds, 25)), float(np.percentile(sds, 75))],
            "sigma_iid": sd * math.sqrt(1.0 - share), "drift": sd * math.sqrt(share),
            "simulator": {"noise.model": "drift", "noise.sigma": sd * SIM_GAIN,
                          "noise.drift_share": share, "noise.drift_scale": scale}}


def public_curve(run: PublicRun) -> RunCurve | str:
    """The run as a curve to fit, or why it is left out."""
    progress = run.steps / run.max_steps
    why = usable(progress, run.eval_score)
    label = hindsight_label(run.eval_score)
    if why is None and label.label == "declining":
        why = "declining (its peak is trend the quadratic does not follow)"
    if why is None and label.span <= 0:
        why = "flat curve (span 0)"
    return why if why is not None else RunCurve(progress, run.eval_score / label.span)


def fit_public(runs: Sequence[PublicRun]) -> dict[str, Any]:
    """Per kind and pooled ("all"), the fit of the design half's runs (see the module)."""
    from threadpoolctl import threadpool_limits
    from tqdm import tqdm

    curves: dict[str, list[RunCurve]] = {}
    skipped = []
    for run in runs:
        if run.split != "design":
            continue
        curve = public_curve(run)
        if isinstance(curve, str):
            skipped.append({"run_id": run.run_id, "why": curve})
        else:
            curves.setdefault(run.kind, []).append(curve)
    groups = {**{k: curves[k] for k in sorted(curves)}, "all": sum(curves.values(), [])}
    fits = {}
    with threadpool_limits(1):   # small matrices: threads only contend
        for kind in tqdm(groups, desc="noise fit", unit="kind"):
            fits[kind] = round_floats(fit_curves(groups[kind]))
    return {"command": "evalstop-bench corpus noise-fit", "half": "design",
            "model": "drift (evalstop_gym.sim.drift): Ornstein-Uhlenbeck drift in progress + "
                     "i.i.d. Gaussian; sd, sigma_iid and drift in units of each run's span",
            "estimator": "REML of second differences, quadratic mean, shared drift_share and "
                         "drift_scale per kind, each run's sd profiled (benchmarks/corpus/"
                         "noise_fit.py)",
            "sim_gain": SIM_GAIN, "scale_range": list(SCALE_RANGE), "kinds": fits,
            "skipped": skipped}


def round_floats(value: Any) -> Any:
    if isinstance(value, float):
        return round(value, DIGITS)
    if isinstance(value, dict):
        return {k: round_floats(v) for k, v in value.items()}
    if isinstance(value, list):
        return [round_floats(v) for v in value]
    return value


def main(args: argparse.Namespace) -> int:
    from .output import check_out

    out = check_out(args.out)
    doc = fit_public(load_public())
    write_text(out / FILE_NAME, json.dumps(doc, indent=1) + "\n")
    log.info("noise fit of %d design runs written to %s", doc["kinds"]["all"]["n_runs"],
             out / FILE_NAME)
    return 0
