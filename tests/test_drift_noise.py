"""The drift noise model: its variance and progress correlation as documented, the same drift at a
progress point whatever the eval density, and its config fields validated by name."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.config import ConfigError, NoiseConfig, load_sim_config
from evalstop_gym.sim.curves import eval_noise
from evalstop_gym.sim.workload import eval_points

N_JOBS = 20_000


def drift_noise(points: np.ndarray, seed: int = 0, sigma: float = 0.05, share: float = 0.6,
                scale: float = 0.1) -> np.ndarray:
    cfg = NoiseConfig(model="drift", sigma=sigma, drift_share=share, drift_scale=scale)
    return eval_noise(np.random.default_rng(seed), (N_JOBS, len(points)), cfg, points)


def lag_correlation(z: np.ndarray, k: int) -> float:
    """Mean over eval pairs k apart of their correlation across jobs."""
    return float(np.mean([np.corrcoef(z[:, i], z[:, i + k])[0, 1]
                          for i in range(z.shape[1] - k)]))


@pytest.mark.parametrize("sigma", [0.02, 0.1])
def test_every_eval_has_std_sigma(sigma):
    z = drift_noise(eval_points(0.05, True), sigma=sigma)
    assert np.abs(z.mean()) < 0.05 * sigma
    # every column, the first too: the drift starts stationary (20000 jobs: sd's SE 0.5%)
    np.testing.assert_allclose(z.std(axis=0), sigma, rtol=0.03)


@pytest.mark.parametrize(("share", "scale"), [(0.6, 0.1), (0.3, 0.25), (1.0, 0.05)])
def test_correlation_is_share_times_exp_of_progress_lag(share, scale):
    points = eval_points(0.05, True)
    z = drift_noise(points, share=share, scale=scale)
    for k in (1, 2, 4):
        expected = share * np.exp(-0.05 * k / scale)
        assert lag_correlation(z, k) == pytest.approx(expected, abs=0.02)


def test_correlation_depends_on_progress_lag_not_on_density():
    """A 0.1 progress lag is 2 evals apart at 5% and 5 apart at 2%: the same correlation."""
    coarse = drift_noise(eval_points(0.05, True), seed=1)
    fine = drift_noise(eval_points(0.02, True), seed=2)
    expected = 0.6 * np.exp(-1.0)
    assert lag_correlation(coarse, 2) == pytest.approx(expected, abs=0.02)
    assert lag_correlation(fine, 5) == pytest.approx(expected, abs=0.02)


def test_same_drift_at_a_progress_point_whatever_the_other_points():
    """Pure drift (share 1), one seed: every 10% sees exactly the values every 5% sees there,
    and so does an irregular schedule sharing some of the points."""
    every5, every10 = eval_points(0.05, True), eval_points(0.10, True)
    odd = np.array([0.013, 0.2, 0.37, 0.6, 1.0])
    a, b, c = (drift_noise(p, seed=3, share=1.0) for p in (every5, every10, odd))
    np.testing.assert_array_equal(a[:, 1::2], b)
    np.testing.assert_array_equal(c[:, [1, 3, 4]], a[:, [3, 11, 19]])


def test_drift_needs_the_eval_points():
    cfg = NoiseConfig(model="drift")
    with pytest.raises(ValueError, match="drift"):
        eval_noise(np.random.default_rng(0), (2, 3), cfg)


@pytest.mark.parametrize(("key", "value"), [("noise.drift_share", 1.5),
                                            ("noise.drift_share", -0.1),
                                            ("noise.drift_scale", 0.001),
                                            ("noise.drift_scale", float("nan"))])
def test_drift_fields_are_validated_by_name_and_range(key, value):
    with pytest.raises(ConfigError, match=key.replace(".", r"\.")) as err:
        load_sim_config(overrides={key: value})
    assert "\n" not in str(err.value)


def test_jobs_are_drawn_in_chunks_as_in_one_block():
    """Memory stays bounded for many jobs, and a job's noise does not depend on the chunking:
    the first jobs of a large run are those of a small one with the same seed."""
    from evalstop_gym.sim.drift import CHUNK_JOBS, progress_drift

    points = eval_points(0.1, True)
    big = progress_drift(np.random.default_rng(4), 2 * CHUNK_JOBS + 7, points, 0.1)
    one = np.random.default_rng(4).standard_normal((2 * CHUNK_JOBS + 7, 2401))
    assert big.shape == (2 * CHUNK_JOBS + 7, len(points))
    small = progress_drift(np.random.default_rng(4), CHUNK_JOBS - 1, points, 0.1)
    np.testing.assert_array_equal(big[:CHUNK_JOBS - 1], small)
    # the draws are the block's: the first node of every path is its first normal
    np.testing.assert_array_equal(progress_drift(np.random.default_rng(4), 2 * CHUNK_JOBS + 7,
                                                 np.array([0.0]), 0.1)[:, 0], one[:, 0])
