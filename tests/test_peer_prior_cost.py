"""PeerPrior's cost per finished run: the look-by-look replays (the hindsight label's TrendTest
reading, the conformal threshold's peaks) run from running sums, O(n) per run of n evals, and
decide exactly as the fresh read of every prefix they replaced."""

from __future__ import annotations

import dataclasses
import math

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st
from test_decline_test import first_stop, grid, view  # one copy of the replay helpers

from evalstop_gym.policies import ComposedPolicy, PeerPrior, SRTFEst, peer_prior, trend_test
from evalstop_gym.policies.peer_prior import Library, log_mean_exp, marginal_sigma
from evalstop_gym.policies.shape_fit import PrefixFit
from evalstop_gym.policies.trend_test import Evidence, Peers, trend_evidence, trend_replay


def naive_log_likelihoods(shapes: np.ndarray, scores: np.ndarray, sigma: float,
                          rho: float) -> np.ndarray:
    """The shape fit as first written: whiten both sides, centre, fit, O(n) per prefix."""
    def whiten(v: np.ndarray) -> np.ndarray:
        out = v.copy()
        out[..., 1:] -= rho * v[..., :-1]
        out[..., 0] *= math.sqrt(1.0 - rho * rho)
        return out
    n = scores.shape[0]
    c, zt, zy = whiten(np.ones(n)), whiten(shapes), whiten(scores)
    tc = zt - np.outer(zt @ c, c) / (c @ c)
    yc = zy - c * (zy @ c) / (c @ c)
    sxx = (tc * tc).sum(1)
    b = np.where(sxx > 0, np.maximum((tc @ yc) / np.where(sxx > 0, sxx, 1.0), 0.0), 0.0)
    rss = ((yc[None, :] - b[:, None] * tc) ** 2).sum(1)
    var = sigma * sigma * (1.0 - rho * rho) * (1.0 + b * b / 3.0)
    return -0.5 * rss / var - 0.5 * n * np.log(var)


class NaivePeerPrior(PeerPrior):
    """PeerPrior with its replays as first written: every prefix read afresh (O(n^2) per run)."""

    def naive_ratio(self, lib: Library, progress: np.ndarray, scores: np.ndarray, ev: Evidence,
                    leave_out: int | None = None) -> float:
        sigma = marginal_sigma(ev.sigma, ev.rho)
        decl = naive_log_likelihoods(lib.read(True, progress), scores, sigma, ev.rho)
        healthy = naive_log_likelihoods(lib.read(False, progress), scores, sigma, ev.rho)
        if leave_out is not None:
            healthy = np.delete(healthy, leave_out)
        return log_mean_exp(decl) - log_mean_exp(healthy)

    def replayed_peak(self, lib: Library, job_type: str, i: int) -> float:
        progress, scores = lib.healthy_runs[i]
        peak = -math.inf
        for n in range(4, len(scores) + 1):
            ev = trend_evidence(scores[:n], progress[:n], self.alpha, self.peers.get(job_type))
            if ev is not None and ev.p < ev.threshold:
                return math.inf
            if ev is not None and ev.p < self.alpha:
                peak = max(peak, self.naive_ratio(lib, progress[:n], scores[:n], ev, i))
        return peak

    def trend_would_stop(self, job_type: str, progress: np.ndarray, scores: np.ndarray) -> bool:
        return any((ev := trend_evidence(scores[:n], progress[:n], self.alpha,
                                         self.peers.get(job_type))) is not None
                   and ev.p < ev.threshold for n in range(4, len(scores) + 1))


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(4, 50), st.integers(1, 12),
       st.sampled_from([0.0, 0.3, 0.8]), st.sampled_from([0.0, 1.0, 1e3]))
def test_running_sums_fit_every_prefix_as_a_fresh_fit(seed: int, n: int, shapes: int, rho: float,
                                                      level: float) -> None:
    """Any shapes, any level, any rho: the fit from running sums is the fresh whitened fit."""
    rng = np.random.default_rng(seed)
    t = np.cumsum(rng.standard_normal((shapes, n)), 1) * rng.uniform(0.01, 1.0, (shapes, 1))
    y = level + np.cumsum(rng.standard_normal(n)) * 0.05
    fit = PrefixFit(t, y)
    for m in range(2, n + 1):
        fresh = naive_log_likelihoods(t[:, :m], y[:m], 0.05, rho)
        assert np.allclose(fit.log_likelihoods(m, 0.05, rho), fresh, rtol=1e-8, atol=1e-6)


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1), st.integers(4, 40), st.sampled_from(["grid", "steps", "late"]),
       st.booleans())
def test_the_replay_is_trend_tests_reading_of_every_prefix(seed: int, n: int, kind: str,
                                                           peers: bool) -> None:
    """Look by look, the folded replay gives TrendTest's evidence on each prefix read afresh:
    the same threshold and horizon, p to float rounding (progress usable or not)."""
    rng = np.random.default_rng(seed)
    scores = 0.3 + np.cumsum(rng.standard_normal(n)) * 0.02
    progress = {"grid": grid(n), "steps": np.arange(1.0, n + 1), "late": grid(n + 7)[:n]}[kind]
    group = None
    if peers:
        group = Peers()
        for _ in range(4):
            group.add(0.3 + 0.02 * rng.standard_normal(25))
    replay = dict(trend_replay(scores, progress, 0.05, group))
    assert sorted(replay) == list(range(4, n + 1))
    for m, ev in replay.items():
        fresh = trend_evidence(scores[:m], progress[:m], 0.05, group)
        assert (ev is None) == (fresh is None)
        if ev is not None:
            assert (ev.threshold, ev.looks) == (fresh.threshold, fresh.looks)
            assert math.isclose(ev.p, fresh.p, rel_tol=1e-9, abs_tol=1e-300)


