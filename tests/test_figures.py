"""Every figure is written as a non-empty PNG and PDF from runs data (Fig. 2: from a seed), in a
form a paper can use: TrueType fonts, column widths, 8-9 pt text, references and "n/a" marked."""

from __future__ import annotations

import itertools
import re

import matplotlib.pyplot as plt
import numpy as np
import pandas as pd
import pytest
from matplotlib.patches import Rectangle
from matplotlib.text import Text

from evalstop_gym.benchmarks import catalog
from evalstop_gym.benchmarks.analysis import beyond_figures, figures, noise_models
from evalstop_gym.benchmarks.analysis.figure_style import (
    NA_GID,
    REFERENCE_GID,
    ZERO_GID,
    pdf_font_subtypes,
)
from evalstop_gym.benchmarks.report import beyond


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
    paths = catalog.experiment_figures("e5", runs, tmp_path)
    assert_written(paths, ["fig3_k_sweep.png", "fig3_k_sweep.pdf"])


def test_fig4_eval_interval(tmp_path):
    runs = fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")],
                     [0.05, 0.15, 0.3])
    paths = catalog.experiment_figures("e6", runs, tmp_path)
    assert_written(paths, ["fig4_eval_interval.png", "fig4_eval_interval.pdf"])


@pytest.mark.parametrize("exp,name", [("e7", "fig5a_precision_vs_sigma"),
                                      ("e8", "fig5b_precision_vs_base_rate")])
def test_fig5_precision(exp, name, tmp_path):
    runs = fake_runs([(p, p.split("+")[0]) for p in figures.DETECTORS], [0.2, 0.5, 0.8])
    paths = catalog.experiment_figures(exp, runs, tmp_path)
    assert_written(paths, [f"{name}.png", f"{name}.pdf"])


def e2_runs() -> pd.DataFrame:
    runs = fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")], [0.0])
    runs["value"] = np.nan
    runs["recall"] = runs["precision"]   # the results figure's panels need recall too
    return runs


def test_e2_draws_fig2_from_a_synthetic_workload(small_config, tmp_path):
    paths = catalog.experiment_figures("e2", e2_runs(), tmp_path, small_config)
    assert {"fig2_proxy_vs_world.png", "fig2_proxy_vs_world.pdf"} <= {p.name for p in paths}


def test_e2_on_corpus_curves_skips_fig2(small_config, tmp_path):
    """Corpus jobs have no closed-form true curves (curve_params index a corpus run), so
    `run e2 --set curves.source=corpus` must draw its results figure without Fig. 2."""
    config = small_config.with_overrides({"curves.source": "corpus"})
    paths = catalog.experiment_figures("e2__curves.source=corpus", e2_runs(), tmp_path, config)
    assert_written(paths, ["results_e2__curves.source=corpus.png",
                           "results_e2__curves.source=corpus.pdf"])


def test_save_leaves_no_temp_file(tmp_path):
    fig, ax = figures.plt.subplots()
    ax.plot([0, 1], [0, 1])
    paths = figures.save(fig, tmp_path, "plot")
    assert_written(paths, ["plot.png", "plot.pdf"])
    assert sorted(p.name for p in tmp_path.iterdir()) == ["plot.pdf", "plot.png"]
    assert paths[0].read_bytes().startswith(b"\x89PNG") and paths[1].read_bytes()[:4] == b"%PDF"


def k_runs() -> pd.DataFrame:
    return pd.concat([fake_runs([("SRTF-Est", "none")], [0.0])] + [
        fake_runs([(f"EvalStop-{k}+SRTF-Est", f"EvalStop-{k}")], [float(k)]) for k in (1, 2, 3)])


def precision_runs() -> pd.DataFrame:
    return fake_runs([(p, p.split("+")[0]) for p in figures.DETECTORS], [0.2, 0.5, 0.8])


def noise_summary() -> pd.DataFrame:
    rows = [{"noise": n, "detector": d, "sigma": s, "precision": 0.5 + s, "fpr": s / 2}
            for n in noise_models.NOISE_MODELS for d in ("EvalStop-2", "CUSUM-0-3", "MedianPruner")
            for s in (0.05, 0.1)]
    return pd.DataFrame(rows)


