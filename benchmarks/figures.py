"""The paper's figures, rebuilt from runs.csv (and, for Fig. 2, from the seeded workload).

Every function takes data and a directory and writes `<name>.png` and `<name>.pdf`; nothing here
simulates a cluster, so figures rebuild in seconds from a finished sweep.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from evalstop_gym.config import SimConfig  # noqa: E402
from evalstop_gym.sim.workload import true_curves  # noqa: E402
from evalstop_gym.workloads import generate_workload  # noqa: E402

from . import durable  # noqa: E402
from .stats import mean_ci  # noqa: E402

log = logging.getLogger(__name__)
DETECTORS = ("EvalStop-2+SRTF-Est", "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est")
VARIANT_SEP = "__"   # between an experiment's name and its --set overrides (pipeline.variant)


def save(fig: Figure, directory: Path, name: str, layout: bool = True) -> list[Path]:
    """Write PNG and PDF and close the figure; no timestamp: same data, same bytes. Each file is
    written atomically (durable.atomic_path), so a killed run never leaves half a figure."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    if layout:
        fig.tight_layout()
    try:
        for path in paths:
            stamp = {"CreationDate": None} if path.suffix == ".pdf" else {}
            with durable.atomic_path(path) as tmp:
                fig.savefig(tmp, dpi=150, metadata=stamp, format=path.suffix[1:])
    finally:
        plt.close(fig)
    return paths


def series(runs: pd.DataFrame, policy: str, metric: str,
           scale: float = 1.0) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """x (sweep value), mean and 95% CI half-width of one policy's metric."""
    sub = runs[runs["policy"] == policy]
    xs = sorted(sub["value"].astype(float).unique())
    stats = [mean_ci((sub.loc[np.isclose(sub["value"].astype(float), x), metric]
                      .astype(float) * scale).tolist()) for x in xs]
    mean = np.array([s[0] for s in stats])
    half = np.nan_to_num(np.array([s[1] for s in stats]))
    return np.array(xs), mean, half


def line(ax: Axes, runs: pd.DataFrame, policy: str, metric: str, scale: float = 1.0,
         xscale: float = 1.0, label: str | None = None) -> None:
    x, m, h = series(runs, policy, metric, scale)
    ax.errorbar(x * xscale, m, yerr=h, marker="o", capsize=3, label=label or policy)


def fig2(config: SimConfig, seed: int, directory: Path) -> list[Path]:
    """Proxy vs world feedback: loss and reward-model score keep improving past the eval peak."""
    job = next(j for j in generate_workload(config, seed) if j.is_hacking)
    grid = np.linspace(0.0, 1.0, 201)
    curves = true_curves(job, grid)
    fig, ax = plt.subplots(figsize=(10, 4.5))
    ax.plot(grid, curves["reward_model"], label="reward-model score (proxy)", color="tab:orange")
    ax.plot(grid, curves["eval"], label="true eval score (world feedback)", color="tab:blue")
    ax.scatter(job.eval_points, job.eval_observed, color="tab:blue", zorder=3,
               label="observed evals (with noise)")
    ax.axvline(job.peak_progress, ls=":", color="grey", label="true eval peak")
    ax.set(xlabel="training progress (fraction of the job)", ylabel="score (0..1)",
           title=f"Fig. 2 - one reward-hacking RLHF job (seed {seed}, job {job.job_id})")
    twin = ax.twinx()
    twin.plot(grid, curves["loss"], ls="--", color="tab:green", label="training loss")
    twin.set_ylabel("training loss (nats)")
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    ax.legend(handles=handles, loc="upper left", bbox_to_anchor=(1.1, 1.0), fontsize=8)
    return save(fig, directory, "fig2_proxy_vs_world")


def fig3(runs: pd.DataFrame, directory: Path) -> list[Path]:
    """k sweep: what each decline threshold buys (JCT, waste) and costs (false positives)."""
    ev = runs[runs["detector"].str.startswith("EvalStop")]
    policy = ev["policy"].iloc[0]
    merged = ev.assign(policy=policy)  # one line over k (the value column)
    fig, axes = plt.subplots(2, 2, figsize=(9, 6.5))
    panels = (("jct", 1.0, "mean JCT (min)"), ("wasted_frac", 100.0, "wasted compute (%)"),
              ("n_stopped", 1.0, "jobs stopped per run"), ("fpr", 100.0, "FPR, healthy RLHF (%)"))
    base = runs[runs["detector"] == "none"]
    for ax, (metric, scale, ylabel) in zip(axes.flat, panels, strict=True):
        line(ax, merged, policy, metric, scale, label="EvalStop-k + SRTF-Est")
        if not base.empty:
            ax.axhline(base[metric].astype(float).mean() * scale, ls="--", color="grey",
                       label="SRTF-Est alone")
        ax.set(xlabel="k (consecutive eval declines before a stop)", ylabel=ylabel)
        ax.legend(fontsize=8)
    fig.suptitle("Fig. 3 - EvalStop threshold k (E2 workload, mean ± 95% CI over seeds)")
    return save(fig, directory, "fig3_k_sweep")


