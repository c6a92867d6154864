"""DeclineTest: its false-alarm budget on healthy runs at every eval density, and what it stops."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats

from evalstop_gym.policies import DeclineTest, SRTFEst, parse_policy
from evalstop_gym.policies.decline_test import decline_evidence
from evalstop_gym.sim.native_kernel import decline_critical
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

CLUSTER = ClusterView(now=0.0, total_gpus=8, free_gpus=0, n_waiting=0, n_running=1)


def view(scores, progress) -> SchedulerJobView:
    return SchedulerJobView(
        job_id=0, tenant=0, job_type="rlhf", gpus=4, arrival_time=0.0, state="running",
        progress=float(progress[-1]), loss=1.0, eval_progress=tuple(map(float, progress)),
        eval_scores=tuple(map(float, scores)), loss_history=(1.0,) * len(scores),
        duration_estimate=100.0, attained_minutes=0.0, n_preemptions=0)


def grid(n: int) -> np.ndarray:
    return np.arange(1, n + 1) / n


def first_stop(detector: DeclineTest, scores, progress) -> int | None:
    for n in range(1, len(scores) + 1):
        if detector.decide(view(scores[:n], progress[:n]), CLUSTER).stop:
            return n
    return None


def healthy_runs(rng: np.random.Generator, n_runs: int, n_evals: int) -> np.ndarray:
    """Flat, linearly rising and saturating true curves (never decreasing) + i.i.d. noise."""
    p = grid(n_evals)
    shape = rng.integers(0, 3, n_runs)[:, None]
    rise = np.where(shape == 0, 0.0, np.where(shape == 1, p, 1.0 - np.exp(-p / 0.3)))
    gain = rng.uniform(0.0, 0.4, (n_runs, 1))
    sigma = rng.uniform(0.005, 0.1, (n_runs, 1))
    return 0.3 + gain * rise + sigma * rng.standard_normal((n_runs, n_evals))


@pytest.mark.parametrize("alpha", [0.05, 0.2])
@pytest.mark.parametrize("n_evals,n_runs", [(5, 3000), (20, 1500), (100, 400)])
def test_false_stops_of_healthy_runs_stay_within_alpha(n_evals: int, n_runs: int,
                                                       alpha: float) -> None:
    """Over many seeds the false-stop rate is not significantly above alpha, whatever the
    number of evals (one-sided binomial test at the 1% level)."""
    rng = np.random.default_rng(1000 + n_evals)
    detector = DeclineTest(alpha)
    runs = healthy_runs(rng, n_runs, n_evals)
    stopped = sum(first_stop(detector, run, grid(n_evals)) is not None for run in runs)
    p = stats.binomtest(stopped, n_runs, alpha, alternative="greater").pvalue
    assert p > 0.01, f"{stopped}/{n_runs} healthy runs of {n_evals} evals stopped"


def test_budget_holds_without_progress() -> None:
    """With no usable progress (all 0) each look spends alpha / (m (m + 1)) instead."""
    rng = np.random.default_rng(7)
    detector = DeclineTest(0.2)
    stopped = sum(first_stop(detector, run, np.zeros(30)) is not None
                  for run in healthy_runs(rng, 600, 30))
    assert stats.binomtest(stopped, 600, 0.2, alternative="greater").pvalue > 0.01


def test_a_clear_sustained_decline_is_stopped_soon_after_the_peak() -> None:
    rng = np.random.default_rng(3)
    p = grid(40)
    true = 0.3 + 0.4 * np.minimum(p / 0.5, 1.0) - 0.6 * np.maximum(p - 0.5, 0.0)
    at = first_stop(DeclineTest(0.05), true + 0.01 * rng.standard_normal(40), p)
    assert at is not None and 20 < at <= 30
    decision = DeclineTest(0.05).decide(view(true[:at] + 0.0, p[:at]), CLUSTER)
    assert decision.stop and "alpha=0.05" in decision.reason


def test_one_bad_eval_does_not_stop_a_run() -> None:
    """A decline must hold for two evals: a single collapsed eval at the end is not one."""
    rng = np.random.default_rng(4)
    scores = 0.5 + 0.01 * rng.standard_normal(30)
    scores[-1] = 0.0
    assert first_stop(DeclineTest(0.05), scores, grid(30)) is None


def test_noise_is_estimated_from_the_run_and_ignores_a_linear_trend() -> None:
    rng = np.random.default_rng(5)
    noise = 0.03 * rng.standard_normal(200)
    flat = decline_evidence(0.5 + noise, grid(200), 0.05)
    rising = decline_evidence(0.2 + 0.6 * grid(200) + noise, grid(200), 0.05)
    assert flat is not None and rising is not None
    assert flat.sigma == pytest.approx(0.03, rel=0.15)
    assert rising.sigma == pytest.approx(flat.sigma, rel=1e-6)
    assert decline_evidence([0.5] * 10, grid(10), 0.05) is None   # no noise to measure


@pytest.mark.parametrize("nu", [1.5, 3.0, 9.5, 40.0])
@pytest.mark.parametrize("eps", [1e-2, 1e-4, 1e-6])
def test_critical_value_bounds_the_student_t_quantile(nu: float, eps: float) -> None:
    """The closed-form bound is valid (at or above the exact quantile) and, from 5 df, tight."""
    exact = stats.t.isf(eps, nu)
    got = decline_critical(eps, nu)
    assert got >= exact * (1 - 1e-9)
    if nu >= 5:
        assert got <= exact * 1.05
    assert math.isfinite(got)


def test_composes_over_a_base_and_parses_by_name() -> None:
    composed = DeclineTest(0.05) + SRTFEst()
    assert composed.name == "DeclineTest-0.05+SRTF-Est"
    assert parse_policy("DeclineTest-0.01+SRTF-Est").detector.alpha == 0.01
    with pytest.raises(ValueError, match="alpha must be in"):
        DeclineTest(1.5)


@pytest.mark.parametrize("max_steps", [400, None])
def test_runs_through_the_live_monitor_with_or_without_max_steps(max_steps) -> None:
    """RunMonitor feeds it a real run's evals; a falling loss curve (mode min) is stopped."""
    from evalstop_gym.online import RunMonitor

    rng = np.random.default_rng(8)
    p = grid(40)
    loss = 1.0 - 0.5 * np.minimum(p / 0.5, 1.0) + 0.8 * np.maximum(p - 0.5, 0.0)
    monitor = RunMonitor("DeclineTest-0.05", mode="min", max_steps=max_steps)
    decisions = [monitor.update(10 * (i + 1), float(v)).stop
                 for i, v in enumerate(loss + 0.01 * rng.standard_normal(40))]
    assert monitor.stopped and 20 < monitor.stop_index < 40 and decisions[-1]


def test_autocorrelated_noise_breaks_the_false_stop_budget_as_the_docstring_says():
    """decline_test.py: under AR(1) noise (rho 0.5) most flat runs of 100 evals are stopped,
    far above alpha; with independent noise almost none are."""
    from evalstop_gym.config import NoiseConfig
    from evalstop_gym.online import RunMonitor
    from evalstop_gym.sim.curves import eval_noise

    def stopped_share(cfg: NoiseConfig) -> float:
        noise = eval_noise(np.random.default_rng(7), (200, 100), cfg)
        stops = 0
        for row in noise:
            monitor = RunMonitor("DeclineTest-0.05", max_steps=100)
            for step, value in enumerate(0.5 + row, start=1):
                if monitor.update(step, float(value)).stop:
                    stops += 1
                    break
        return stops / len(noise)

    assert stopped_share(NoiseConfig(model="ar1", rho=0.5, sigma=0.05)) > 0.5
    assert stopped_share(NoiseConfig(model="gaussian", sigma=0.05)) < 0.05
