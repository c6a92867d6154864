"""DeclineTest-<alpha>: stop a run on evidence of a sustained decline, with a false-alarm budget.

The test. After n evals s_1..s_n, for each block width w = 2, 4, 8, ... (2w <= n) it compares
the mean of the last w evals with the best mean of any earlier, non-overlapping block of w
consecutive evals (the blocks tile back from the latest one), in units of the noise of such a
difference, sigma * sqrt(2 / w):

    z_n = max over w and earlier blocks B of (mean(B) - mean(last w)) / (sigma_hat sqrt(2 / w)).

For w = 2 the latest level is the better of the last two evals (at or above their mean, so the
bound below still holds): one bad eval alone never decides; wider blocks dilute it w times.

The noise. sigma_hat comes from the run's own evals: the root mean square of their second
differences over sqrt 6 (for i.i.d. noise Var(s_i - 2 s_{i+1} + s_{i+2}) = 6 sigma^2). Second
differences cancel any locally linear trend, so a slow rise or drift does not inflate the noise;
curvature, jumps and outliers only inflate it, which makes the test more cautious, never less.
(A MAD is more robust but, on the few evals of a short run, underestimates the noise far too
often: the one error a false-alarm budget cannot absorb.)

The budget. Under the null "the true curve never decreases" with i.i.d. Gaussian noise, every
difference of an earlier block mean and a later one is at most zero in mean, so z_n is dominated
by its value on a flat curve; each comparison is then treated as a Student-t ratio whose degrees
of freedom nu_n are those of sigma_hat^2 (Satterthwaite's approximation, from the covariance of
second differences of i.i.d. noise).
Look n may spend eps_n = alpha * (p_n - p_{n-1}) of the budget (p: the eval's progress; the first
look tested spends all the progress so far), Bonferroni-split over its M_n comparisons, and the
critical value c_n is where the Student-t tail bound
P(T_nu > t) <= f_nu(t) (nu + t^2) / ((nu - 1) t) (f_nu: the t density) falls to eps_n / M_n.

The union bound over looks then gives P(a healthy run is ever stopped) <= alpha * p_last <= alpha
whatever the number of evals, as long as the eval schedule is fixed in advance. Without usable
progress (not increasing in (0, 1]) look m (counted from the first tested) spends
alpha / (m (m + 1)), which also sums to alpha.

Assumptions and where it breaks: eval noise independent from eval to eval and roughly Gaussian.
Positively autocorrelated noise (AR(1), a drifting eval set) makes second differences
underestimate the noise of a block mean, and false stops exceed alpha, the more so the more evals
a run has (at rho 0.5 most flat runs of 100 evals are stopped); heavy tails (Student-t with
few degrees of freedom) push single comparisons past the Gaussian bound, though the w = 2 rule
and an inflated sigma_hat soften it.
The test is conservative (the bound and Bonferroni are loose), so recall on a weak decline seen
through few evals is low: that is the price of a budget that holds at every eval density.
It needs nothing from other runs. Name: `DeclineTest-<alpha>`, e.g. `DeclineTest-0.05`.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, NamedTuple

import numpy as np

from evalstop_gym.sim import rules
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import RULE_DECLINE_TEST
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, monitored, stop
from .registry import register_detector

MIN_EVALS = 4   # two blocks of two evals, and two second differences for the noise


class Evidence(NamedTuple):
    """The test at one look: z_n, its critical value c_n and the noise estimate sigma_hat."""

    z: float
    critical: float
    sigma: float


def decline_evidence(scores: Sequence[float], progress: Sequence[float],
                     alpha: float) -> Evidence | None:
    """The test after the last of `scores` (evals at `progress`); None before MIN_EVALS or with
    no noise to measure (identical or perfectly linear evals).

    The arithmetic is `sim.rules.decline_evidence`, compiled (by numba on first use, so that
    importing the policies does not load numba) as the compiled engine runs it: its log and
    lgamma then agree with the engine's to the last bit, and so do the decisions.
    """

    if len(scores) < MIN_EVALS:
        return None
    evidence = rules.compiled(rules.decline_evidence)
    z, critical, sigma = evidence(np.asarray(scores, dtype=np.float64),
                                  np.asarray(progress, dtype=np.float64), len(scores), float(alpha))
    return None if sigma == 0.0 else Evidence(float(z), float(critical), float(sigma))


class DeclineTest(DetectorBase):
    """DeclineTest-alpha: stop on evidence of a sustained decline, with a false-alarm budget.

    Null: the run's true curve never decreases. Guarantee: under independent, roughly Gaussian
    eval noise such a run is stopped with probability at most `alpha` over its whole life,
    however many evals it has (the module docstring derives the bound). The noise is measured
    from the run's own evals, so it needs nothing from other runs. Where it breaks: positively
    autocorrelated noise (AR(1), a drifting eval set), under which false stops exceed alpha.
    Needs the evals (progress, when known, paces the budget). Name: `DeclineTest-<alpha>`.
    """
    needs = ("evals", "progress")

    def __init__(self, alpha: float = 0.05) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"DeclineTest: alpha must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self.name = f"DeclineTest-{alpha:g}"

    def native_rule(self) -> dict[str, Any] | None:
        return {"rule": RULE_DECLINE_TEST, "monitored": monitored(self.types),
                "threshold": self.alpha}

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        ev = decline_evidence(job.eval_scores, job.eval_progress, self.alpha)
        if ev is not None and ev.z > ev.critical:
            return stop(self.reason(job.job_type, ev.z))
        return CONTINUE

    def reason(self, job_type: str, z: float) -> str:
        return f"sustained eval decline: z {z:.2f} past the alpha={self.alpha:g} bound"


def _factory(args: list[str]) -> DeclineTest:
    return DeclineTest(float(args[0]) if args else 0.05)


register_detector("DeclineTest", _factory)
