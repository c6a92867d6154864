"""PeerPrior: hindsight labels from whole curves, its fallback to TrendTest, false stops of
healthy runs within budget once it has learned from peers, and where peers come from."""

from __future__ import annotations

import dataclasses

import numpy as np
import pytest
from scipy import stats
from test_decline_test import first_stop, grid, view  # one copy of the replay helpers

from evalstop_gym.online import MonitorGroup
from evalstop_gym.policies import PeerPrior, TrendTest, make_detector
from evalstop_gym.policies.peer_prior import MIN_PEERS, hindsight_label

N = 20


def curve(rng: np.random.Generator, declining: bool) -> np.ndarray:
    """A rise to a plateau (healthy) or to a peak at 0.5..0.7 then a fall (declining), with
    random level, gain and i.i.d. noise 0.03."""
    p = grid(N)
    start, gain = rng.uniform(0.2, 0.35), rng.uniform(0.3, 0.5)
    if declining:
        peak = rng.uniform(0.5, 0.7)
        shape = np.minimum(p / peak, 1.0) - 1.5 * np.maximum(p - peak, 0.0)
    else:
        shape = 1.0 - np.exp(-p / rng.uniform(0.2, 0.6))
    return start + gain * shape + 0.03 * rng.standard_normal(N)


def ended(scores) -> object:
    return dataclasses.replace(view(scores, grid(len(scores))), state="completed")


def trained(n_healthy: int, n_declining: int, seed: int = 0) -> PeerPrior:
    rng = np.random.default_rng(seed)
    det = PeerPrior(0.05)
    for declining in [False] * n_healthy + [True] * n_declining:
        det.on_job_end(ended(curve(rng, declining)))
    return det


def test_hindsight_labels_read_the_whole_curve_only() -> None:
    rng = np.random.default_rng(1)
    assert all(hindsight_label(curve(rng, True), 0.03) for _ in range(20))
    assert not any(hindsight_label(curve(rng, False), 0.03) for _ in range(20))


def test_it_falls_back_to_trend_test_until_it_has_peers_of_both_labels() -> None:
    det = trained(30, MIN_PEERS - 1)
    assert not det.libraries["rlhf"].ready(0.05)
    ref = TrendTest(0.05)
    ref.peers = det.peers      # the same noise prior, learned from the same peers
    rng = np.random.default_rng(2)
    for _ in range(10):
        run = curve(rng, True)
        assert det.log_ratio(view(run, grid(N))) is None
        assert first_stop(det, run, grid(N)) == first_stop(ref, run, grid(N))


def test_false_stops_of_healthy_runs_stay_within_budget_once_learned() -> None:
    """Healthy runs like the healthy peers are stopped at most alpha of the time (one-sided
    binomial test at 1e-3), and most declining runs are stopped."""
    det = trained(40, 30)
    assert det.libraries["rlhf"].ready(0.05)
    rng = np.random.default_rng(3)
    healthy = sum(first_stop(det, curve(rng, False), grid(N)) is not None for _ in range(300))
    assert stats.binomtest(healthy, 300, 0.05, alternative="greater").pvalue > 1e-3
    caught = sum(first_stop(det, curve(rng, True), grid(N)) is not None for _ in range(60))
    assert caught >= 45


def test_partial_curves_teach_the_noise_but_not_the_shapes() -> None:
    det = trained(0, 0)
    rng = np.random.default_rng(4)
    det.on_job_end(dataclasses.replace(view(curve(rng, True)[:10], grid(N)[:10]),
                                       state="stopped"))
    assert "rlhf" not in det.libraries and len(det.peers["rlhf"].d2) == 8


def test_a_run_cut_short_joins_the_declining_shapes_only_when_it_declines() -> None:
    """Stopped runs are how most declines end; without them the library would hold only the
    declines that were missed. A cut-short run that has not fallen says nothing of its end."""
    det = trained(0, 0)
    p = grid(N)[:16]
    fall = 0.3 + 0.4 * np.minimum(p / 0.4, 1.0) - 0.8 * np.maximum(p - 0.4, 0.0)
    rise = 0.3 + 0.4 * p
    for scores in (fall, rise):
        det.on_job_end(dataclasses.replace(view(scores, p), state="stopped"))
    shapes = det.libraries["rlhf"].shapes
    assert len(shapes[True]) == 1 and shapes[False] == []