def corpus_summary() -> pd.DataFrame:
    return pd.DataFrame([{"family": f, "detector": d, "evals": e, "false_stops": e / 100}
                         for f in ("supervised", "reward") for d in beyond.CORPUS_DETECTORS
                         for e in (7, 20, 60)])


E5_REF, E6_REF, E7_REF = ({"detector": "EvalStop-2"}, {"base": "SRTF-Est", "detector": "none"},
                          {"detector": "EvalStop-2"})
# every function that writes a figure, by the file it writes
WRITERS = {
    "fig2_proxy_vs_world": lambda cfg, d: figures.fig2(cfg, 42, d),
    "fig3_k_sweep": lambda cfg, d: figures.fig3(k_runs(), d, E5_REF),
    "fig4_eval_interval": lambda cfg, d: figures.fig4(
        fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")], [0.05, 0.3]),
        d, E6_REF),
    "fig5a_precision_vs_sigma": lambda cfg, d: catalog.CATALOG["e7"].figures(
        precision_runs(), d, E7_REF, cfg),
    "fig5b_precision_vs_base_rate": lambda cfg, d: catalog.CATALOG["e8"].figures(
        precision_runs(), d, E7_REF, cfg),
    "results_e2": lambda cfg, d: figures.results_figure(e2_runs(), d, "e2", E6_REF),
    "beyond_noise": lambda cfg, d: beyond_figures.noise_figure(noise_summary(), d),
    "beyond_corpus": lambda cfg, d: beyond_figures.corpus_figure(corpus_summary(), d),
}


def test_every_experiment_figure_is_checked():
    drawn = {"e2": "fig2_proxy_vs_world", "e5": "fig3_k_sweep", "e6": "fig4_eval_interval",
             "e7": "fig5a_precision_vs_sigma", "e8": "fig5b_precision_vs_base_rate"}
    with_figures = {n for n, e in catalog.CATALOG.items() if e.figures is not None}
    assert with_figures == set(drawn) and set(drawn.values()) <= set(WRITERS)


def pdf_width_inches(data: bytes) -> float:
    box = re.search(rb"/MediaBox\s*\[\s*0 0 ([\d.]+) ([\d.]+)\s*\]", data)
    assert box, "no MediaBox"
    return float(box.group(1)) / 72.0


@pytest.mark.parametrize("name", sorted(WRITERS))
def test_figure_pdf_is_fit_for_a_paper(name, small_config, tmp_path):
    """TrueType fonts (IEEE / ACM checks reject Type 3), a column or text width, and the same
    bytes from the same inputs."""
    paths = WRITERS[name](small_config, tmp_path / "a")
    assert_written(paths, [f"{name}.png", f"{name}.pdf"])
    pdf = tmp_path / "a" / f"{name}.pdf"
    fonts = pdf_font_subtypes(pdf)
    assert fonts and "Type3" not in fonts, fonts
    assert pdf_width_inches(pdf.read_bytes()) in (3.5, 7.0)
    again = WRITERS[name](small_config, tmp_path / "b")
    assert [p.read_bytes() for p in paths] == [p.read_bytes() for p in again]


DRAWERS = {
    "fig2": lambda cfg: figures.draw_fig2(cfg, 42),
    "fig3": lambda cfg: figures.draw_fig3(k_runs(), E5_REF),
    "fig4": lambda cfg: figures.draw_fig4(
        fake_runs([("SRTF-Est", "none"), ("EvalStop-2+SRTF-Est", "EvalStop-2")], [0.05, 0.3]),
        E6_REF),
    "fig5": lambda cfg: figures.draw_fig5(precision_runs(), "hacking base rate", True, E7_REF),
    "results": lambda cfg: figures.draw_results(e2_runs(), "e2", E6_REF),
    "beyond_noise": lambda cfg: beyond_figures.draw_noise(noise_summary()),
    "beyond_corpus": lambda cfg: beyond_figures.draw_corpus(corpus_summary()),
}


