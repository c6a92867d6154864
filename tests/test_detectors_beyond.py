"""Patience, CUSUM, BOCPD and MedianPruner on hand-made eval sequences."""

from __future__ import annotations

import numpy as np
import pytest

import evalstop_gym.policies as policies
from evalstop_gym.policies.bocpd import BOCPD, p_turned_down, run_length_posterior
from evalstop_gym.policies.cusum import CUSUM, cusum_down
from evalstop_gym.policies.median_pruner import MedianPruner
from evalstop_gym.policies.noise_estimate import PooledNoise
from evalstop_gym.policies.patience import Patience, evals_without_improvement
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

CLUSTER = ClusterView(now=0.0, total_gpus=8, free_gpus=0, n_waiting=0, n_running=1)
GRID = (0.15, 0.30, 0.45, 0.60, 0.75, 0.90, 1.0)
SIGMA = 0.05


def view(scores, job_type: str = "rlhf", state: str = "running", job_id: int = 0):
    progress = GRID[: len(scores)]
    return SchedulerJobView(
        job_id=job_id, tenant=0, job_type=job_type, gpus=4, arrival_time=0.0, state=state,
        progress=progress[-1] if progress else 0.0, loss=1.0, eval_progress=tuple(progress),
        eval_scores=tuple(float(s) for s in scores), loss_history=(1.0,) * len(scores),
        duration_estimate=210.0, attained_minutes=0.0, n_preemptions=0)


def healthy(seed: int = 0, sigma: float = SIGMA) -> np.ndarray:
    """A slowly saturating rise (gain 0.4) plus Gaussian noise."""
    p = np.array(GRID)
    rng = np.random.default_rng(seed)
    return 0.3 + 0.4 * np.expm1(-p / 0.8) / np.expm1(-1 / 0.8) + sigma * rng.standard_normal(7)


DECLINE = np.array([0.45, 0.54, 0.61, 0.66, 0.55, 0.40, 0.25])   # peak at 0.60, then collapse


def first_stop(detector, scores, job_type: str = "rlhf") -> int | None:
    """Index of the eval at which `detector` first stops, or None."""
    for n in range(1, len(scores) + 1):
        if detector.decide(view(scores[:n], job_type), CLUSTER).stop:
            return n - 1
    return None


def warmed(detector, n_jobs: int = 10):
    """Feed finished noisy healthy jobs so pooled noise / peer history exist."""
    for i in range(n_jobs):
        detector.on_job_end(view(healthy(100 + i), state="completed", job_id=100 + i))
    return detector


# --------------------------------------------------------------------------- Patience

def test_patience_counter_matches_keras_semantics():
    """The best moves only on an improvement by more than min_delta."""
    assert evals_without_improvement([0.1, 0.2, 0.15, 0.18]) == 2
    assert evals_without_improvement([0.1, 0.2, 0.205, 0.21], min_delta=0.01) == 2
    assert evals_without_improvement([0.5]) == 0


def test_patience_stops_after_decline_not_on_rise():
    det = Patience(2)
    assert first_stop(det, DECLINE) == 5
    assert first_stop(det, np.linspace(0.3, 0.7, 7)) is None


def test_patience_ignores_lora_and_names():
    assert first_stop(Patience(1), DECLINE, job_type="lora") is None
    assert policies.make_detector("Patience-3").name == "Patience-3"
    assert policies.make_detector("Patience-3-0.01").name == "Patience-3-0.01"


# --------------------------------------------------------------------------- CUSUM

def test_cusum_statistic_is_drift_adjusted_drop():
    """With drift 0 the statistic is the largest drop to the latest eval, in scale units."""
    assert cusum_down([0.5, 0.6, 0.4], scale=0.1, drift=0.0) == pytest.approx(2.0)
    assert cusum_down([0.5, 0.6, 0.4], scale=0.1, drift=0.5) == pytest.approx(1.5)
    assert cusum_down([0.1, 0.2, 0.3], scale=0.1, drift=0.0) == 0.0


@pytest.mark.parametrize("seed", range(10))
def test_cusum_noisy_healthy_curve_does_not_trigger(seed):
    assert first_stop(warmed(CUSUM(0.0, 3)), healthy(seed)) is None


def test_cusum_stops_on_clear_decline():
    assert first_stop(warmed(CUSUM(0.0, 3)), DECLINE) in (5, 6)
    assert first_stop(CUSUM(0.0, 3, sigma=SIGMA), DECLINE) in (5, 6)


