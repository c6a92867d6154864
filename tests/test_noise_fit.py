"""The drift-noise fit: it recovers known parameters from simulated curves with a trend, its
model is the simulator's, it reads the design half only, and the shipped fit is what the command
writes."""

from __future__ import annotations

import argparse
import json

import numpy as np
import pytest

pytest.importorskip("threadpoolctl", reason="the fit needs the corpus extra")

from threadpoolctl import threadpool_limits  # noqa: E402

from evalstop_gym.benchmarks.corpus import build, noise_fit  # noqa: E402
from evalstop_gym.config import NoiseConfig  # noqa: E402
from evalstop_gym.sim.curves import eval_noise, saturating  # noqa: E402
from evalstop_gym.traces.public_runs import load_public, public_dir  # noqa: E402


def simulated_fit(share: float, scale: float, sd: float, seed: int, n_runs: int = 60) -> dict:
    """Fit of `n_runs` saturating curves (the simulator's ranges: gain 0.3-0.5, time constant
    0.2-3) of 25, 40 or 100 evals, with drift noise of sd `sd` x the run's gain."""
    rng = np.random.default_rng(seed)
    curves = []
    for i in range(n_runs):
        n = (25, 40, 100)[i % 3]
        p = np.arange(1, n + 1) / n
        gain = rng.uniform(0.3, 0.5)
        trend = saturating(p, rng.uniform(0.2, 0.35), gain, rng.uniform(0.2, 3.0))
        cfg = NoiseConfig(model="drift", sigma=sd * gain, drift_share=share, drift_scale=scale)
        curves.append(noise_fit.RunCurve(p, (trend + eval_noise(rng, (1, n), cfg, p)[0]) / gain))
    with threadpool_limits(1):
        return noise_fit.fit_curves(curves)


@pytest.mark.parametrize(("share", "scale", "sd", "seed"), [(0.5, 0.1, 0.1, 10),
                                                            (0.9, 0.2, 0.2, 11)])
def test_recovers_known_parameters_despite_the_trend(share, scale, sd, seed):
    """Tolerances cover the spread seen over seeds 10-12 and 20-25 (60 runs each: i.i.d. sd
    within 8%, sd 31%, share 0.21, time-scale a factor 2.5), with a margin: the i.i.d. part is
    the best determined, the time-scale the least (within one run a slow drift is told from the
    trend by its shape only)."""
    fit = simulated_fit(share, scale, sd, seed)
    assert fit["sigma_iid"] == pytest.approx(sd * np.sqrt(1 - share), rel=0.10)
    assert fit["sd"] == pytest.approx(sd, rel=0.35)
    assert fit["drift_share"] == pytest.approx(share, abs=0.25)
    assert scale / 3 <= fit["drift_scale"] <= scale * 3


def test_iid_noise_on_a_trend_is_not_read_as_drift():
    """Seeds 10-12 and 20-25: share at most 0.15."""
    fit = simulated_fit(0.0, 0.1, 0.1, seed=12)
    assert fit["drift_share"] < 0.2
    assert fit["sd"] == pytest.approx(0.1, rel=0.1)


def test_the_fitted_covariance_is_the_simulators():
    """The second differences of the simulator's drift noise (every 5%, 20000 jobs) have the
    covariance the likelihood assumes, to Monte Carlo error."""
    points = np.arange(1, 21) / 20
    cfg = NoiseConfig(model="drift", sigma=1.0, drift_share=0.7, drift_scale=0.15)
    d = np.diff(eval_noise(np.random.default_rng(5), (20_000, 20), cfg, points), 2, axis=1)
    expected = noise_fit.second_difference_cov(20, 0.05, 0.7, 0.15)
    np.testing.assert_allclose(np.cov(d, rowvar=False), expected, atol=0.1)