def fig4(runs: pd.DataFrame, directory: Path) -> list[Path]:
    """Eval interval: frequent evals catch the peak sooner but cost GPU time."""
    fig, axes = plt.subplots(1, 3, figsize=(13, 4))
    policies = list(dict.fromkeys(runs["policy"]))
    for ax, (metric, scale, ylabel) in zip(axes, (("jct", 1.0, "mean JCT (min)"),
                                                  ("wasted_frac", 100.0, "wasted compute (%)"),
                                                  ("saved_frac", 100.0, "saved compute (%)")),
                                           strict=True):
        for p in policies:
            line(ax, runs, p, metric, scale, xscale=100.0)
        ax.set(xlabel="eval interval (% of training progress)", ylabel=ylabel)
        ax.legend(fontsize=8)
    fig.suptitle("Fig. 4 - eval interval sweep (E2 workload, mean ± 95% CI over seeds)")
    return save(fig, directory, "fig4_eval_interval")


def fig5(runs: pd.DataFrame, directory: Path, xlabel: str, name: str,
         identity: bool = False) -> list[Path]:
    """Precision of the three stop rules along one axis (noise, or the hacking base rate)."""
    fig, ax = plt.subplots(figsize=(6.5, 4.2))
    for p in [p for p in DETECTORS if p in set(runs["policy"])]:
        line(ax, runs, p, "precision", 100.0)
    if identity:
        xs = np.array(sorted(runs["value"].astype(float).unique()))
        ax.plot(xs, xs * 100, ls=":", color="grey", label="precision = base rate")
    ax.set(xlabel=xlabel, ylabel="precision of stop decisions (%)", ylim=(0, 105),
           title=f"Fig. 5 - detector precision vs {xlabel.split(' (')[0]}")
    ax.legend(fontsize=8)
    return save(fig, directory, name)


RESULT_PANELS = (("jct", 1.0, "JCT (min)"), ("wasted_frac", 100.0, "wasted compute (%)"),
                 ("precision", 100.0, "precision (%)"), ("recall", 100.0, "recall (%)"),
                 ("fpr", 100.0, "FPR, healthy RLHF (%)"))


def results_figure(runs: pd.DataFrame, directory: Path, name: str) -> list[Path]:
    """Every cell's headline metrics side by side: mean and 95% CI over seeds, one bar per cell
    (a metric undefined for a cell, e.g. precision without stops, is left blank)."""
    cells = list(dict.fromkeys(runs["cell"]))
    fig, axes = plt.subplots(1, len(RESULT_PANELS), sharey=True,
                             figsize=(15, 1.2 + 0.32 * len(cells)))
    y = np.arange(len(cells))
    for ax, (metric, scale, title) in zip(axes, RESULT_PANELS, strict=True):
        stats = [mean_ci((runs.loc[runs["cell"] == c, metric].astype(float) * scale).tolist())
                 for c in cells]
        means = np.array([m for m, _, _ in stats])
        half = np.nan_to_num(np.array([h for _, h, _ in stats]))
        ax.barh(y, np.nan_to_num(means), xerr=half, capsize=3, color="tab:blue", alpha=0.8)
        ax.set(title=title, ylim=(len(cells) - 0.5, -0.5))
        ax.grid(axis="x", alpha=0.3)
    axes[0].set_yticks(y, cells, fontsize=8)
    n_seeds = runs["seed"].nunique()
    fig.suptitle(f"{name}: mean ± 95% CI over {n_seeds} seed(s) per cell")
    return save(fig, directory, f"results_{name}")


FIGURES: dict[str, Callable[[pd.DataFrame, Path], list[Path]]] = {
    "e5": fig3,
    "e6": fig4,
    "e7": lambda r, d: fig5(r, d, "eval noise sigma (score units)", "fig5a_precision_vs_sigma"),
    "e8": lambda r, d: fig5(r, d, "hacking base rate (fraction of RLHF jobs)",
                            "fig5b_precision_vs_base_rate", identity=True),
}


def experiment_figures(name: str, runs: pd.DataFrame, directory: Path,
                       config: SimConfig | None = None) -> list[Path]:
    """The figures that belong to experiment `name` (E2 also draws Fig. 2 from its synthetic
    workload);
    an experiment without a sweep also gets its results figure. A variant run with --set
    (`e2__noise.sigma=0.05`) draws what its experiment draws."""
    base = name.partition(VARIANT_SEP)[0]
    paths = FIGURES[base](runs, directory) if base in FIGURES else []
    # Fig. 2 draws a synthetic job's true curves; corpus jobs have no closed-form curves
    if base == "e2" and config is not None and config.curves.source == "synthetic":
        paths += fig2(config, int(runs["seed"].iloc[0]), directory)
    if runs["value"].isna().all():
        paths += results_figure(runs, directory, name)
    for p in paths:
        log.info("wrote %s", p)
    return paths
