"""Where results go and how they read: a folder per --set variant, readable model labels, the
results figure and a terminal table that fits 100 columns."""

from __future__ import annotations

import pandas as pd
import pytest

from evalstop_gym.benchmarks import catalog, cli
from evalstop_gym.benchmarks.analysis import figures
from evalstop_gym.benchmarks.analysis.tables import terminal_table
from evalstop_gym.benchmarks.sweep.pipeline import prepare, variant

SMALL = {"workload.n_jobs": 20}


def test_no_overrides_keep_the_experiment_name():
    exp = prepare("e2")
    assert variant(exp, {}) is exp and variant(exp, None).name == "e2"


def test_a_variant_is_named_after_its_overrides_readably_and_safely():
    exp = prepare("e2", {"noise.sigma": 0.05, "workload.n_jobs": 20})
    named = variant(exp, {"noise.sigma": 0.05, "workload.n_jobs": 20})
    assert named.name == "e2__noise.sigma=0.05,workload.n_jobs=20"
    assert "[noise.sigma=0.05,workload.n_jobs=20]" in named.title
    odd = variant(exp, {"trace.start": "2017-11-07 00:00:00"}).name
    assert odd.startswith("e2__trace.start=2017-11-07_00_00_00~") and "/" not in odd
    other = variant(exp, {"trace.start": "2017-11-07_00:00:00"}).name
    assert odd != other, "names that sanitise alike still differ (hash)"
    long = variant(exp, {f"a.b{i}": i for i in range(40)}).name
    assert len(long) < 100


def test_model_cells_get_readable_labels(tmp_path):
    import gymnasium as gym
    from stable_baselines3 import PPO

    env = gym.make("EvalStopCluster-v0", config="e2", **SMALL)
    for folder in ("a", "b"):
        (tmp_path / folder).mkdir()
        PPO("MultiInputPolicy", env, n_steps=64, device="cpu").save(tmp_path / folder / "ppo.zip")
    one = prepare("e2", SMALL, [f"model:{tmp_path / 'a' / 'ppo.zip'}+SRTF-Est"])
    assert one.cells[-1].key == "ppo+SRTF-Est"
    two = prepare("e2", SMALL, [f"model:{tmp_path / f / 'ppo.zip'}+SRTF-Est" for f in "ab"])
    assert [c.key for c in two.cells[-2:]] == ["a.ppo+SRTF-Est", "b.ppo+SRTF-Est"]


def test_variants_on_one_out_keep_their_own_tables(tmp_path, capsys, monkeypatch):
    """Two --set variants and the plain experiment share --out: three folders, none overwritten;
    the plain one stays at OUT/e2 (where the report reads it); each prints a narrow table."""
    monkeypatch.setenv("EVALSTOP_ENGINE", "python")   # no kernel compile in this test
    out = tmp_path / "out"
    base = ["run", "e2", "--seeds", "1", "--out", str(out)]
    for extra in (["--set", "noise.sigma=0.05"], ["--set", "noise.sigma=0.01"], []):
        assert cli.main([*base, "--set", "workload.n_jobs=20", *extra]) == 0
    printed = capsys.readouterr().out
    folders = sorted(p.name for p in out.iterdir() if p.is_dir())
    assert folders == ["e2__noise.sigma=0.01,workload.n_jobs=20",
                       "e2__noise.sigma=0.05,workload.n_jobs=20", "e2__workload.n_jobs=20"]
    tables = [(out / f / "table.md").read_text() for f in folders]
    assert "noise.sigma=0.01" in tables[0] and "noise.sigma=0.05" in tables[1]
    assert len(set(tables)) == 3
    blocks = [b.split("\n\n")[0] for b in printed.split("\ncell ")[1:]]
    assert len(blocks) == 3 and all(len(b.splitlines()) == 11 for b in blocks)   # head + 10 cells
    assert max(len(line) for b in blocks for line in ("cell " + b).splitlines()) <= 100
    assert (out / folders[0] / f"results_{folders[0]}.png").stat().st_size > 1000
    runs = pd.read_csv(out / "runs.csv")
    assert set(runs["experiment"]) == set(folders)


