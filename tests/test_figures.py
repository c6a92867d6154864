"""Every figure is written as a non-empty PNG and PDF from runs data (Fig. 2: from a seed)."""

from __future__ import annotations

import itertools

import numpy as np
import pandas as pd
import pytest

from evalstop_gym.benchmarks import figures


def fake_runs(policies: list[tuple[str, str]], values: list[float]) -> pd.DataFrame:
    """A runs.csv-shaped frame with made-up metrics: figures must not need a simulation."""
    rng = np.random.default_rng(0)
    rows = []
    for (policy, detector), value, seed in itertools.product(policies, values, (1, 2)):
        rows.append({"experiment": "x", "cell": f"{policy}__v={value}", "policy": policy,
                     "base": "SRTF-Est", "detector": detector, "value": value, "seed": seed,
                     **{m: rng.random() for m in ("jct", "wasted_frac", "saved_frac",
                                                  "precision", "fpr", "n_stopped")}})
    return pd.DataFrame(rows)


def assert_written(paths, names):
    assert sorted(p.name for p in paths) == sorted(names)
    for p in paths:
        assert p.exists() and p.stat().st_size > 1000, p


def test_fig2_from_the_seeded_workload(small_config, tmp_path):
    paths = figures.fig2(small_config, 42, tmp_path)
    assert_written(paths, ["fig2_proxy_vs_world.png", "fig2_proxy_vs_world.pdf"])


def test_fig3_k_sweep(tmp_path):
    runs = pd.concat([fake_runs([("SRTF-Est", "none")], [0.0])] + [
        fake_runs([(f"EvalStop-{k}+SRTF-Est", f"EvalStop-{k}")], [float(k)]) for k in (1, 2, 3)])
    paths = figures.experiment_figures("e5", runs, tmp_path)
    assert_written(paths, ["fig3_k_sweep.png", "fig3_k_sweep.pdf"])


def test_fig4_eval_interval(tmp_path):
    runs = fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")],
                     [0.05, 0.15, 0.3])
    paths = figures.experiment_figures("e6", runs, tmp_path)
    assert_written(paths, ["fig4_eval_interval.png", "fig4_eval_interval.pdf"])


@pytest.mark.parametrize("exp,name", [("e7", "fig5a_precision_vs_sigma"),
                                      ("e8", "fig5b_precision_vs_base_rate")])
def test_fig5_precision(exp, name, tmp_path):
    runs = fake_runs([(p, p.split("+")[0]) for p in figures.DETECTORS], [0.2, 0.5, 0.8])
    paths = figures.experiment_figures(exp, runs, tmp_path)
    assert_written(paths, [f"{name}.png", f"{name}.pdf"])