def test_the_shipped_fit_is_what_the_command_writes(tmp_path):
    """Recomputed from the shipped corpus (about 15 s): every figure equal to the written
    rounding (4 decimals), up to one unit of it for the optimiser's last step."""
    build.main(argparse.Namespace(action="noise-fit", out=tmp_path))
    fresh = json.loads((tmp_path / noise_fit.FILE_NAME).read_text())
    shipped = json.loads((public_dir() / noise_fit.FILE_NAME).read_text())
    assert fresh.keys() == shipped.keys() and fresh["skipped"] == shipped["skipped"]
    for kind, fit in shipped["kinds"].items():
        assert fresh["kinds"][kind]["n_runs"] == fit["n_runs"]
        for key in ("sd", "sigma_iid", "drift", "drift_share", "drift_scale"):
            assert fresh["kinds"][kind][key] == pytest.approx(fit[key], abs=2e-4), (kind, key)


def test_only_the_design_half_is_fitted():
    shipped = json.loads((public_dir() / noise_fit.FILE_NAME).read_text())
    design = {r.run_id for r in load_public() if r.split == "design"}
    skipped = {s["run_id"] for s in shipped["skipped"]}
    assert shipped["half"] == "design" and skipped <= design
    assert shipped["kinds"]["all"]["n_runs"] + len(skipped) == len(design)
    assert sum(f["n_runs"] for k, f in shipped["kinds"].items() if k != "all") == \
        shipped["kinds"]["all"]["n_runs"]


def test_a_run_with_uneven_evals_or_too_few_is_left_out_with_its_reason():
    p = np.array([0.1, 0.2, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 0.95, 1.0])
    assert "evenly" in noise_fit.usable(p, np.zeros(10))
    assert "evals" in noise_fit.usable(p[:5], np.zeros(5))
    assert noise_fit.usable(np.arange(1, 11) / 10, np.zeros(10)) is None


def test_the_fitted_cells_use_the_shipped_fit():
    """e7x's drift cells take the pooled fit's shape (e7x sweeps sigma), e9's its sigma too."""
    from evalstop_gym.experiment import load_experiment

    pooled = json.loads((public_dir() / noise_fit.FILE_NAME).read_text())["kinds"]["all"]
    fitted = pooled["simulator"]
    for name, keys in (("e7x", ("noise.drift_share", "noise.drift_scale")),
                       ("e9", ("noise.sigma", "noise.drift_share", "noise.drift_scale"))):
        cells = [c for c in load_experiment(name).cells
                 if c.overrides.get("noise.model") == "drift"]
        assert len(cells) >= 7, name
        for cell in cells:
            for key in keys:
                assert cell.overrides[key] == pytest.approx(fitted[key], abs=5e-4), (name, key)


def test_which_detector_simulates_the_shipped_fit():
    from evalstop_gym.benchmarks.detectors.which_detector import NOISES

    fitted = json.loads((public_dir() / noise_fit.FILE_NAME).read_text())["kinds"]["all"]
    assert NOISES["drift"] == pytest.approx(fitted["simulator"], abs=5e-4)


def test_the_docs_table_is_the_shipped_fit():
    """docs/noise.md's table of fitted values, row by row, to its 3 decimals."""
    from pathlib import Path

    page = (Path(__file__).resolve().parents[1] / "docs" / "noise.md").read_text()
    kinds = json.loads((public_dir() / noise_fit.FILE_NAME).read_text())["kinds"]
    rows = {}
    for line in page.splitlines():
        cells = [c.strip() for c in line.strip("|").split("|")]
        if cells[0] in kinds:
            rows[cells[0]] = cells
    assert rows.keys() == kinds.keys()
    for kind, fit in kinds.items():
        _, runs, sd, iid, drift, share, scale, sigma = rows[kind]
        assert int(runs) == fit["n_runs"]
        q1, q3 = fit["sd_quartiles"]
        assert sd == f"{fit['sd']:.3f} ({q1:.3f}-{q3:.3f})"
        assert [iid, drift, share, scale, sigma] == [
            f"{fit[k]:.3f}" for k in ("sigma_iid", "drift", "drift_share", "drift_scale")] + [
            f"{fit['simulator']['noise.sigma']:.3f}"]


def test_the_command_refuses_to_write_into_the_shipped_corpus(capsys):
    from evalstop_gym.benchmarks import cli

    assert cli.main(["corpus", "noise-fit", "--out", str(public_dir())]) == 2
    err = capsys.readouterr().err.strip()
    assert "inside the installed package" in err and "\n" not in err