def run(rng: np.random.Generator, n: int, declining: bool, rho: float = 0.0) -> np.ndarray:
    p = grid(n)
    peak = rng.uniform(0.4, 0.8)
    shape = (np.minimum(p / peak, 1.0) - rng.uniform(0.5, 2.0) * np.maximum(p - peak, 0.0)
             if declining else 1.0 - np.exp(-p / rng.uniform(0.2, 0.6)))
    e = rng.standard_normal(n)
    for i in range(1, n):
        e[i] = rho * e[i - 1] + math.sqrt(1.0 - rho * rho) * e[i]
    return rng.uniform(0.2, 0.4) + rng.uniform(0.2, 0.5) * shape + 0.03 * e


def test_the_replays_decide_as_fresh_reads_of_every_prefix() -> None:
    """Over a sequence of finished runs (i.i.d. and AR(1) noise, 6..40 evals): the same labels,
    the same conformal peaks and thresholds (to float rounding), and the same stops."""
    rng = np.random.default_rng(11)
    fast, slow = PeerPrior(0.05), NaivePeerPrior(0.05)
    for k in range(45):
        n, rho = int(rng.integers(6, 41)), (0.0, 0.5)[k % 2]
        scores = run(rng, n, declining=k % 3 == 0, rho=rho)
        job = dataclasses.replace(view(scores, grid(n)), state="completed")
        fast.on_job_end(job)
        slow.on_job_end(job)
    a, b = fast.libraries["rlhf"], slow.libraries["rlhf"]
    assert [len(v) for v in a.shapes.values()] == [len(v) for v in b.shapes.values()]
    assert len(a.healthy_runs) >= 19 and a.ready(0.05)
    peaks = [(fast.replayed_peak(a, "rlhf", i), slow.replayed_peak(b, "rlhf", i))
             for i in range(len(a.healthy_runs))]
    assert any(math.isfinite(x) for x, _ in peaks)
    for x, y in peaks:
        assert x == y or math.isclose(x, y, rel_tol=1e-9, abs_tol=1e-9)
    assert math.isclose(fast.threshold_for("rlhf"), slow.threshold_for("rlhf"), rel_tol=1e-9)
    for k in range(30):
        n = int(rng.integers(8, 40))
        scores = run(rng, n, declining=k % 2 == 0)
        assert first_stop(fast, scores, grid(n)) == first_stop(slow, scores, grid(n))


def test_a_simulated_run_decides_as_before() -> None:
    """E2 with evals every 5%: every job's stop (and so every metric) is unchanged."""
    from evalstop_gym.simulate import resolve_config, simulate

    config = resolve_config("e2", {"workload.n_jobs": 100, "evals.interval": 0.05})
    ours = simulate(config, ComposedPolicy(PeerPrior(0.05), SRTFEst()), 42)
    before = simulate(config, ComposedPolicy(NaivePeerPrior(0.05), SRTFEst()), 42)
    assert [r["stopped"] for r in ours.records] == [r["stopped"] for r in before.records]
    assert ours.metrics == before.metrics
    assert sum(r["stopped"] for r in ours.records) > 0


def finished_run_work(n: int, monkeypatch) -> int:
    """Work PeerPrior does for one more finished run of n evals once it has a library (the
    label's replay and a threshold's replay of every healthy peer): folded evals, windowed
    segment slopes and shape-fit reads (O(1), O(WINDOW) and O(shapes) each); a fresh read of a
    prefix (the O(n) per look that made the cost O(n^2)) counts its length. The calibrated
    threshold is held at a fixed level: its one-off simulation is no per-run cost."""
    count = [0]

    def counted(fn, cost):
        def wrapper(*args, **kwargs):
            count[0] += cost(*args)
            return fn(*args, **kwargs)
        return wrapper

    fit = peer_prior.PrefixFit
    with monkeypatch.context() as m:
        m.setattr(trend_test, "threshold", lambda looks, d0, alpha, noise="series": 1e-3)
        m.setattr(trend_test, "series_step", counted(trend_test.series_step, lambda *a: 1))
        m.setattr(trend_test, "loo_trend_t",
                  counted(trend_test.loo_trend_t, lambda v, *a: v.shape[1]))
        m.setattr(trend_test, "series_stats", counted(trend_test.series_stats, len))
        m.setattr(fit, "log_likelihoods",
                  counted(fit.log_likelihoods, lambda self, *a: len(self.t)))
        rng = np.random.default_rng(5)
        det = PeerPrior(0.05)
        for k in range(30):
            det.on_job_end(dataclasses.replace(view(run(rng, n, k % 3 == 0), grid(n)),
                                               state="completed"))
        lib = det.libraries["rlhf"]
        count[0] = 0
        det.on_job_end(dataclasses.replace(view(run(rng, n, True), grid(n)),
                                           state="completed"))
        for i in range(len(lib.healthy_runs)):
            det.replayed_peak(lib, "rlhf", i)
    return count[0]


def test_a_finished_run_costs_linear_work_in_its_evals(monkeypatch) -> None:
    """Sixteen times the evals, at most twice sixteen times the work (the gate opens at more
    of a longer run's looks); fresh reads of every prefix made it over 50 times."""
    small, large = finished_run_work(30, monkeypatch), finished_run_work(480, monkeypatch)
    assert small > 0 and large / small < 32
