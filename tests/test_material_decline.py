"""MaterialDecline: its false-alarm budget over flat, plateauing and smoothly drifting healthy
curves, what it stops, units invariance, peers that cannot poison a run, and its reason text."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats
from test_decline_test import first_stop, grid

from evalstop_gym.online import MonitorGroup, RunMonitor
from evalstop_gym.policies import make_detector, parse_policy
from evalstop_gym.policies.material_decline import (
    LAG_RATIO_SD,
    RHO_PAIRS,
    MaterialDecline,
    fall_since_best,
    is_material,
    is_smooth,
)
from evalstop_gym.policies.trend_test import lag_moments


def healthy_runs(rng: np.random.Generator, n_runs: int, n_evals: int, shape: str) -> np.ndarray:
    """Healthy true curves + i.i.d. noise: flat; a rise to a plateau; or a rise whose plateau
    drifts smoothly (a slow wave 4% of the gain from crest to trough); or ("ar1") a plateau
    under AR(1) noise, rho 0.5."""
    p = grid(n_evals)
    knee = rng.uniform(0.1, 0.9, (n_runs, 1))
    gain = rng.uniform(0.05, 0.4, (n_runs, 1))
    sigma = rng.uniform(0.002, 0.05, (n_runs, 1))
    noise = rng.standard_normal((n_runs, n_evals))
    if shape == "flat":
        return 0.3 + sigma * noise
    true = 0.3 + gain * np.minimum(p / knee, 1.0)
    if shape == "drift":
        phase = rng.uniform(0, 2 * np.pi, (n_runs, 1))
        true = true + 0.02 * gain * np.sin(2 * np.pi * p * 1.5 + phase) * (p > knee)
    if shape == "ar1":
        for i in range(1, n_evals):                       # AR(1) rho 0.5, unit variance
            noise[:, i] = 0.5 * noise[:, i - 1] + np.sqrt(0.75) * noise[:, i]
    return true + sigma * noise


@pytest.mark.parametrize("shape", ["flat", "plateau", "drift"])
@pytest.mark.parametrize("n_evals,n_runs", [(6, 1500), (20, 800), (100, 200)])
def test_false_stops_of_healthy_runs_stay_within_alpha(shape: str, n_evals: int,
                                                       n_runs: int) -> None:
    """Flat, plateauing and smoothly drifting healthy runs are stopped at most alpha of the
    time (one-sided binomial test at 1e-3), at every number of evals."""
    alpha = 0.05
    rng = np.random.default_rng(3000 + n_evals)
    detector = MaterialDecline(alpha)
    runs = healthy_runs(rng, n_runs, n_evals, shape)
    stopped = sum(first_stop(detector, run, grid(n_evals)) is not None for run in runs)
    p = stats.binomtest(stopped, n_runs, alpha, alternative="greater").pvalue
    assert p > 1e-3, f"{stopped}/{n_runs} {shape} runs of {n_evals} evals stopped"


def like_group(rng: np.random.Generator, n_runs: int, n_evals: int) -> np.ndarray:
    """Runs alike (one plateauing true curve, one noise sd) under independent AR(1) noise."""
    p = grid(n_evals)
    true = 0.3 + rng.uniform(0.05, 0.4) * np.minimum(p / rng.uniform(0.1, 0.9), 1.0)
    noise = rng.standard_normal((n_runs, n_evals))
    for i in range(1, n_evals):                           # AR(1) rho 0.5, unit variance
        noise[:, i] = 0.5 * noise[:, i - 1] + np.sqrt(0.75) * noise[:, i]
    return true + rng.uniform(0.002, 0.05) * noise


def test_under_autocorrelated_noise_like_peers_hold_the_budget() -> None:
    """AR(1) noise (rho 0.5) on plateauing runs of 40 evals, each judged with 30 ended like runs
    (the same curve and noise sd) as peers, enough triples for rho to be seen: stopped at most
    alpha of the time."""
    rng = np.random.default_rng(77)
    stopped = 0
    for _ in range(300):
        run, *peers = like_group(rng, 31, 40)
        detector = MaterialDecline(0.05)
        for peer in peers:
            detector.on_job_end(view_of(peer, "completed"))
        stopped += first_stop(detector, run, grid(40)) is not None
    assert stats.binomtest(stopped, 300, 0.05, alternative="greater").pvalue > 1e-3, stopped


def view_of(scores: np.ndarray, state: str):
    from test_decline_test import view

    return dataclasses.replace(view(scores, grid(len(scores))), state=state)


def real_decline(n_evals: int, seed: int, smooth: bool = False) -> np.ndarray:
    """A decline as real ones are: best at a third of the run, then a fall of a quarter of the
    gain by the end, about six noise sds (or a smooth one with little noise)."""
    p = grid(n_evals)
    true = 0.5 + 0.4 * (1 - np.exp(-p / 0.1)) - 0.1 * np.maximum(p - 1 / 3, 0) / (2 / 3)
    sigma = 0.002 if smooth else 0.1 / 6
    return true + sigma * np.random.default_rng(seed).standard_normal(n_evals)


@pytest.mark.parametrize("n_evals", [20, 36, 100])
@pytest.mark.parametrize("smooth", [False, True])
def test_it_stops_real_looking_declines_before_their_end(n_evals: int, smooth: bool) -> None:
    stops = [first_stop(MaterialDecline(0.05), real_decline(n_evals, s, smooth), grid(n_evals))
             for s in range(20)]
    early = sum(s is not None and s < n_evals for s in stops)
    assert early >= 14, stops


def test_a_lone_run_needs_four_evals_after_its_best() -> None:
    """The noise is read after the best: a lone run is never stopped before two second
    differences follow it, however steep its fall (its docstring's stated price)."""
    for after in range(1, 5):
        run = np.concatenate([np.linspace(0.2, 0.9, 6), 0.9 - 0.1 * np.arange(1, after + 1)])
        stop_at = first_stop(MaterialDecline(0.05), run, grid(len(run)))
        assert stop_at is None or stop_at - 6 >= 4, (after, stop_at)


def test_a_smooth_curve_is_told_from_autocorrelated_noise() -> None:
    """Second differences of a smooth curve correlate near +1; of AR(1) noise, at most -1/2."""
    p = grid(60)
    assert is_smooth(lag_moments(0.5 + 0.3 * np.sin(3 * p)))
    rng = np.random.default_rng(0)
    for rho in (0.0, 0.5, 0.9):
        noise = np.zeros(2000)
        for i in range(1, 2000):
            noise[i] = rho * noise[i - 1] + rng.standard_normal()
        assert not is_smooth(lag_moments(noise))


def test_rho_is_read_only_where_the_triples_can_see_it() -> None:
    """The lag ratio's sd under i.i.d. noise is LAG_RATIO_SD / sqrt(triples), as RHO_PAIRS
    assumes; a lone AR(1) run with fewer triples is judged with rho 0, whatever its lags say,
    and the same run among like ended runs (enough triples) with rho read."""
    rng = np.random.default_rng(5)
    for n in (64, 128):
        ratios = []
        for _ in range(1500):
            v, c1, c2, _count = lag_moments(rng.standard_normal(n))
            ratios.append((c1 - c2) / (v - c2))
        assert np.std(ratios) * np.sqrt(n - 4) == pytest.approx(LAG_RATIO_SD, rel=0.1), n
    noise = rng.standard_normal((31, 100))
    for i in range(1, 100):                                       # AR(1) rho 0.8
        noise[:, i] = 0.8 * noise[:, i - 1] + 0.6 * noise[:, i]
    runs = 0.3 + 0.2 * np.minimum(grid(100) / 0.3, 1.0) + 0.01 * noise
    run = runs[0]
    assert len(run) - 4 < RHO_PAIRS
    lone, _ = MaterialDecline(0.05).evidence(view_of(run, "running"))
    assert lone is not None and lone.rho == 0.0
    grouped = MaterialDecline(0.05)
    for peer in runs[1:]:
        grouped.on_job_end(view_of(peer, "completed"))
    ev, used = grouped.evidence(view_of(run, "running"))
    assert used > 0 and ev is not None and ev.rho > 0.0


def test_a_fall_must_be_a_tenth_of_the_gain_and_sustained() -> None:
    assert not is_material(fall_since_best([0.5, 0.9, 0.89, 0.88, 0.87]))     # 2.5% of gain
    assert not is_material(fall_since_best([0.5, 0.9, 0.8]))                  # one eval after
    assert is_material(fall_since_best([0.5, 0.9, 0.85, 0.84, 0.83]))


@pytest.mark.parametrize("scale,offset", [(1e-6, 0.0), (1e3, -7.0), (1e150, 0.0),
                                          (1e-150, 3e-150)])
def test_decisions_do_not_depend_on_the_metrics_units(scale: float, offset: float) -> None:
    for seed in range(5):
        run = real_decline(30, seed)
        assert first_stop(MaterialDecline(0.05), run * scale + offset, grid(30)) == \
            first_stop(MaterialDecline(0.05), run, grid(30))


def unrelated_runs(rng: np.random.Generator, n: int) -> list[np.ndarray]:
    """Runs of other metrics: scales from 1e-4 to 1e4 (never within 10x of the run's noise),
    other noise, other lengths, some smooth, some declining."""
    runs = []
    for i in range(n):
        scale = 10.0 ** rng.choice([-4, -3, -2, 2, 3, 4])
        m = int(rng.integers(8, 200))
        p = grid(m)
        curve = np.sin(rng.uniform(1, 6) * p) if i % 3 else -p
        runs.append(scale * (curve + rng.uniform(0, 0.3) * rng.standard_normal(m)))
    return runs


def test_unrelated_peers_do_not_change_a_runs_decisions() -> None:
    """A run in a group with 30 ended unrelated runs gets the decisions it gets alone."""
    rng = np.random.default_rng(5)
    for seed in range(6):
        run = real_decline(40, seed) if seed % 2 else healthy_runs(rng, 1, 40, "drift")[0]
        alone = RunMonitor("MaterialDecline-0.05", max_steps=40)
        group = MonitorGroup("MaterialDecline-0.05")
        for peer in unrelated_runs(rng, 30):
            m = group.monitor(max_steps=len(peer))
            for i, x in enumerate(peer):
                m.update(i + 1, float(x))
            group.end_run(m)
        grouped = group.monitor(max_steps=40)
        a = [alone.update(i + 1, float(x)).stop for i, x in enumerate(run)]
        b = [grouped.update(i + 1, float(x)).stop for i, x in enumerate(run)]
        assert a == b and alone.reason == grouped.reason
        assert "like ended runs" not in grouped.reason


def test_like_peers_lend_their_noise_and_the_reason_says_so() -> None:
    group = MonitorGroup("MaterialDecline-0.05")
    p = grid(40)
    for seed in range(10):     # earlier runs of the sweep: the same metric, scale and noise
        m = group.monitor(max_steps=40)
        for i, x in enumerate(0.5 + 0.4 * (1 - np.exp(-p / 0.1)) + 0.1 / 6 *
                              np.random.default_rng(seed).standard_normal(40)):
            m.update(i + 1, float(x))
        group.end_run(m)
    run = group.monitor(max_steps=40)
    for i, x in enumerate(real_decline(40, 1)):
        if run.update(i + 1, float(x)).stop:
            break
    assert run.stopped and "noise also read from 10 like ended runs" in run.reason


def test_the_reason_speaks_of_the_metric_and_the_promise() -> None:
    monitor = RunMonitor("MaterialDecline-0.05", max_steps=40)
    for i, x in enumerate(real_decline(40, 3)):
        monitor.update(i + 1, float(x))
    assert monitor.stopped
    reason = monitor.reason
    assert "below its best (eval " in reason and "evals since" in reason
    assert "of what it had gained" in reason and "fewer than 5% of healthy runs" in reason
    healthy = RunMonitor("MaterialDecline-0.05", max_steps=40)
    for i, x in enumerate(healthy_runs(np.random.default_rng(1), 1, 40, "plateau")[0]):
        healthy.update(i + 1, float(x))
    assert not healthy.stopped and healthy.reason == ""


def test_it_runs_in_the_simulator_deterministically(small_config) -> None:
    from evalstop_gym import simulate

    a = simulate(small_config, "MaterialDecline-0.05+SRTF-Est", seed=3)
    b = simulate(small_config, parse_policy("MaterialDecline-0.05+SRTF-Est"), seed=3)
    assert a.metrics == b.metrics


def test_bad_alpha_is_one_line_naming_it() -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        make_detector("MaterialDecline-1.5")
