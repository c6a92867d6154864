"""Eval noise models: same standard deviation for each, AR(1) correlation, Student-t tails."""

from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from evalstop_gym.config import ConfigError, NoiseConfig, load_sim_config
from evalstop_gym.sim.curves import eval_noise

SHAPE = (20_000, 7)


def noise(model: str, sigma: float = 0.05, seed: int = 0, **kw) -> np.ndarray:
    return eval_noise(np.random.default_rng(seed), SHAPE, NoiseConfig(model=model, sigma=sigma,
                                                                      **kw))


@pytest.mark.parametrize("model", ["gaussian", "student_t", "ar1"])
@pytest.mark.parametrize("sigma", [0.02, 0.1])
def test_each_model_has_std_sigma_at_every_eval(model, sigma):
    z = noise(model, sigma, df=5.0)
    assert z.shape == SHAPE
    assert np.abs(z.mean()) < 0.05 * sigma
    # every column (eval index), not just the pooled sample: AR(1) must start stationary
    np.testing.assert_allclose(z.std(axis=0), sigma, rtol=0.05)


@pytest.mark.parametrize("rho", [-0.5, 0.0, 0.5, 0.9])
def test_ar1_lag1_autocorrelation_matches_rho(rho):
    z = noise("ar1", rho=rho)
    r = stats.pearsonr(z[:, :-1].ravel(), z[:, 1:].ravel()).statistic
    assert r == pytest.approx(rho, abs=0.02)
    lag2 = stats.pearsonr(z[:, :-2].ravel(), z[:, 2:].ravel()).statistic
    assert lag2 == pytest.approx(rho**2, abs=0.02)


@pytest.mark.parametrize("model", ["gaussian", "student_t"])
def test_iid_models_are_uncorrelated_along_a_job(model):
    z = noise(model, df=5.0)
    assert abs(stats.pearsonr(z[:, :-1].ravel(), z[:, 1:].ravel()).statistic) < 0.02


def test_rows_are_independent_jobs():
    z = noise("ar1", rho=0.9)
    assert abs(stats.pearsonr(z[:-1, 0], z[1:, 0]).statistic) < 0.03


def test_gaussian_is_normal_and_student_t_has_heavier_tails():
    g, t = noise("gaussian").ravel(), noise("student_t", df=5.0).ravel()
    assert stats.kurtosis(g) == pytest.approx(0.0, abs=0.15)
    assert stats.kstest(g / 0.05, "norm").pvalue > 0.001
    assert stats.kurtosis(t) > 3.0                    # df = 5: excess kurtosis 6 in theory
    assert np.mean(np.abs(t) > 3 * 0.05) > 2 * np.mean(np.abs(g) > 3 * 0.05)
    scaled = t / 0.05 * np.sqrt(5.0 / 3.0)            # back to a standard t with 5 df
    assert stats.kstest(scaled, "t", args=(5.0,)).pvalue > 0.001


def test_same_seed_same_noise_and_zero_evals():
    np.testing.assert_array_equal(noise("ar1"), noise("ar1"))
    assert eval_noise(np.random.default_rng(0), (3, 0), NoiseConfig()).shape == (3, 0)


def test_noise_config_is_validated_by_field_name():
    with pytest.raises(ConfigError, match="noise.model"):
        load_sim_config(overrides={"noise.model": "laplace"})
    with pytest.raises(ConfigError, match="noise.df"):
        load_sim_config(overrides={"noise.df": 2.0})
    with pytest.raises(ConfigError, match="noise.rho"):
        load_sim_config(overrides={"noise.rho": 1.5})


def test_gao_faithful_platform_differs_from_defaults_only_in_collapse():
    from evalstop_gym.config import CONFIG_DIR, to_dict

    gao = load_sim_config(CONFIG_DIR / "gao_faithful.yaml")
    assert gao.curves.rlhf_hacking.collapse == (1.0, 1.0)
    default = load_sim_config().with_overrides({"curves.rlhf_hacking.collapse": [1.0, 1.0]})
    assert to_dict(gao) == to_dict(default)


def test_drop_to_noise_is_smaller_for_the_gao_faithful_family():
    from evalstop_gym.config import CONFIG_DIR
    from evalstop_gym.sim.workload import drop_to_noise

    paper = drop_to_noise(load_sim_config(overrides={"workload.n_jobs": 60}), [1, 2])
    gao = drop_to_noise(load_sim_config(CONFIG_DIR / "gao_faithful.yaml",
                                        {"workload.n_jobs": 60}), [1, 2])
    assert paper.n_hacking == gao.n_hacking > 0
    assert 0 < gao.peak_to_final < paper.peak_to_final
    assert 0 < gao.step < gao.peak_to_final
