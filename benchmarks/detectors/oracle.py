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

With `threshold=None` it never stops and records each job's highest posterior (`peaks`): a job
would be stopped at threshold t exactly when its peak passes t (a stop changes only the job's
own later evals), so one run gives the oracle's recall at any false-positive rate
(`recall_at_fpr`), to compare a detector with the limit at the detector's own FPR.
"""

from __future__ import annotations

import math
from typing import Any

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

    def __init__(self, config: SimConfig, threshold: float | None = 0.95) -> None:
        if threshold is not None and not 0.0 < threshold < 1.0:
            raise ValueError(f"BayesOracle: threshold must be in (0, 1) or None, got {threshold}")
        self.threshold = threshold
        self.name = "Oracle" if threshold is None else f"Oracle-{threshold:g}"
        # job id -> (highest posterior at any eval, highest at an eval before completion)
        self.peaks: dict[int, tuple[float, float]] = {}
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
        if self.threshold is None:
            peak, early = self.peaks.get(job.job_id, (0.0, 0.0))
            self.peaks[job.job_id] = (max(peak, post),
                                      max(early, post) if job.progress < 1.0 else early)
            return CONTINUE
        if post > self.threshold:
            return stop(f"oracle: P(hacking) {post:.3f} past {self.threshold:g}")
        return CONTINUE


def recall_at_fpr(healthy: np.ndarray, hacking: np.ndarray, fpr: float) -> tuple[float, float]:
    """(threshold, recall) of the oracle whose false-positive rate is at most `fpr`: the
    threshold leaves at most floor(fpr * n) healthy peaks above it (`peaks` of healthy and of
    hacking jobs, pooled over seeds)."""
    healthy, hacking = np.sort(np.asarray(healthy, float))[::-1], np.asarray(hacking, float)
    allowed = int(math.floor(max(fpr, 0.0) * len(healthy) + 1e-9))
    threshold = float(healthy[allowed]) if allowed < len(healthy) else -math.inf
    recall = float(np.mean(hacking > threshold)) if len(hacking) else math.nan
    return threshold, recall


def oracle_peaks(config: SimConfig, base: str, seed: int) -> list[dict[str, Any]]:
    """Each RLHF job of one run with its peak posteriors (over the run, and before the job
    completed), the oracle watching over `base` and never stopping: a probe for
    `scoring.probes.run_probes`."""
    from evalstop_gym.policies import ComposedPolicy, make_base
    from evalstop_gym.simulate import simulate

    oracle = BayesOracle(config, threshold=None)
    result = simulate(config, ComposedPolicy(oracle, make_base(base)), seed)
    return [{"is_hacking": bool(r["is_hacking"]), "peak": oracle.peaks[r["job_id"]][0],
             "peak_early": oracle.peaks[r["job_id"]][1]}
            for r in result.records if r["job_id"] in oracle.peaks]
