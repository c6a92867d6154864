"""BEYOND.md's figures: the noise sweep's precision and FPR, and the corpus's false stops.

Kept apart from the sections' tables so that reading the catalog imports no matplotlib.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from .figure_style import DOUBLE, policy_styles, styled  # noqa: E402
from .figures import figure_legend, save  # noqa: E402
from .noise_models import FPR_BAR, NOISE_MODELS, NOISE_NAMES  # noqa: E402


@styled
def draw_noise(summary: pd.DataFrame) -> Figure:
    """Double column (7 in). Precision (top) and FPR (bottom) vs sigma, one panel per noise
    model, one line per rule in its report-wide style; the dashed line is the 5% FPR bar."""
    models = [m for m in NOISE_MODELS if m in set(summary["noise"])]
    fig, axes = plt.subplots(2, len(models), figsize=(DOUBLE, 4.4), sharex=True, sharey="row",
                             squeeze=False)
    styles = policy_styles(summary["detector"].astype(str))
    for col, model in enumerate(models):
        sub = summary[summary["noise"] == model]
        for det, rows in sub.groupby("detector", sort=True, observed=True):
            for row, metric in enumerate(("precision", "fpr")):
                axes[row, col].plot(rows["sigma"], rows[metric], label=det, **styles[str(det)])
        axes[0, col].set_title(NOISE_NAMES.get(model, model))
        axes[1, col].axhline(FPR_BAR, color="black", lw=0.8, ls="--",
                             label=f"FPR bar {FPR_BAR:.0%}")
        axes[1, col].set_xlabel("eval noise sigma")
    axes[0, 0].set_ylabel("precision")
    axes[1, 0].set_ylabel("FPR (healthy RLHF)")
    figure_legend(fig, axes[1, 0], ncol=4)
    return fig


def noise_figure(summary: pd.DataFrame, out_dir: Path, stem: str = "beyond_noise") -> list[Path]:
    """`stem`.{png,pdf}, double column (draw_noise)."""
    return save(draw_noise(summary), out_dir, stem)


@styled
def draw_corpus(corpus: pd.DataFrame) -> Figure:
    """Double column (7 in). False stops of the corpus's healthy runs against evals per run, one
    panel per family, one line per rule in its report-wide style."""
    families = list(dict.fromkeys(corpus["family"]))
    fig, axes = plt.subplots(1, len(families), figsize=(DOUBLE, 3.3), sharey=True,
                             squeeze=False)
    styles = policy_styles(corpus["detector"].astype(str))
    for ax, family in zip(axes[0], families, strict=True):
        sub = corpus[corpus["family"] == family]
        for det, rows in sub.groupby("detector", sort=False):
            rows = rows.sort_values("evals")
            ax.plot(rows["evals"], rows["false_stops"], label=det, **styles[str(det)])
        ticks = sorted(sub["evals"].unique())
        ax.set(title=f"{family} corpus: healthy runs", xlabel="evals per run", xscale="log",
               xticks=ticks, xticklabels=[f"{t:g}" for t in ticks])
        ax.minorticks_off()
    axes[0, 0].set_ylabel("false stops (share of healthy runs)")
    figure_legend(fig, axes[0, 0], ncol=5)
    return fig


def corpus_figure(corpus: pd.DataFrame, out_dir: Path, stem: str = "beyond_corpus") -> list[Path]:
    """`stem`.{png,pdf}, double column (draw_corpus)."""
    return save(draw_corpus(corpus), out_dir, stem)
