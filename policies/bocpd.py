"""BOCPD: Bayesian online change-point detection (Adams & MacKay 2007) on a job's eval series.

Model: the eval series is piecewise constant in mean plus Normal noise of known sd `sigma`
(estimated from finished jobs by `PooledNoise` unless given); each segment's mean has a Normal
prior N(mu0, tau^2) with mu0 the mean of the job's evals so far; change points arrive with a
constant hazard. The recursion over run lengths is written out below; the Normal densities are
evaluated in closed form (scipy.stats' per-call overhead dominated a run), the CDF by
scipy.special.ndtr.

Stop rule: with r the current run length (evals since the last change), the posterior that the
mean has turned down is sum over r < n of P(r | evals) * P(segment mean < pre-change level | r),
where the pre-change level is the mean of the (up to) `n_pre` evals just before the change.
The job stops when that posterior exceeds `threshold` and the segment holds >= `min_run` evals.
Name: `BOCPD-<threshold>[-<hazard>[-<min_run>]]`, e.g. `BOCPD-0.5` (hazard 0.2, min_run 1).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtr

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import stop
from .noise_estimate import NoiseScaledDetector
from .registry import register_detector

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)


def norm_logpdf(x: float, mean: np.ndarray | float, sd: np.ndarray | float) -> np.ndarray:
    z = (x - mean) / sd
    return -0.5 * z * z - np.log(sd) - LOG_SQRT_2PI


def run_length_posterior(x: np.ndarray, sigma: float, hazard: float, mu0: float,
                         tau: float) -> np.ndarray:
    """P(run length = r | x) for r = 1..n after the last eval (index r - 1)."""
    log_r = np.array([0.0])                    # after x[0]: run length 1 with certainty
    for t in range(1, len(x)):
        seg = [x[t - r:t] for r in range(1, t + 1)]   # the segment for each run length
        prec = 1.0 / tau**2 + np.arange(1, t + 1) / sigma**2
        mean = (mu0 / tau**2 + np.array([s.sum() for s in seg]) / sigma**2) / prec
        log_pred = norm_logpdf(x[t], mean, np.sqrt(1.0 / prec + sigma**2))
        grow = log_r + log_pred + np.log1p(-hazard)
        new = np.logaddexp.reduce(log_r + np.log(hazard)) + norm_logpdf(
            x[t], mu0, np.sqrt(tau**2 + sigma**2))
        log_r = np.concatenate([[new], grow])
        log_r -= np.logaddexp.reduce(log_r)
    return np.exp(log_r)


def p_turned_down(scores: Sequence[float], sigma: float, hazard: float, tau: float,
                  n_pre: int = 2, min_run: int = 1) -> float:
    """Posterior mass on a change whose segment mean lies below the level just before it."""
    x = np.asarray(scores, dtype=float)
    n = len(x)
    if n < 2:
        return 0.0
    mu0 = float(x.mean())
    post = run_length_posterior(x, sigma, hazard, mu0, tau)
    total = 0.0
    for r in range(max(1, min_run), n):
        seg, pre = x[n - r:], x[max(0, n - r - n_pre):n - r]
        prec = 1.0 / tau**2 + r / sigma**2
        m_post = (mu0 / tau**2 + seg.sum() / sigma**2) / prec
        sd = np.sqrt(1.0 / prec + sigma**2 / len(pre))
        total += post[r - 1] * float(ndtr((pre.mean() - m_post) / sd))
    return total


class BOCPD(NoiseScaledDetector):
    """BOCPD: Bayesian online change-point detection (Adams & MacKay 2007) on a job's evals.

    Models the evals as piecewise-constant means plus Normal noise and stops when the posterior
    that the current segment's mean lies below the level before the change exceeds `threshold`
    (the segment holding at least `min_run` evals); `hazard` is the prior rate of change points.
    The noise sd is `sigma` when given, else pooled from finished jobs. It assumes steps, not
    slopes, and Normal noise: a slow steady decline is seen late, heavy tails give false stops.
    Needs the evals (and ended runs, without `sigma`).
    Name: `BOCPD-<threshold>[-<hazard>[-<min_run>]]`.
    """

    def __init__(self, threshold: float = 0.5, hazard: float = 0.2, tau: float = 0.2,
                 sigma: float | None = None, min_run: int = 1) -> None:
        if not 0 < threshold < 1 or not 0 < hazard < 1 or tau <= 0:
            raise ValueError(f"BOCPD: need threshold and hazard in (0, 1) and tau > 0; got "
                             f"{threshold}, {hazard}, {tau}")
        super().__init__()
        self.threshold, self.hazard, self.tau, self.sigma = threshold, hazard, tau, sigma
        self.min_run = min_run
        extra = "" if (hazard, min_run) == (0.2, 1) else f"-{hazard:g}"
        self.name = f"BOCPD-{threshold:g}{extra}" + ("" if min_run == 1 else f"-{min_run}")

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        sigma = self.noise_sigma(job.eval_scores)
        if sigma is None or len(job.eval_scores) < 3:
            return CONTINUE
        p = p_turned_down(job.eval_scores, sigma, self.hazard, self.tau, min_run=self.min_run)
        if p > self.threshold:
            return stop(f"P(mean turned down) = {p:.2f} > {self.threshold:g}")
        return CONTINUE


def _factory(args: list[str]) -> BOCPD:
    threshold = float(args[0]) if args else 0.5
    hazard = float(args[1]) if len(args) > 1 else 0.2
    return BOCPD(threshold, hazard, min_run=int(args[2]) if len(args) > 2 else 1)


register_detector("BOCPD", _factory)