def test_it_waits_for_enough_healthy_peers_for_a_conformal_threshold() -> None:
    """k = floor(alpha (m + 1)) >= 1 needs 19 healthy peers at alpha 0.05: before, TrendTest."""
    assert not trained(18, 10).libraries["rlhf"].ready(0.05)
    assert trained(19, 10).libraries["rlhf"].ready(0.05)


def test_it_never_stops_a_run_that_has_not_fallen_from_its_best() -> None:
    """The gate: a run that keeps rising (steeply, like the declining peers' rise) or holds its
    best is not stopped however its shape compares; every stop comes with the run's own
    decline (TrendTest's per-look p below alpha)."""
    det = trained(40, 30)
    rng = np.random.default_rng(6)
    p = grid(N)
    for _ in range(100):
        run = 0.3 + 0.4 * np.minimum(p / rng.uniform(0.3, 0.6), 1.0) + 0.005 * np.sin(9 * p)
        assert first_stop(det, run, p) is None
    for _ in range(50):
        run = curve(rng, True)
        at = first_stop(det, run, p)
        if at is not None:
            assert det.evidence(view(run[:at], p[:at])).p < det.alpha


def test_it_learns_in_a_monitor_group_and_in_the_simulator(small_config) -> None:
    from evalstop_gym import simulate

    group = MonitorGroup("PeerPrior-0.05")
    rng = np.random.default_rng(5)
    for declining in [False, True] * 6:
        m = group.monitor(max_steps=N)
        for i, s in enumerate(curve(rng, declining)):
            m.update(i + 1, s)
        group.end_run(m, completed=True)
    assert all(len(v) >= MIN_PEERS for v in group.detector.libraries["rlhf"].shapes.values())
    a = simulate(small_config, "PeerPrior-0.05+SRTF-Est", seed=2)
    assert a.metrics == simulate(small_config, "PeerPrior-0.05+SRTF-Est", seed=2).metrics


def test_reset_forgets_the_library_and_bad_alpha_is_one_line() -> None:
    det = trained(10, 10)
    det.reset()
    assert det.libraries == {} and det.peers == {}
    with pytest.raises(ValueError, match="alpha must be in"):
        make_detector("PeerPrior-0")


def test_the_peers_only_add_to_trend_tests_stops() -> None:
    """Whatever TrendTest (with the same noise prior) stops, PeerPrior stops as early or
    earlier; and a finished run TrendTest would stop is labelled declining, never a healthy
    example for the conformal threshold."""
    det = trained(40, 30)
    ref = TrendTest(0.05)
    ref.peers = det.peers
    rng = np.random.default_rng(7)
    for _ in range(40):
        run = curve(rng, True)
        ours, theirs = first_stop(det, run, grid(N)), first_stop(ref, run, grid(N))
        assert theirs is None or (ours is not None and ours <= theirs)
    lib = det.libraries["rlhf"]
    assert not any(det.trend_would_stop("rlhf", p, s) for p, s in lib.healthy_runs)


def test_a_clear_decline_is_stopped_within_a_few_evals_of_its_fall() -> None:
    """Given enough peers of both kinds, a run shaped like the group's that peaks at 0.6 and
    falls by eight noise sd by its end is stopped within five evals of its peak; runs rising to a
    plateau, as the healthy peers do, are stopped about alpha of the time (here at most 2 of 20)."""
    det = trained(40, 30)
    rng = np.random.default_rng(9)
    p = grid(N)
    fall = 0.3 + 0.4 * (np.minimum(p / 0.6, 1.0) - 1.5 * np.maximum(p - 0.6, 0.0))
    for _ in range(10):
        at = first_stop(det, fall + 0.03 * rng.standard_normal(N), p)
        assert at is not None and at <= 12 + 5
    rise = 0.3 + 0.4 * (1.0 - np.exp(-p / 0.4))
    assert sum(first_stop(det, rise + 0.03 * rng.standard_normal(N), p) is not None
               for _ in range(20)) <= 2