@pytest.fixture(params=sorted(DRAWERS))
def drawn(request, small_config):
    fig = DRAWERS[request.param](small_config)
    fig.canvas.draw()
    yield fig
    plt.close(fig)


def test_text_reads_at_100_percent_zoom_and_titles_carry_no_figure_number(drawn):
    assert drawn.get_size_inches()[0] in (3.5, 7.0)
    texts = [t for t in drawn.findobj(Text) if t.get_text().strip() and t.get_visible()]
    assert texts and all(8 <= t.get_fontsize() <= 9 for t in texts), \
        sorted({(t.get_text(), t.get_fontsize()) for t in texts})
    titles = [ax.get_title() for ax in drawn.axes] + [drawn.get_suptitle()]
    assert not [t for t in titles if re.search(r"\bFig\b", t)], titles


def bars_at(ax, y: float) -> list[Rectangle]:
    return [p for p in ax.patches if isinstance(p, Rectangle)
            and abs(p.get_y() + p.get_height() / 2 - y) < 1e-9]


def test_undefined_metric_reads_na_and_a_measured_zero_is_a_bar():
    runs = e2_runs()
    runs.loc[runs["policy"] == "SRTF-Est", "precision"] = np.nan   # no stops: undefined
    runs.loc[runs["policy"] != "SRTF-Est", "recall"] = 0.0         # stops, none caught: zero
    fig = figures.draw_results(runs, "e2")
    panels = {ax.get_title(): ax for ax in fig.axes}
    precision, recall = panels["precision (%)"], panels["recall (%)"]
    na = [t for t in precision.texts if t.get_gid() == NA_GID]
    assert [t.get_text().strip() for t in na] == ["n/a"] and na[0].get_position() == (0, 0)
    assert bars_at(precision, 0) == [] and len(bars_at(precision, 1)) == 1
    zero = bars_at(recall, 1)
    assert len(zero) == 1 and zero[0].get_width() == 0
    assert [t.get_text().strip() for t in recall.texts if t.get_gid() == ZERO_GID] == ["0"]
    assert not [t for t in recall.texts if t.get_gid() == NA_GID]
    plt.close(fig)


def gids(fig) -> list:
    return [a for a in fig.findobj() if a.get_gid() == REFERENCE_GID]


def test_results_figure_marks_the_reference_cell():
    fig = figures.draw_results(e2_runs(), "e2", E6_REF)
    jct = fig.axes[0]
    marked = [a for a in gids(fig) if a in bars_at(jct, 0)]
    assert len(marked) == 1 and marked[0].get_hatch()   # row 0 is SRTF-Est, the reference
    assert not [a for a in gids(fig) if a in bars_at(jct, 1)]
    plt.close(fig)
    unmarked = figures.draw_results(e2_runs(), "e2")
    assert gids(unmarked) == []
    plt.close(unmarked)


def test_k_sweep_marks_the_reference_k():
    fig = figures.draw_fig3(k_runs(), E5_REF)
    lines = gids(fig)
    assert len(lines) == 4   # one per panel
    assert all(list(line.get_xdata()) == [2.0, 2.0] for line in lines)
    assert any("k = 2" in t.get_text() for t in fig.legends[0].get_texts())
    plt.close(fig)


@pytest.mark.parametrize("draw,ref", [
    (lambda: figures.draw_fig4(fake_runs([("SRTF-Est", "none"),
                                          ("EvalStop-2+SRTF-Est", "EvalStop-2")], [0.1, 0.2]),
                               E6_REF), "SRTF-Est (reference)"),
    (lambda: figures.draw_fig5(precision_runs(), "eval noise sigma", reference=E7_REF),
     "EvalStop-2 (reference)")])
def test_sweep_figures_name_the_reference_line(draw, ref):
    fig = draw()
    assert gids(fig)
    assert ref in [t.get_text() for t in fig.legends[0].get_texts()]
    plt.close(fig)
