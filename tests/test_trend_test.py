"""TrendTest: its simulated false-alarm budget on healthy runs at 5..300 evals, what it stops,
units invariance, determinism, and that it runs in the simulator and through RunMonitor."""

from __future__ import annotations

import copy

import numpy as np
import pytest
from scipy import stats
from test_decline_test import first_stop, grid, view  # one copy of the replay helpers

from evalstop_gym.online import MonitorGroup, RunMonitor
from evalstop_gym.policies import make_detector, parse_policy
from evalstop_gym.policies.trend_null import (
    EXACT_LOOKS,
    PATHS,
    WINDOW,
    NullPaths,
    null_min_p,
    null_paths,
    threshold,
)
from evalstop_gym.policies.trend_test import (
    MIN_RHO_PAIRS,
    TrendTest,
    horizon,
    rho_from_lags,
    series_stats,
    trend_evidence,
)


def healthy_runs(rng: np.random.Generator, n_runs: int, n_evals: int) -> np.ndarray:
    """Flat, and rising-then-plateauing true curves (never decreasing) + i.i.d. Gaussian noise."""
    p = grid(n_evals)
    knee = rng.uniform(0.1, 0.9, (n_runs, 1))
    flat = rng.random((n_runs, 1)) < 0.5
    rise = np.where(flat, 0.0, np.minimum(p / knee, 1.0))
    gain = rng.uniform(0.0, 0.3, (n_runs, 1))
    sigma = rng.uniform(0.01, 0.1, (n_runs, 1))
    return 0.3 + gain * rise + sigma * rng.standard_normal((n_runs, n_evals))


def declining(n_evals: int, drop: float, sigma: float, seed: int) -> np.ndarray:
    p = grid(n_evals)
    rng = np.random.default_rng(seed)
    true = 0.3 + 0.4 * np.minimum(p / 0.5, 1.0) - drop * np.maximum(p - 0.5, 0.0) / 0.5
    return true + sigma * rng.standard_normal(n_evals)


@pytest.mark.parametrize("n_evals,n_runs", [(5, 2000), (20, 1000), (100, 200), (300, 80)])
def test_false_stops_of_healthy_runs_stay_within_alpha(n_evals: int, n_runs: int) -> None:
    """Flat and plateauing curves under i.i.d. noise are stopped at most alpha of the time, up
    to binomial sampling error (one-sided binomial test at 1e-3), at every number of evals."""
    alpha = 0.05
    rng = np.random.default_rng(7000 + n_evals)
    detector = TrendTest(alpha)
    runs = healthy_runs(rng, n_runs, n_evals)
    stopped = sum(first_stop(detector, run, grid(n_evals)) is not None for run in runs)
    p = stats.binomtest(stopped, n_runs, alpha, alternative="greater").pvalue
    assert p > 1e-3, f"{stopped}/{n_runs} healthy runs of {n_evals} evals stopped"


@pytest.mark.parametrize("shape", ["flat", "plateau"])
def test_false_stops_stay_within_alpha_over_2000_looks(shape: str) -> None:
    """Past the exact horizons (a union bound over blocks): fresh flat and rising-then-plateauing
    runs of 2000 evals (the detector's statistic, vectorised, on paths of another seed) are
    stopped at most alpha of the time, up to binomial sampling error."""
    alpha, looks, runs = 0.05, 2000, 1000
    rng = np.random.default_rng(11)
    knee, gain = rng.uniform(0.05, 0.9, runs), rng.uniform(0.0, 5.0, runs)
    mean = None if shape == "flat" else (lambda n: gain * np.minimum(n / looks / knee, 1.0))
    fresh = NullPaths(0, seed=424_242, paths=runs, max_looks=looks, mean=mean)
    fresh.extend(looks)
    stopped = int((fresh.min_p < threshold(looks, 0, alpha)).sum())
    assert stats.binomtest(stopped, runs, alpha, alternative="greater").pvalue > 1e-3, stopped


def test_the_vectorised_null_statistic_is_the_detectors() -> None:
    """What the calibration simulates is what the detector computes, look by look: equal while
    the run is too short to see rho, and after that the detector's AR(1) widening (which the
    i.i.d. calibration leaves out) only raises its p-values."""
    looks, runs, seen = 40, 30, MIN_RHO_PAIRS + 3      # rho_hat needs MIN_RHO_PAIRS triples
    y = np.array([np.random.default_rng([5, 0, n]).standard_normal(runs)
                  for n in range(1, looks + 1)]).T
    for last in (seen, looks):
        fresh = NullPaths(0, seed=5, paths=runs, max_looks=last)
        fresh.extend(last)
        for row, min_p in zip(y, fresh.min_p, strict=True):
            ps = [trend_evidence(row[:n], grid(looks)[:n], 0.05).p for n in range(4, last + 1)]
            if last == seen:
                assert min(ps) == pytest.approx(min_p, rel=1e-9)
            else:
                assert min(ps) >= min_p * (1.0 - 1e-9)