def test_cusum_waits_for_noise_estimate_and_reset_clears_it():
    det = CUSUM(0.0, 0.1)
    assert first_stop(det, [0.5, 0.4]) is None          # no estimate yet: never stops
    warmed(det)
    assert det.scale([]) is not None
    det.reset()
    assert det.scale([]) is None


def test_pooled_noise_recovers_sigma_of_iid_noise():
    rng = np.random.default_rng(1)
    pool = PooledNoise()
    for _ in range(200):
        pool.add(view(np.linspace(0.2, 0.7, 7) + 0.05 * rng.standard_normal(7), state="completed"))
    assert pool.sigma() == pytest.approx(0.05, rel=0.1)


# --------------------------------------------------------------------------- BOCPD

def test_run_length_posterior_is_a_distribution_and_sees_a_jump():
    x = np.array([0.5, 0.5, 0.5, 0.5, 0.1, 0.1])
    post = run_length_posterior(x, sigma=0.02, hazard=0.2, tau=0.2)
    assert post.sum() == pytest.approx(1.0)
    assert int(np.argmax(post)) + 1 == 2              # the change was two evals ago


def test_p_turned_down_separates_up_and_down():
    assert p_turned_down([0.3, 0.3, 0.6, 0.6], 0.02, 0.2, 0.2) < 0.01
    assert p_turned_down([0.6, 0.6, 0.3, 0.3], 0.02, 0.2, 0.2) > 0.99


@pytest.mark.parametrize("seed", range(10))
def test_bocpd_noisy_healthy_curve_does_not_trigger(seed):
    assert first_stop(warmed(BOCPD(0.5)), healthy(seed)) is None


def test_bocpd_stops_on_clear_decline():
    assert first_stop(warmed(BOCPD(0.5)), DECLINE) in (5, 6)
    assert first_stop(BOCPD(0.5, sigma=SIGMA), DECLINE) in (5, 6)
    assert policies.make_detector("BOCPD-0.7").name == "BOCPD-0.7"


# --------------------------------------------------------------------------- MedianPruner

def test_median_pruner_needs_warm_up_then_prunes_below_peers():
    det = MedianPruner(n_min=5)
    assert first_stop(det, DECLINE) is None            # no completed peers yet
    warmed(det, n_jobs=4)
    assert first_stop(det, DECLINE) is None            # 4 < n_min
    warmed(det, n_jobs=5)
    assert first_stop(det, DECLINE) == 4               # below healthy peers once it falls


def test_median_pruner_keeps_a_strong_healthy_curve_and_resets():
    det = warmed(MedianPruner())
    assert first_stop(det, healthy(7, sigma=0.01) + 0.1) is None
    det.reset()
    assert det.reference("rlhf", 0.9) is None


def test_median_pruner_learns_only_from_completed_jobs_of_the_same_type():
    det = MedianPruner(n_min=1)
    det.on_job_end(view(DECLINE, state="stopped"))
    det.on_job_end(view(DECLINE, job_type="dpo", state="completed"))
    assert det.reference("rlhf", 0.5) is None
    assert det.reference("dpo", 0.6) == pytest.approx(0.66)


# --------------------------------------------------------------------------- BEYOND.md analysis

def test_beyond_analysis_from_a_runs_frame(tmp_path):
    import pandas as pd

    from evalstop_gym.benchmarks.analysis import noise_sweep
    from evalstop_gym.benchmarks.analysis.beyond_figures import noise_figure

    rows = []
    for sigma in (0.05, 0.10):
        for seed in (1, 2):
            rows.append({"label": "SRTF-Est", "value": sigma, "seed": seed, "jct": 1000.0,
                         "precision": float("nan"), "recall": 0.0, "fpr": 0.0})
            for model in ("gaussian", "ar1"):
                for det, fpr, recall in (("CUSUM-0-3", 0.02, 0.85), ("Patience-3", 0.3, 0.9)):
                    rows.append({"label": f"{det}@{model}", "value": sigma, "seed": seed,
                                 "jct": 900.0, "precision": 0.9, "recall": recall, "fpr": fpr})
    summary = noise_sweep.summarise(pd.DataFrame(rows))
    assert summary["jct_gain"].round(6).eq(0.1).all()
    assert "CUSUM-0-3" in noise_sweep.beyond_table(summary)
    assert noise_sweep.bar_finding(summary).startswith("**Bar met**")
    assert noise_sweep.best_under_fpr(summary, "ar1", 0.10)["detector"] == "CUSUM-0-3"
    paths = noise_figure(summary, tmp_path)
    assert all(p.stat().st_size > 0 for p in paths)
