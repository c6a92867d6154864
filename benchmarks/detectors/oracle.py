"""BayesOracle: the limit a detector could reach if it knew the simulator's generative model.

An oracle, for benchmarking only: it reads the config (the curve families and their parameter
ranges, the hacking fraction, the noise model, sigma and rho), never a job's label or curve,
and is not registered as a detector a user could pick. After each eval of an RLHF job it
computes the posterior probability that the job hacks,

    P(hacking | s) = pi L_h / (pi L_h + (1 - pi) L_n),

where L_h and L_n average the likelihood of the evals seen over `DRAWS` parameter draws of each
family (Monte Carlo over the prior, a fixed seed), with the noise model's likelihood (i.i.d.
Gaussian, or AR(1) by prewhitening; Student-t is treated as Gaussian of the same variance), and
stops once it exceeds `threshold`. DPO and LoRA jobs never hack in the model, so it never stops
them. The clipping of scores to [0, 1] is ignored (rare at the default levels).
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from evalstop_gym.config import SimConfig
from evalstop_gym.policies.detector import DetectorBase, stop
from evalstop_gym.sim.curves import gao_hacking, saturating
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

DRAWS = 4000
SEED = 20_261_202


class BayesOracle(DetectorBase):
    """Stops an RLHF job when P(hacking | its evals) under the config's model passes threshold."""

    types = ("rlhf",)
    needs = ("evals", "progress")

    def __init__(self, config: SimConfig, threshold: float = 0.95) -> None:
        if not 0.0 < threshold < 1.0:
            raise ValueError(f"BayesOracle: threshold must be in (0, 1), got {threshold}")
        self.threshold = threshold
        self.name = f"Oracle-{threshold:g}"
        self.prior = config.workload.hacking_fraction
        noise = config.noise
        self.sigma = noise.sigma
        self.rho = noise.rho if noise.model == "ar1" else 0.0
        rng = np.random.default_rng(SEED)
        curves = config.curves
        self.hacking = [rng.uniform(*r, DRAWS) for r in (
            curves.rlhf_hacking.start, curves.rlhf_hacking.gain,
            curves.rlhf_hacking.peak_progress, curves.rlhf_hacking.collapse)]
        self.healthy = [rng.uniform(*r, DRAWS) for r in (
            curves.rlhf_healthy.start, curves.rlhf_healthy.gain,
            curves.rlhf_healthy.time_constant)]
        self._curves: dict[bytes, tuple[np.ndarray, np.ndarray]] = {}

    def curves(self, progress: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """The draws' true curves at `progress` (draws x evals), hacking then healthy."""
        key = progress.tobytes()
        if key not in self._curves:
            p = progress[None, :]
            # the curve functions broadcast: one row per parameter draw
            h = gao_hacking(p, *(v[:, None] for v in self.hacking))  # type: ignore[arg-type]
            n = saturating(p, *(v[:, None] for v in self.healthy))  # type: ignore[arg-type]
            self._curves[key] = (h, n)
        return self._curves[key]

    def log_likelihoods(self, curves: np.ndarray, scores: np.ndarray) -> np.ndarray:
        """Per draw, the log likelihood of `scores` (AR(1)-prewhitened when rho > 0)."""
        r = scores[None, :] - curves
        rho, var = self.rho, self.sigma**2 * (1.0 - self.rho**2)
        w = r.copy()
        w[:, 1:] -= rho * r[:, :-1]
        w[:, 0] *= math.sqrt(1.0 - rho * rho)
        return -0.5 * (w * w).sum(1) / var

    def posterior(self, job: SchedulerJobView) -> float:
        progress = np.asarray(job.eval_progress, dtype=float)
        scores = np.asarray(job.eval_scores, dtype=float)
        h, n = self.curves(progress)
        lh = logsumexp(self.log_likelihoods(h, scores))
        ln = logsumexp(self.log_likelihoods(n, scores))
        log_odds = math.log(self.prior / (1.0 - self.prior)) + lh - ln
        return 1.0 / (1.0 + math.exp(-min(max(log_odds, -700.0), 700.0)))

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if not job.eval_scores:
            return CONTINUE
        post = self.posterior(job)
        if post > self.threshold:
            return stop(f"oracle: P(hacking) {post:.3f} past {self.threshold:g}")
        return CONTINUE
