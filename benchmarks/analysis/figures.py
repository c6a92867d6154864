"""The paper's figures, rebuilt from runs.csv (and, for Fig. 2, from the seeded workload).

Each `draw_*` function turns data into a Figure in the shared style (figure_style: column widths,
8-9 pt fonts, TrueType fonts, a colour-blind-safe palette); the public functions save it as
`<name>.png` and `<name>.pdf`. Nothing here simulates a cluster, so figures rebuild in seconds
from a finished sweep. Titles say what is shown; REPRODUCTION.md numbers the figures.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.axes import Axes  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402
from matplotlib.patches import Patch  # noqa: E402
from matplotlib.ticker import MaxNLocator  # noqa: E402

from evalstop_gym.config import SimConfig  # noqa: E402
from evalstop_gym.sim.workload import true_curves  # noqa: E402
from evalstop_gym.workloads import generate_workload  # noqa: E402

from .. import durable  # noqa: E402
from .figure_style import (  # noqa: E402
    DOUBLE,
    NA_GID,
    NEUTRAL,
    OKABE_ITO,
    REFERENCE_GID,
    SINGLE,
    ZERO_GID,
    policy_styles,
    style,
    styled,
)
from .stats import _matches, cells, mean_ci  # noqa: E402

log = logging.getLogger(__name__)
DETECTORS = ("EvalStop-2+SRTF-Est", "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est")
Reference = Mapping[str, Any] | None   # an experiment's `reference` (cell fields to match)


def save(fig: Figure, directory: Path, name: str, layout: bool = True) -> list[Path]:
    """Write PNG and PDF and close the figure; no timestamp: same data, same bytes. Each file is
    written atomically (durable.atomic_path), so a killed run never leaves half a figure. Saved
    in the shared style whoever drew the figure, so no PDF embeds a Type 3 font."""
    directory.mkdir(parents=True, exist_ok=True)
    paths = [directory / f"{name}.{ext}" for ext in ("png", "pdf")]
    if layout and fig.get_layout_engine() is None:
        fig.tight_layout()
    try:
        with style():
            for path in paths:
                stamp = {"CreationDate": None} if path.suffix == ".pdf" else {}
                with durable.atomic_path(path) as tmp:
                    fig.savefig(tmp, metadata=stamp, format=path.suffix[1:])
    finally:
        plt.close(fig)
    return paths


def reference_cells(runs: pd.DataFrame, reference: Reference) -> list[str]:
    """The cells `reference` names (every field it gives matches; in a sweep, at every value)."""
    if not reference:
        return []
    return [row["cell"] for _, row in cells(runs).iterrows()
            if all(k in row and _matches(row, k, v) for k, v in reference.items())]


def reference_policies(runs: pd.DataFrame, reference: Reference) -> set[str]:
    return set(runs.loc[runs["cell"].isin(reference_cells(runs, reference)), "policy"])


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
         xscale: float = 1.0, label: str | None = None, **kw: Any) -> None:
    """One policy's mean ± 95% CI along the sweep; `kw` styles it (figure_style.policy_styles)."""
    x, m, h = series(runs, policy, metric, scale)
    ax.errorbar(x * xscale, m, yerr=h, label=label or policy, **kw)


def policy_lines(ax: Axes, runs: pd.DataFrame, policies: list[str], metric: str,
                 scale: float = 1.0, xscale: float = 1.0, refs: frozenset[str] = frozenset(),
                 labels: Mapping[str, str] | None = None) -> None:
    """One line per policy in its report-wide style; a reference policy's line carries the
    reference gid and says so in its label."""
    for p, kw in policy_styles(policies).items():
        label = (labels or {}).get(p, p)
        extra = {"gid": REFERENCE_GID, "label": f"{label} (reference)"} if p in refs else {}
        line(ax, runs, p, metric, scale, xscale, **{"label": label, **kw, **extra})


