"""BEYOND.md: the detectors beyond the paper under three noise models, from runs already made,
and on real training curves (the corpus, run by run, and e9's simulated clusters).

Pure functions from a runs DataFrame (one row per run: experiment, cell, label, detector, value,
seed and the metrics) to a figure and markdown tables; `write_beyond` ties them together. e7x
cells are labelled "<detector>@<noise model>" (configs/e7x.yaml); its SRTF-Est reference cell is
labelled "SRTF-Est" and serves every noise model, since a base scheduler never reads an eval.
"""

from __future__ import annotations

import logging
import math
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import pandas as pd  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from evalstop_gym.experiment import load_experiment  # noqa: E402

from .. import sections  # noqa: E402
from ..analysis.duration_leak import duration_leak_table  # noqa: E402
from ..analysis.figure_style import DOUBLE, policy_styles, styled  # noqa: E402
from ..analysis.figures import figure_legend, save  # noqa: E402
from ..analysis.stats import improvement, paired_p, welch_p  # noqa: E402
from ..analysis.tables import to_markdown  # noqa: E402
from ..catalog import BEYOND  # noqa: E402
from ..durable import OutputError, write_text  # noqa: E402
from ..sweep.runner import load_runs  # noqa: E402

log = logging.getLogger(__name__)

NOISE_MODELS = ("gaussian", "student_t", "ar1", "drift")
NOISE_NAMES = {"gaussian": "Gaussian", "student_t": "Student-t (df 3)", "ar1": "AR(1) rho 0.5",
               "drift": "drift fitted to public runs"}
REFERENCE = "SRTF-Est"
TABLE_SIGMAS = (0.05, 0.10)
FPR_BAR, RECALL_BAR = 0.05, 0.80
ADAPTIVE = ("Patience", "CUSUM", "BOCPD", "MedianPruner")
METRICS = ("precision", "recall", "fpr", "jct_gain")


def split_label(label: str) -> tuple[str, str]:
    """'CUSUM-0-3@ar1' -> ('CUSUM-0-3', 'ar1'); the reference cell has no noise model."""
    detector, _, noise = str(label).partition("@")
    return detector, noise


