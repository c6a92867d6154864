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


def e2_runs() -> pd.DataFrame:
    runs = fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")], [0.0])
    runs["value"] = np.nan
    runs["recall"] = runs["precision"]   # the results figure's panels need recall too
    return runs


def test_e2_draws_fig2_from_a_synthetic_workload(small_config, tmp_path):
    paths = figures.experiment_figures("e2", e2_runs(), tmp_path, small_config)
    assert {"fig2_proxy_vs_world.png", "fig2_proxy_vs_world.pdf"} <= {p.name for p in paths}


def test_e2_on_corpus_curves_skips_fig2(small_config, tmp_path):
    """Corpus jobs have no closed-form true curves (curve_params index a corpus run), so
    `run e2 --set curves.source=corpus` must draw its results figure without Fig. 2."""
    config = small_config.with_overrides({"curves.source": "corpus"})
    paths = figures.experiment_figures("e2__curves.source=corpus", e2_runs(), tmp_path, config)
    assert_written(paths, ["results_e2__curves.source=corpus.png",
                           "results_e2__curves.source=corpus.pdf"])


def test_save_leaves_no_temp_file(tmp_path):
    fig, ax = figures.plt.subplots()
    ax.plot([0, 1], [0, 1])
    paths = figures.save(fig, tmp_path, "plot")
    assert_written(paths, ["plot.png", "plot.pdf"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png"]
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes()[:4] == b"%PDF"