def figure_legend(fig: Figure, ax: Axes, ncol: int, title: str | None = None) -> None:
    """One legend, of `ax`'s lines, under all panels (panels stay uncluttered at column
    width)."""
    handles, labels = ax.get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside lower center", ncol=ncol, title=title)


@styled
def draw_fig2(config: SimConfig, seed: int) -> Figure:
    """Single column (3.5 in). Proxy vs world feedback: loss and reward-model score keep
    improving past the eval peak."""
    job = next(j for j in generate_workload(config, seed) if j.is_hacking)
    grid = np.linspace(0.0, 1.0, 201)
    curves = true_curves(job, grid)
    blue, vermillion, green = OKABE_ITO[0], OKABE_ITO[1], OKABE_ITO[2]
    fig, ax = plt.subplots(figsize=(SINGLE, 3.3))
    ax.plot(grid, curves["reward_model"], label="reward-model score (proxy)", color=vermillion)
    ax.plot(grid, curves["eval"], label="true eval score", color=blue)
    ax.scatter(job.eval_points, job.eval_observed, color=blue, s=10, zorder=3,
               label="observed evals (noisy)")
    ax.axvline(job.peak_progress, ls=":", color=NEUTRAL, label="true eval peak")
    ax.set(xlabel="training progress (fraction of the job)", ylabel="score (0..1)",
           title=f"A reward-hacking RLHF job (seed {seed}, job {job.job_id})")
    twin = ax.twinx()
    twin.grid(False)
    twin.plot(grid, curves["loss"], ls="--", color=green, label="training loss")
    twin.set_ylabel("training loss (nats)")
    handles = ax.get_legend_handles_labels()[0] + twin.get_legend_handles_labels()[0]
    fig.legend(handles=handles, loc="outside lower center", ncol=2)
    return fig


def fig2(config: SimConfig, seed: int, directory: Path) -> list[Path]:
    """fig2_proxy_vs_world.{png,pdf}, single column (draw_fig2)."""
    return save(draw_fig2(config, seed), directory, "fig2_proxy_vs_world")


K_PANELS = (("jct", 1.0, "mean JCT (min)"), ("wasted_frac", 100.0, "wasted compute (%)"),
            ("n_stopped", 1.0, "jobs stopped per run"), ("fpr", 100.0, "FPR, healthy RLHF (%)"))


@styled
def draw_fig3(runs: pd.DataFrame, reference: Reference = None) -> Figure:
    """Double column (7 in). k sweep: what each decline threshold buys (JCT, waste) and costs
    (false positives); the reference k (E5: k = 2) is a dotted vertical line."""
    ev = runs[runs["detector"].str.startswith("EvalStop")]
    policy = ev["policy"].iloc[0]
    merged = ev.assign(policy=policy)  # one line over k (the value column)
    ref_ks = sorted({float(v) for v in runs.loc[runs["cell"].isin(
        reference_cells(runs, reference)), "value"]})
    fig, axes = plt.subplots(2, 2, figsize=(DOUBLE, 4.4), sharex=True)
    base = runs[runs["detector"] == "none"]
    for ax, (metric, scale, ylabel) in zip(axes.flat, K_PANELS, strict=True):
        line(ax, merged, policy, metric, scale, label="EvalStop-k + SRTF-Est",
             **policy_styles([policy])[policy])
        if not base.empty:
            ax.axhline(base[metric].astype(float).mean() * scale, ls="--", color=NEUTRAL,
                       label=f"{base['policy'].iloc[0]} alone")
        for k in ref_ks:
            ax.axvline(k, ls=":", color="black", lw=0.9, gid=REFERENCE_GID,
                       label=f"k = {k:g} (reference)")
        ax.set_ylabel(ylabel)
        ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    for ax in axes[1]:
        ax.set_xlabel("k (consecutive eval declines before a stop)")
    figure_legend(fig, axes[0, 0], ncol=3)
    fig.suptitle("EvalStop threshold k, E2 workload (mean ± 95% CI over seeds)")
    return fig


