"""BOCPD: Bayesian online change-point detection (Adams & MacKay 2007) on a job's eval series.

Model: the eval series is piecewise constant in mean plus Normal noise of known sd `sigma`
(estimated by `PooledNoise` unless given); each segment's mean has a Normal prior N(mu0, tau^2);
change points arrive with a constant hazard. The recursion over run lengths is written out below;
the Normal densities are evaluated in closed form, the CDF by scipy.special.ndtr.

Units. `tau` is in units of the noise sd (tau * sigma in the metric's units; default 10, which is
the old fixed 0.2 at the benchmark's default noise 0.02) and mu0 is the mean of the job's evals,
so with the pooled noise estimate the detector is invariant to the metric's units and offset;
only an explicit `sigma` (score units) ties it to them.

Online definition. The posterior is filtered: the update at eval t uses mu0_t, the mean of the
evals up to t, and keeps per run length the segment's sum, so each eval costs O(MAX_RUN) and a
live run keeps the posterior across evals (`HistoryWindow.fold`) while sigma is unchanged (it is
fixed along a job while the pooled estimate is, see `noise_estimate`). Run lengths are truncated
at `MAX_RUN`: the mass of longer runs is dropped and the rest renormalised (a change more than
MAX_RUN evals back is not told apart from one exactly MAX_RUN back; with the default hazard 0.2
the prior odds of so long a run are below 1e-24).

Stop rule: with r the current run length (evals since the last change), the posterior that the
mean has turned down is sum over r < n of P(r | evals) * P(segment mean < pre-change level | r),
where the pre-change level is the mean of the (up to) `n_pre` evals just before the change and
the segment mean's posterior uses the latest mu0.
The job stops when that posterior exceeds `threshold` and the segment holds >= `min_run` evals.
Name: `BOCPD-<threshold>[-<hazard>[-<min_run>]]`, e.g. `BOCPD-0.5` (hazard 0.2, min_run 1).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np
from scipy.special import ndtr

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, FoldableHistory, SchedulerJobView

from .detector import stop
from .noise_estimate import NoiseScaledDetector
from .registry import register_detector

LOG_SQRT_2PI = 0.5 * np.log(2.0 * np.pi)
MAX_RUN = 256       # run lengths kept in the posterior (see the module docstring)


def norm_logpdf(x: float, mean: np.ndarray | float, sd: np.ndarray | float) -> np.ndarray:
    z = (x - mean) / sd
    return -0.5 * z * z - np.log(sd) - LOG_SQRT_2PI


class Posterior(NamedTuple):
    """The run-length posterior after n evals: log P(r) and the segment sum for r = 1..len."""

    log_r: np.ndarray
    sums: np.ndarray
    total: float        # sum of all n evals (mu0 = total / n)
    n: int


def posterior_step(sigma: float, hazard: float, tau: float):
    """The filtering update for fixed (sigma, hazard, tau), tau in score units."""
    log_h, log_1mh = np.log(hazard), np.log1p(-hazard)
    inv_t2, inv_s2 = 1.0 / tau**2, 1.0 / sigma**2

    def step(post: Posterior | None, x: float) -> Posterior:
        if post is None:                                   # after x[0]: run length 1, surely
            return Posterior(np.array([0.0]), np.array([x]), x, 1)
        total, n = post.total + x, post.n + 1
        mu0 = total / n
        prec = inv_t2 + np.arange(1, len(post.sums) + 1) * inv_s2
        mean = (mu0 * inv_t2 + post.sums * inv_s2) / prec
        grow = post.log_r + norm_logpdf(x, mean, np.sqrt(1.0 / prec + sigma**2)) + log_1mh
        new = (np.logaddexp.reduce(post.log_r) + log_h
               + norm_logpdf(x, mu0, np.sqrt(tau**2 + sigma**2)))
        log_r = np.concatenate([[new], grow])[:MAX_RUN]
        log_r -= np.logaddexp.reduce(log_r)
        sums = np.concatenate([[x], post.sums + x])[:MAX_RUN]
        return Posterior(log_r, sums, total, n)
    return step


def posterior(scores: Sequence[float], sigma: float, hazard: float,
              tau: float) -> Posterior | None:
    """The posterior after the last score (None before the first); a history that can `fold`
    (a live run's) keeps it between evals, so each eval is folded in once."""
    step = posterior_step(sigma, hazard, tau)
    if isinstance(scores, FoldableHistory):
        return scores.fold("BOCPD.posterior", (float(sigma), hazard, float(tau)), step, None)
    post: Posterior | None = None
    for x in scores:
        post = step(post, float(x))
    return post


def run_length_posterior(x: Sequence[float], sigma: float, hazard: float,
                         tau: float) -> np.ndarray:
    """P(run length = r | x) for r = 1..min(n, MAX_RUN) after the last eval (index r - 1)."""
    post = posterior(x, sigma, hazard, tau)
    return np.exp(post.log_r) if post is not None else np.empty(0)


def p_turned_down(scores: Sequence[float], sigma: float, hazard: float, tau: float,
                  n_pre: int = 2, min_run: int = 1) -> float:
    """Posterior mass on a change whose segment mean lies below the level just before it
    (`tau` in score units). Costs O(MAX_RUN) given the posterior."""
    n = len(scores)
    if n < 2:
        return 0.0
    post = posterior(scores, sigma, hazard, tau)
    assert post is not None                     # n >= 2
    r = np.arange(max(1, min_run), min(n - 1, len(post.sums)) + 1)
    if not len(r):
        return 0.0
    x = np.asarray(scores, dtype=float)
    mu0 = post.total / post.n
    pre_sum = np.zeros(len(r))
    pre_len = np.minimum(n_pre, n - r)
    for back in range(n_pre):                   # the evals just before each change point
        idx = n - r - 1 - back
        ok = back < pre_len
        pre_sum[ok] += x[idx[ok]]
    prec = 1.0 / tau**2 + r / sigma**2
    m_post = (mu0 / tau**2 + post.sums[r - 1] / sigma**2) / prec
    sd = np.sqrt(1.0 / prec + sigma**2 / pre_len)
    weights = np.exp(post.log_r[r - 1])
    return float(np.sum(weights * ndtr((pre_sum / pre_len - m_post) / sd)))


class BOCPD(NoiseScaledDetector):
    """BOCPD: Bayesian online change-point detection (Adams & MacKay 2007) on a job's evals.

    Models the evals as piecewise-constant means plus Normal noise and stops when the posterior
    that the current segment's mean lies below the level before the change exceeds `threshold`
    (the segment holding at least `min_run` evals); `hazard` is the prior rate of change points
    and `tau` the prior spread of a segment's mean, in noise sds (so the test is unit-free).
    The noise sd is `sigma` when given, else pooled from finished jobs. It assumes steps, not
    slopes, and Normal noise: a slow steady decline is seen late, heavy tails give false stops.
    Needs the evals (and ended runs, without `sigma`).
    Name: `BOCPD-<threshold>[-<hazard>[-<min_run>]]`.
    """

    def __init__(self, threshold: float = 0.5, hazard: float = 0.2, tau: float = 10.0,
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
        if not sigma or len(job.eval_scores) < 3:
            return CONTINUE
        p = p_turned_down(job.eval_scores, sigma, self.hazard, self.tau * sigma,
                          min_run=self.min_run)
        if p > self.threshold:
            return stop(f"P(mean turned down) = {p:.2f} > {self.threshold:g}")
        return CONTINUE


def _factory(args: list[str]) -> BOCPD:
    threshold = float(args[0]) if args else 0.5
    hazard = float(args[1]) if len(args) > 1 else 0.2
    return BOCPD(threshold, hazard, min_run=int(args[2]) if len(args) > 2 else 1)


register_detector("BOCPD", _factory)