def with_gain(runs: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Rows of detector cells with `noise`, `sigma` and `jct_gain` vs the reference run."""
    runs = runs.assign(sigma=runs["value"].astype(float).round(4))
    base = runs[runs["label"] == reference].set_index(["sigma", "seed"])["jct"]
    if base.empty:
        raise ValueError(f"no reference runs labelled {reference!r}; cannot compute JCT gains")
    cells = runs[runs["label"] != reference].copy()
    parts = cells["label"].map(split_label)
    cells["detector"] = [p[0] for p in parts]
    cells["noise"] = [p[1] for p in parts]
    ref = base.reindex(pd.MultiIndex.from_frame(cells[["sigma", "seed"]])).to_numpy()
    cells["jct_gain"] = (ref - cells["jct"].to_numpy()) / ref
    return cells


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of precision, recall, FPR and JCT gain per (noise, detector, sigma)."""
    cells = with_gain(runs)
    order = list(dict.fromkeys(cells["detector"]))
    out = cells.groupby(["noise", "detector", "sigma"], sort=False)[list(METRICS)].mean()
    out = out.reset_index()
    out["detector"] = pd.Categorical(out["detector"], order, ordered=True)
    return out.sort_values(["noise", "detector", "sigma"]).reset_index(drop=True)


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


def _pct(x: float) -> str:
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def beyond_table(summary: pd.DataFrame, sigmas: Sequence[float] = TABLE_SIGMAS) -> str:
    """Precision / recall / FPR / JCT gain of every detector and noise model at `sigmas`."""
    rows = []
    for (model, det), sub in summary.groupby(["noise", "detector"], sort=False, observed=True):
        row = {"noise": NOISE_NAMES.get(model, model), "detector": det}
        for s in sigmas:
            hit = sub[(sub["sigma"] - s).abs() < 1e-9]
            vals = hit.iloc[0] if len(hit) else pd.Series(dtype=float)
            for m, name in (("precision", "P"), ("recall", "R"), ("fpr", "FPR"),
                            ("jct_gain", "JCT gain")):
                row[f"{name} @{s:g}"] = _pct(float(vals.get(m, math.nan)))
        rows.append(row)
    return to_markdown(pd.DataFrame(rows))


def _at(summary: pd.DataFrame, model: str, sigma: float) -> pd.DataFrame:
    return summary[(summary["noise"] == model) & ((summary["sigma"] - sigma).abs() < 1e-9)]


def best_under_fpr(summary: pd.DataFrame, model: str, sigma: float,
                   fpr_bar: float = FPR_BAR) -> pd.Series | None:
    """The detector with the highest recall among those keeping FPR <= fpr_bar."""
    sub = _at(summary, model, sigma)
    ok = sub[sub["fpr"] <= fpr_bar]
    return None if ok.empty else ok.sort_values(["recall", "precision"]).iloc[-1]


def _desc(row: pd.Series) -> str:
    return (f"{row['detector']} (precision {_pct(row['precision'])}, recall {_pct(row['recall'])}, "
            f"FPR {_pct(row['fpr'])}, JCT gain {_pct(row['jct_gain'])})")


def bar_finding(summary: pd.DataFrame, model: str = "ar1", sigma: float = 0.10) -> str:
    """Whether an adaptive detector keeps FPR <= 5% with recall >= 80% (issue 5's bar)."""
    sub = _at(summary, model, sigma)
    adaptive = sub[sub["detector"].astype(str).str.startswith(ADAPTIVE)]
    met = adaptive[(adaptive["fpr"] <= FPR_BAR) & (adaptive["recall"] >= RECALL_BAR)]
    where = f"{NOISE_NAMES.get(model, model)} noise at sigma = {sigma:g}"
    if len(met):
        return f"**Bar met** under {where} by " + "; ".join(_desc(r) for _, r in met.iterrows())
    lines = [f"**Bar not met** under {where}: no adaptive detector keeps FPR <= "
             f"{FPR_BAR:.0%} with recall >= {RECALL_BAR:.0%}"]
    capped = adaptive[adaptive["fpr"] <= FPR_BAR]
    if len(capped):
        lines.append("Best recall at FPR <= 5%: " + _desc(capped.sort_values("recall").iloc[-1]))
    recall_ok = adaptive[adaptive["recall"] >= RECALL_BAR]
    if len(recall_ok):
        lines.append("Lowest FPR at recall >= 80%: " + _desc(recall_ok.sort_values("fpr").iloc[0]))
    return ". ".join(lines) + "."


def which_detector(summary: pd.DataFrame, sigmas: Sequence[float] = TABLE_SIGMAS) -> list[str]:
    """Per noise model and sigma: the highest-recall rule at FPR <= 5%, else the lowest FPR."""
    lines = []
    for model in [m for m in NOISE_MODELS if m in set(summary["noise"])]:
        for s in sigmas:
            sub = _at(summary, model, s)
            if sub.empty:
                continue
            best = best_under_fpr(summary, model, s)
            pick = (f"highest recall at FPR <= 5%: {_desc(best)}" if best is not None else
                    f"no rule keeps FPR <= 5%; lowest FPR: {_desc(sub.sort_values('fpr').iloc[0])}")
            lines.append(f"- {NOISE_NAMES.get(model, model)}, sigma {s:g}: {pick}.")
    blind = summary.groupby("detector", observed=True)["fpr"].min()
    blind = blind[blind >= 0.5]
    if len(blind):
        lines.append(f"- {', '.join(map(str, blind.index))}: FPR >= {blind.min():.0%} at every "
                     "noise level; their JCT gains come from stopping healthy jobs too.")
    return lines


def base_rate_table(runs: pd.DataFrame) -> str:
    """e8x: precision and FPR of every detector at each hacking base rate."""
    cells = runs[runs["detector"] != "none"]
    mean = cells.groupby(["detector", "value"], sort=False)[["precision", "fpr"]].mean()
    wide = mean.reset_index().pivot(index="detector", columns="value")
    order = list(dict.fromkeys(cells["detector"]))
    frame = pd.DataFrame({"detector": order})
    for v in sorted(cells["value"].unique()):
        frame[f"P/FPR @{v:g}"] = [f"{_pct(wide.loc[d, ('precision', v)])} / "
                                  f"{_pct(wide.loc[d, ('fpr', v)])}" for d in order]
    return to_markdown(frame)


def drop_to_noise_table(sigmas: Sequence[float] = TABLE_SIGMAS,
                        seeds: Sequence[int] | None = None) -> str:
    """Drop-to-noise of the paper-collapse and Gao-faithful hacking curves (E2 workload and,
    by default, E2's seeds)."""
    from evalstop_gym.config import CONFIG_DIR, load_sim_config
    from evalstop_gym.sim.workload import drop_to_noise

    seeds = load_experiment("e2").seeds if seeds is None else seeds
    rows = []
    for family, file in (("paper collapse 1.5-2.5", "defaults.yaml"),
                         ("Gao-faithful collapse 1", "gao_faithful.yaml")):
        for s in sigmas:
            cfg = load_sim_config(CONFIG_DIR / file, {"noise.sigma": s})
            d = drop_to_noise(cfg, seeds)
            rows.append({"curve family": family, "sigma": f"{s:g}",
                         "(peak - final) / sigma": f"{d.peak_to_final:.2f}",
                         "largest post-peak step / (sigma sqrt 2)": f"{d.step:.2f}",
                         "hacking jobs": d.n_hacking})
    return to_markdown(pd.DataFrame(rows))


SEED_METRICS = (("jct", "JCT"), ("wasted_frac", "wasted"))


def seed_power(runs: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Per policy and metric: the change against `reference` over every seed, with Welch's p
    (the paper's test, seeds as independent samples) and the paired p (seeds as pairs)."""
    by_policy = {pol: g.set_index("seed") for pol, g in runs.groupby("policy", sort=False)}
    ref = by_policy[reference]
    rows = []
    for policy, cell in by_policy.items():
        if policy == reference:
            continue
        for metric, name in SEED_METRICS:
            a, b = cell[metric].astype(float), ref[metric].astype(float)
            rows.append({"policy": policy, "metric": name, "seeds": int(a.count()),
                         "delta_pct": improvement(metric, float(a.mean()), float(b.mean())),
                         "welch_p": welch_p(a.tolist(), b.tolist()),
                         "paired_p": paired_p(a.to_dict(), b.to_dict())})
    return pd.DataFrame(rows)


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def seed_power_section(runs: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The e2x table and what it says about EvalStop's headline JCT gain."""
    power = seed_power(runs, reference)
    wide = power.pivot(index="policy", columns="metric").sort_index(axis=1)
    table = pd.DataFrame({
        "cell": wide.index,
        **{f"Δ{name} %": [f"{v:+.1f}" for v in wide[("delta_pct", name)]]
           for _, name in SEED_METRICS},
        **{f"{name} p (Welch / paired)": [f"{_p(w)} / {_p(q)}" for w, q in
                                          zip(wide[("welch_p", name)], wide[("paired_p", name)],
                                              strict=True)]
           for _, name in SEED_METRICS}})
    head = power[(power["policy"] == f"EvalStop-2+{reference}") & (power["metric"] == "JCT")]
    lines = [f"Each cell against {reference} alone over {int(power['seeds'].max())} seeds; "
             "ΔJCT > 0 is faster, Δwasted < 0 is less waste. Welch's test treats the seeds as "
             "independent samples, as the paper does; every cell of a seed runs the same "
             "workload, so the paired test on per-seed differences is the sharper one.\n",
             to_markdown(table), ""]
    if len(head):
        h = head.iloc[0]
        lines.append(f"EvalStop-2's JCT gain over {int(h['seeds'])} seeds: {h['delta_pct']:+.1f}% "
                     f"(Welch p {_p(h['welch_p'])}, paired p {_p(h['paired_p'])}).")
    return "\n".join(lines)


def _read(results_dir: Path, name: str) -> pd.DataFrame | None:
    path = Path(results_dir) / name / "runs.csv"
    if not path.exists():
        log.warning("%s: missing; its section of BEYOND.md is skipped", path)
        return None
    return load_runs(path)


def _seed_count(*runs: pd.DataFrame | None) -> str:
    counts = sorted({r["seed"].nunique() for r in runs if r is not None})
    return "/".join(map(str, counts)) or "0"


def render(e7x: pd.DataFrame | None, e8x: pd.DataFrame | None, drop_md: str,
           figure: str, trace_md: str = "", summary: pd.DataFrame | None = None,
           e2x: pd.DataFrame | None = None, corpus_md: str = "", leak_md: str = "") -> str:
    """BEYOND.md's text; `summary` is `summarise(e7x)` when the caller already has it."""
    parts = ["# Beyond the paper: harder noise, adaptive detectors\n",
             "Generated by `benchmarks.beyond.write_beyond` from the e7x / e8x / e2x runs; do "
             f"not edit by hand. Means over {_seed_count(e7x, e8x)} seeds (e2x: its own count); "
             "FPR is over healthy RLHF jobs; JCT gain is against SRTF-Est alone on the same "
             "seeds. Recall counts a stop at any "
             "eval, including the final one (which keeps the best checkpoint but saves no "
             "compute).\n",
             "## How hard detection is: drop-to-noise\n", drop_md, ""]
    if e7x is not None:
        summary = summarise(e7x) if summary is None else summary
        parts += ["## Every detector under every noise model (e7x)\n",
                  f"![precision and FPR vs sigma]({figure})\n",
                  beyond_table(summary), "", "## Findings\n", bar_finding(summary), "",
                  *which_detector(summary), ""]
    if e8x is not None:
        noise = load_experiment("e8x").config.noise   # the sweep's noise, from its config
        parts += [f"## Hacking base rate (e8x, {NOISE_NAMES.get(noise.model, noise.model)} "
                  f"sigma {noise.sigma:g}): precision / FPR\n",
                  base_rate_table(e8x), ""]
    if e2x is not None:
        parts += ["## E2's deltas over many seeds (e2x)\n", seed_power_section(e2x), ""]
    if trace_md:
        parts += ["## Replayed arrivals: one day of the Philly trace (philly)\n",
                  "Arrivals, durations and GPU counts from Microsoft's Philly trace (virtual "
                  "cluster 6214e9, see configs/philly.yaml); job types from GPU-hours; curves and "
                  "labels drawn as in E2.\n", trace_md.split("\n", 1)[1].strip(), ""]
    if corpus_md:
        parts.append(corpus_md)
    if leak_md:
        parts += ["## What a policy can read off the clock: a running job's duration\n",
                  "Step times drift (`job_types.<type>.step_time_volatility`, "
                  "`evalstop_gym/sim/pace.py`), so a running job's progress and the GPU time it "
                  "has held estimate its true duration without giving it. At every check of a "
                  "running job on the default platform (SRTF-Est, E2's seeds), the relative "
                  "error of three estimates: the training minutes so far over the progress "
                  "(mean rate); those minutes plus the rest at the last interval's pace (last "
                  "pace); and the rest as a policy that knows the pace model and the type's "
                  "volatility expects it (model-aware). "
                  "From `benchmarks/analysis/duration_leak.py`; "
                  "`tests/test_information_boundary.py` holds floors under these medians.\n",
             leak_md, ""]
    return "\n".join(parts)


def write_beyond(results_dir: Path, repo_root: Path, figures: list[Path] | None = None,
                 folders: Mapping[str, str] | None = None) -> Path:
    """Write BEYOND.md (and figures/beyond_*.{png,pdf}) under `repo_root`; returns its path, and
    appends the figures' paths to `figures` when given. `folders` maps an experiment to its
    folder under `results_dir` when that is a --set variant's (`e7x__noise.sigma=0.1`).

    The drop-to-noise table reads the platform configs in configs/ whatever `repo_root` is.
    """
    repo_root = Path(repo_root)
    sources = ("e7x", "e8x", "e2x")   # the noise models' sweeps, in the order drawn
    folders = {n: (folders or {}).get(n, n) for n in BEYOND}
    if not any((Path(results_dir) / folders[n] / "runs.csv").is_file() for n in sources):
        raise OutputError(f"{results_dir}: holds none of {', '.join(sources)}'s runs.csv; run "
                          f"them first (evalstop-bench run {' '.join(sources)} --out "
                          f"{results_dir}); {repo_root / 'BEYOND.md'} is left as it was")
    e7x, e8x, e2x = (_read(results_dir, folders[name]) for name in sources)
    figure = "figures/beyond_noise.png"
    summary = None if e7x is None else summarise(e7x)
    drawn = [] if figures is None else figures
    if summary is not None:
        drawn += noise_figure(summary, repo_root / "figures")
    trace = Path(results_dir) / folders["philly"] / "table.md"
    text = render(e7x, e8x, drop_to_noise_table(), figure,
                  trace.read_text() if trace.exists() else "", summary, e2x,
                  corpus_markdown(Path(results_dir), repo_root / "figures", drawn,
                                  folders["e9"]),
                  duration_leak_table())
    path = repo_root / "BEYOND.md"
    write_text(path, sections.carried_over(text, path))
    log.info("wrote %s", path)
    return path


CORPUS_DETECTORS = ("EvalStop-2", "StopAt-0.65", "LossPlateau", "Patience-3", "CUSUM-0-3",
                    "BOCPD-0.5", "MedianPruner", "DeclineTest-0.01", "DeclineTest-0.05",
                    "DeclineTest-0.2")


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


def corpus_markdown(results_dir: Path, figures_dir: Path | None = None,
                    drawn: list[Path] | None = None, e9_folder: str = "e9") -> str:
    """The real-curve section: every detector on every corpus run (kept as
    `results_dir`/corpus_scores.csv, rescored when its detectors, the corpus or the code changed)
    and e9's runs when they exist; with `figures_dir`, also figures/beyond_corpus.{png,pdf}
    (their paths appended to `drawn`)."""
    from evalstop_gym.traces.corpus import corpus_file

    from ..corpus.scoring import stored_scores, summarise_corpus
    from ..corpus.tables import corpus_section, e9_summary

    scores = stored_scores(Path(results_dir) / "corpus_scores.csv", CORPUS_DETECTORS)
    e9 = _read(results_dir, e9_folder)
    summary = summarise_corpus(scores)
    text = corpus_section(summary, None if e9 is None else e9_summary(e9),
                          corpus_file("reward").parent / "provenance.json")
    if figures_dir is None:
        return text
    paths = corpus_figure(summary, figures_dir)
    if drawn is not None:
        drawn += paths
    return text.replace("### (a) The corpus's runs, one by one\n",
                        "### (a) The corpus's runs, one by one\n\n"
                        "![false stops vs evals per run](figures/beyond_corpus.png)\n", 1)


def main(argv: Sequence[str] | None = None) -> int:
    """`python -m evalstop_gym.benchmarks.report.beyond RESULTS [--root DIR]`: BEYOND.md from
    the runs under RESULTS (e7x, e8x, e2x, philly, e9: `evalstop-bench run NAME --out RESULTS`)."""
    import argparse

    p = argparse.ArgumentParser(prog="python -m evalstop_gym.benchmarks.report.beyond")
    p.add_argument("results", type=Path, help="the --out folder the experiments ran into")
    p.add_argument("--root", type=Path, default=Path("."), help="where BEYOND.md is written")
    args = p.parse_args(argv)
    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from ..usage import UsageError, check_output

    try:
        check_output(args.root / "BEYOND.md", "--root", "file")
        figures: list[Path] = []   # files the repository tracks: name each one written
        for path in (write_beyond(args.results, args.root, figures), *figures):
            print(f"wrote {path.resolve()}")
    except (OutputError, UsageError) as exc:
        print(f"{p.prog}: error: {exc}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