def fig3(runs: pd.DataFrame, directory: Path, reference: Reference = None) -> list[Path]:
    """fig3_k_sweep.{png,pdf}, double column (draw_fig3)."""
    return save(draw_fig3(runs, reference), directory, "fig3_k_sweep")


@styled
def draw_fig4(runs: pd.DataFrame, reference: Reference = None) -> Figure:
    """Double column (7 in). Eval interval: frequent evals catch the peak sooner but cost GPU
    time; the reference policy's line (E6: SRTF-Est alone) is labelled as such."""
    fig, axes = plt.subplots(1, 3, figsize=(DOUBLE, 2.6), sharex=True)
    policies = list(dict.fromkeys(runs["policy"]))
    refs = frozenset(reference_policies(runs, reference))
    for ax, (metric, scale, ylabel) in zip(axes, (("jct", 1.0, "mean JCT (min)"),
                                                  ("wasted_frac", 100.0, "wasted compute (%)"),
                                                  ("saved_frac", 100.0, "saved compute (%)")),
                                           strict=True):
        policy_lines(ax, runs, policies, metric, scale, xscale=100.0, refs=refs)
        ax.set(xlabel="eval interval (% of progress)", ylabel=ylabel)
    figure_legend(fig, axes[0], ncol=len(policies))
    fig.suptitle("Eval interval, E2 workload (mean ± 95% CI over seeds)")
    return fig


def fig4(runs: pd.DataFrame, directory: Path, reference: Reference = None) -> list[Path]:
    """fig4_eval_interval.{png,pdf}, double column (draw_fig4)."""
    return save(draw_fig4(runs, reference), directory, "fig4_eval_interval")


@styled
def draw_fig5(runs: pd.DataFrame, xlabel: str, identity: bool = False,
              reference: Reference = None) -> Figure:
    """Single column (3.5 in). Precision of the three stop rules along one axis (noise, or the
    hacking base rate); legend labels drop the base scheduler they share (in the legend title)."""
    fig, ax = plt.subplots(figsize=(SINGLE, 3.0))
    policies = [p for p in DETECTORS if p in set(runs["policy"])]
    bases = {p.partition("+")[2] for p in policies}
    short = {p: p.partition("+")[0] for p in policies} if len(bases) == 1 else {}
    policy_lines(ax, runs, policies, "precision", 100.0,
                 refs=frozenset(reference_policies(runs, reference)), labels=short)
    if identity:
        xs = np.array(sorted(runs["value"].astype(float).unique()))
        ax.plot(xs, xs * 100, ls=":", color=NEUTRAL, label="precision = base rate")
    what = xlabel.split(" (")[0]
    ax.set(xlabel=xlabel, ylabel="precision of stops (%)", ylim=(0, 105),
           title=f"Stop-rule precision vs {what}")
    figure_legend(fig, ax, ncol=2, title=f"over {bases.pop()}" if short else None)
    return fig


def fig5(runs: pd.DataFrame, directory: Path, xlabel: str, name: str,
         identity: bool = False, reference: Reference = None) -> list[Path]:
    """`name`.{png,pdf}, single column (draw_fig5)."""
    return save(draw_fig5(runs, xlabel, identity, reference), directory, name)


RESULT_PANELS = (("jct", 1.0, "JCT (min)"), ("wasted_frac", 100.0, "wasted compute (%)"),
                 ("precision", 100.0, "precision (%)"), ("recall", 100.0, "recall (%)"),
                 ("fpr", 100.0, "FPR, healthy RLHF (%)"))
RESULT_COLUMNS = 3
TICK_ROOM = 30   # characters of a cell name on the y axis; longer ones keep both ends


def tick_label(cell: str, room: int = TICK_ROOM) -> str:
    """A cell name short enough for the y axis, keeping its start and end (the base, the
    swept value) when it has to be cut."""
    if len(cell) <= room:
        return cell
    head = (room - 1) // 2
    return f"{cell[:head]}…{cell[len(cell) - (room - 1 - head):]}"