def test_plain_run_keeps_todays_paths(tmp_path, monkeypatch):
    monkeypatch.setenv("EVALSTOP_ENGINE", "python")
    exp = prepare("e2", SMALL)
    assert variant(exp, {}).name == "e2"


def test_results_figure_for_experiments_without_a_sweep(tmp_path):
    runs = pd.DataFrame([{"cell": c, "seed": s, "value": float("nan"), "jct": 100.0 + s,
                          "wasted_frac": 0.1, "precision": 0.9, "recall": 0.5, "fpr": 0.0}
                         for c in ("SRTF-Est", "EvalStop-2+SRTF-Est") for s in (1, 2, 3)])
    paths = figures.results_figure(runs, tmp_path, "e2")
    assert sorted(p.name for p in paths) == ["results_e2.pdf", "results_e2.png"]
    assert all(p.stat().st_size > 1000 for p in paths)


def test_terminal_table_fits_100_columns_with_a_long_label():
    rows = [{"experiment": "x", "cell": name, "label": "", "policy": name, "base": "SRTF-Est",
             "detector": det, "param": "", "value": float("nan"), "seed": s,
             "jct": 1000.0 + 10 * s + i,
             "ttfuc": 1.0, "wasted_frac": 0.1, "saved_frac": 0.0, "precision": 0.8,
             "recall": 0.5, "fpr": 0.01, "fpr_all": 0.01, "jain": 0.9, "n_stopped": 3.0}
            for i, (name, det) in enumerate([("SRTF-Est", "none"),
                                             ("model:" + "x" * 120 + "+SRTF-Est", "m")])
            for s in (1, 2, 3)]
    text = terminal_table(pd.DataFrame(rows), {"base": "SRTF-Est", "detector": "none"}, False)
    lines = text.split("\n\n")[0].splitlines()   # the table; its FPR legend follows
    assert len(lines) == 3 and max(len(line) for line in text.splitlines()) <= 100
    assert "…" in lines[2] and "JCT" in lines[0] and "p" in lines[0].split()


@pytest.mark.parametrize("name", ["e5", "e6"])
def test_sweeps_draw_no_results_figure(name, tmp_path):
    runs = pd.DataFrame([{"cell": "a", "policy": "EvalStop-2+SRTF-Est", "detector": "EvalStop-2",
                          "seed": 1, "value": 0.1, "jct": 1.0, "wasted_frac": 0.1,
                          "saved_frac": 0.1, "n_stopped": 1.0, "fpr": 0.0, "precision": 1.0}])
    paths = catalog.experiment_figures(name, runs, tmp_path)
    assert paths and not any(p.name.startswith("results_") for p in paths)


def test_report_copies_the_papers_figures_not_a_variants(tmp_path):
    """A variant folder (OUT/e2__...) draws figures of the paper's names: the report copies only
    OUT/<matrix experiment>/ figures, so a variant never replaces the paper's."""
    from evalstop_gym.benchmarks.report import reproduction as report

    out = tmp_path / "results"
    for folder, data in (("e2", b"paper"), ("e2__noise.sigma=0.05", b"variant"),
                         ("e7x", b"beyond")):
        (out / folder).mkdir(parents=True)
        (out / folder / "fig2_proxy_vs_world.png").write_bytes(data)
    (out / "e5").mkdir()
    (out / "e5" / "fig3_k_sweep.png").write_bytes(b"k")
    lines = report.copy_figures(out, tmp_path)
    assert lines == ["![fig2_proxy_vs_world](figures/fig2_proxy_vs_world.png)",
                     "![fig3_k_sweep](figures/fig3_k_sweep.png)"]
    assert (tmp_path / "figures" / "fig2_proxy_vs_world.png").read_bytes() == b"paper"


def test_no_beyond_help_names_every_beyond_experiment():
    import argparse

    from evalstop_gym.benchmarks.report import reproduction as report

    parser = argparse.ArgumentParser()
    report.add_arguments(parser)
    text = " ".join(parser.format_help().split())
    assert all(name in text for name in report.BEYOND) and "e9" in text