def test_calibration_cost_stops_growing_past_the_exact_horizons() -> None:
    """Thresholds for 1k..1M looks simulate no further than EXACT_LOOKS and keep PATHS x WINDOW
    evals; they fall with the looks (a longer life spends alpha more thinly), to 0 at most."""
    qs = [threshold(n, 0, 0.05) for n in (EXACT_LOOKS, 1_000, 10_000, 1_000_000)]
    null = null_paths(0, "series")
    assert null.looks == EXACT_LOOKS and null.last.shape == (PATHS, WINDOW)
    assert qs[0] > qs[1] > qs[2] >= qs[3] >= 0.0


def test_the_threshold_holds_the_budget_on_fresh_null_paths() -> None:
    """The simulated threshold, applied to null paths it was not read from, stops about alpha."""
    alpha, looks = 0.05, 12
    detector = TrendTest(alpha)
    rng = np.random.default_rng(99)
    runs = rng.standard_normal((2000, looks))
    stopped = sum(first_stop(detector, run, grid(looks)) is not None for run in runs)
    assert stats.binomtest(stopped, 2000, alpha, alternative="greater").pvalue > 1e-3
    assert stopped > 0.5 * alpha * 2000, "an exact threshold spends most of its budget"


@pytest.mark.parametrize("n_evals", [7, 20, 60])
def test_it_stops_clear_declines(n_evals: int) -> None:
    stops = [first_stop(TrendTest(0.05), declining(n_evals, 0.4, 0.03, s), grid(n_evals))
             for s in range(20)]
    assert sum(s is not None for s in stops) >= 18
    early = sum(s is not None and s <= n_evals // 2 for s in stops)
    assert early <= 2, "before the peak only as a false alarm within the budget"


def test_one_low_outlier_alone_never_stops() -> None:
    scores = np.linspace(0.3, 0.6, 20) + 0.01 * np.sin(np.arange(20))
    scores[-1] = 0.0
    assert first_stop(TrendTest(0.2), scores, grid(20)) is None


@pytest.mark.parametrize("scale", [0.01, 1.0, 1e4])
def test_decisions_do_not_depend_on_the_metrics_units(scale: float) -> None:
    runs = [declining(20, drop, 0.05, s) for s, drop in enumerate([0.0, 0.1, 0.2, 0.3, 0.4])]
    base = [first_stop(TrendTest(0.05), r, grid(20)) for r in runs]
    assert [first_stop(TrendTest(0.05), r * scale - 3.0, grid(20)) for r in runs] == base
    assert any(b is not None for b in base) and any(b is None for b in base)


def test_calibration_is_deterministic_and_memoised() -> None:
    a = null_min_p(9, 16)
    null_paths.cache_clear()
    b = null_min_p(9, 16)
    assert np.array_equal(a, b) and a is not b and null_min_p(9, 16) is b
    assert threshold(9, 16, 0.01) < threshold(9, 16, 0.05)


def test_the_horizon_is_read_off_progress_else_spent_over_epochs() -> None:
    assert horizon([0.15, 0.3, 0.45], 3, 0.05) == (7, 0.05)
    assert horizon([0.05 * i for i in range(1, 5)], 4, 0.05) == (20, 0.05)
    assert horizon([1.0, 2.0, 3.0, 4.0], 4, 0.05) == (8, 0.025)
    assert horizon(list(range(1, 21)), 20, 0.05) == (32, 0.05 / 8)


def test_a_live_run_folds_what_the_test_reads_of_its_history() -> None:
    """A RunMonitor's history keeps the series' statistics and the horizon between evals (O(1)
    per eval); they equal what a read of the whole series gives, at every eval."""
    from evalstop_gym.online import History

    rng = np.random.default_rng(8)
    scores, progress = History(), History()
    values = np.cumsum(rng.standard_normal(300)) * 0.01
    for i, v in enumerate(values):
        scores.append(float(v))
        progress.append((i + 1) / 300 if i != 150 else (i + 1) / 300 + 1e-9)
        live, whole = series_stats(scores.window()), series_stats(tuple(values[:i + 1]))
        assert live.best_at == whole.best_at
        assert live.ssq == pytest.approx(whole.ssq, rel=1e-9, abs=1e-15)
        assert np.allclose(live.lags, whole.lags, rtol=1e-9, atol=1e-15)
        n = i + 1
        assert horizon(progress.window(), n, 0.05) == horizon(tuple(progress.window()), n, 0.05)
    unknown = History()
    for _ in range(20):
        unknown.append(float("nan"))
    assert horizon(unknown.window(), 20, 0.05) == (32, 0.05 / 8)


def test_rho_is_recovered_from_the_lag_moments_of_second_differences() -> None:
    """Exact AR(1) moments give rho back; i.i.d. moments plus a curvature c^2 give 0."""
    assert rho_from_lags(2.5, -1.375, 0.0625) == pytest.approx(0.5, abs=0.01)
    assert rho_from_lags(6.0 + 0.3, -4.0 + 0.3, 1.0 + 0.3) == 0.0


def test_peers_shrink_the_noise_and_their_autocorrelation_widens_the_test() -> None:
    """With AR(1) peers the same run is judged more cautiously than with i.i.d. peers."""
    rng = np.random.default_rng(3)
    run = declining(20, 0.15, 0.03, 11)
    iid, ar = TrendTest(0.05), TrendTest(0.05)
    for _ in range(30):
        e = rng.standard_normal(20)
        iid.on_job_end(view(0.5 + 0.03 * e, grid(20)))
        z = np.zeros(20)
        for i in range(20):
            z[i] = 0.5 * z[i - 1] + np.sqrt(0.75) * e[i] if i else e[0]
        ar.on_job_end(view(0.5 + 0.03 * z, grid(20)))
    v = view(run, grid(20))
    assert iid.evidence(v).rho < 0.15 < ar.evidence(v).rho
    blind = copy.deepcopy(ar.peers["rlhf"])
    blind.lags[:] = 0.0               # the same noise prior, rho unseen
    unwidened = trend_evidence(v.eval_scores, v.eval_progress, 0.05, blind)
    assert ar.evidence(v).p > unwidened.p and ar.evidence(v).sigma == unwidened.sigma


def test_it_runs_in_the_simulator_deterministically(small_config) -> None:
    from evalstop_gym import simulate

    a = simulate(small_config, "TrendTest-0.05+SRTF-Est", seed=3)
    b = simulate(small_config, parse_policy("TrendTest-0.05+SRTF-Est"), seed=3)
    assert a.metrics == b.metrics


def test_it_runs_through_run_monitor_and_a_group() -> None:
    scores = declining(20, 0.4, 0.02, 5)
    monitor = RunMonitor("TrendTest-0.05", mode="max", max_steps=20)
    stops = [monitor.update(i + 1, s).stop for i, s in enumerate(scores)]
    assert any(stops) and stops.index(True) == first_stop(TrendTest(0.05), scores, grid(20)) - 1
    unknown_length = RunMonitor("TrendTest-0.05", mode="max")     # no max_steps: epochs
    assert not unknown_length.cannot_act()
    assert any(unknown_length.update(i + 1, s).stop for i, s in enumerate(scores))
    group = MonitorGroup("TrendTest-0.05")
    for seed in range(3):
        m = group.monitor(max_steps=20)
        for i, s in enumerate(declining(20, 0.0, 0.02, seed)):
            m.update(i + 1, s)
        group.end_run(m)
    assert sum(len(p.d2) for p in group.detector.peers.values()) == 3 * 18


def test_bad_alpha_is_one_line_naming_it() -> None:
    with pytest.raises(ValueError, match="alpha must be in"):
        make_detector("TrendTest-1.5")


def test_eval_stop_warns_once_past_the_papers_regime(caplog, monkeypatch) -> None:
    """EvalStop-k on more than 20 evals (where TrendTest is the advice): one warning per
    detector name in a process (a sweep builds one per run), one line; decisions unchanged."""
    import logging

    from evalstop_gym.policies import eval_stop

    monkeypatch.setattr(eval_stop, "WARNED", set())
    scores = [0.1 * (i % 3) for i in range(30)]
    with caplog.at_level(logging.WARNING, logger="evalstop_gym.policies.eval_stop"):
        decisions = []
        for _ in range(3):                          # three runs, as a sweep has
            monitor = RunMonitor("EvalStop-5", mode="max")
            decisions += [monitor.update(i, s).stop for i, s in enumerate(scores)]
    warned = [r for r in caplog.records if "paper's regime" in r.getMessage()]
    assert len(warned) == 1 and "\n" not in warned[0].getMessage()
    assert not any(decisions)


@pytest.mark.parametrize("name,alpha", [("TrendTest-1e-12", 1e-12), ("TrendTest-2.5E-3", 2.5e-3),
                                        ("TrendTest-0.000000000001", 1e-12),
                                        ("TrendTest-1e+2", None)])
def test_a_name_in_scientific_notation_parses_and_its_name_parses_back(name, alpha):
    """'TrendTest-1e-12' is alpha 1e-12, not the parameters '1e' and '12'; the detector's own
    name (which prints alpha with :g) parses back to the same detector."""
    from evalstop_gym.policies.registry import PolicyNameError

    if alpha is None:   # 1e+2 = 100 reads as a number: TrendTest judges it (alpha in (0, 1))
        with pytest.raises(PolicyNameError, match=r"^detector 'TrendTest-1e\+2': "):
            make_detector(name)
        return
    detector = make_detector(name)
    assert detector.alpha == alpha
    assert make_detector(detector.name).alpha == alpha
    assert RunMonitor(name, mode="max", max_steps=20).detector.name == detector.name