def result_bars(ax: Axes, means: np.ndarray, half: np.ndarray, colours: list[str],
                ref_rows: list[int]) -> None:
    """Horizontal bars with their CIs. A bar of 0 has no width, so the baseline says what it
    is: "0" for a measured zero, "n/a" (and no bar) for a NaN mean, an undefined metric.
    Reference rows are hatched and their mean is a dashed line across the panel."""
    for i, (m, h, colour) in enumerate(zip(means, half, colours, strict=True)):
        if np.isnan(m) or m == 0:
            ax.text(0, i, " n/a" if np.isnan(m) else " 0", va="center", ha="left",
                    style="italic" if np.isnan(m) else "normal", color="black",
                    gid=NA_GID if np.isnan(m) else ZERO_GID)
        if np.isnan(m):
            continue
        ref = i in ref_rows
        ax.barh(i, m, xerr=h, color=colour, edgecolor="black" if ref else "none",
                hatch="///" if ref else None, lw=0.6, gid=REFERENCE_GID if ref else None)
    for i in ref_rows:
        if not np.isnan(means[i]):
            ax.axvline(means[i], ls="--", lw=0.8, color="black", gid=REFERENCE_GID)


@styled
def draw_results(runs: pd.DataFrame, name: str, reference: Reference = None) -> Figure:
    """Double column (7 in), panels in a 2 x 3 grid: every cell's headline metrics, mean and
    95% CI over seeds, one bar per cell coloured by its stop rule (grey: a base scheduler
    alone); the reference cell is hatched with its mean as a dashed line, and a metric
    undefined for a cell (precision without stops) reads "n/a" where its bar would start
    (a measured zero reads "0")."""
    names = list(dict.fromkeys(runs["cell"]))
    by = runs["policy"] if "policy" in runs else runs["cell"]
    policy_of = dict(zip(runs["cell"], by, strict=True))
    styles = policy_styles(policy_of[c] for c in names)
    colours = [styles[policy_of[c]]["color"] for c in names]
    ref_rows = [names.index(c) for c in reference_cells(runs, reference)]
    rows = -(-len(RESULT_PANELS) // RESULT_COLUMNS)
    fig, axes = plt.subplots(rows, RESULT_COLUMNS, sharey=True, squeeze=False,
                             figsize=(DOUBLE, rows * (0.55 + 0.15 * len(names))))
    y = np.arange(len(names))
    for ax, (metric, scale, title) in zip(axes.flat, RESULT_PANELS, strict=False):
        stats = [mean_ci((runs.loc[runs["cell"] == c, metric].astype(float) * scale).tolist())
                 for c in names]
        result_bars(ax, np.array([m for m, _, _ in stats]),
                    np.nan_to_num(np.array([h for _, h, _ in stats])), colours, ref_rows)
        ax.set(title=title, ylim=(len(names) - 0.5, -0.5))
        ax.grid(axis="y", visible=False)
        ax.set_xlim(left=0)
    axes[0, 0].set_yticks(y, [tick_label(c) for c in names])
    for ax in axes.flat[len(RESULT_PANELS):]:
        ax.set_axis_off()
        if ref_rows:
            ax.legend(handles=[Patch(facecolor="white", edgecolor="black", hatch="///",
                                     label="reference cell\n(dashed: its mean)")],
                      loc="center")
    n_seeds = runs["seed"].nunique()
    fig.suptitle(f"{name}: mean ± 95% CI over {n_seeds} seed(s) per cell; "
                 "n/a: undefined (no stops)")
    return fig


def results_figure(runs: pd.DataFrame, directory: Path, name: str,
                   reference: Reference = None) -> list[Path]:
    """results_`name`.{png,pdf}, double column (draw_results)."""
    return save(draw_results(runs, name, reference), directory, f"results_{name}")
