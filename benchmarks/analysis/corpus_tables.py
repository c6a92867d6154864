"""BEYOND.md's section on real training curves: functions from scores and runs to markdown (the
description's seeds, jobs and eval counts are read from the runs and configs/e9.yaml).

Inputs: `corpus.scoring.summarise_corpus` (every detector on every corpus run, run by run),
the e9 runs (`configs/e9.yaml`: simulated jobs drawing corpus curves, and the synthetic E2
workload at sigma 0.05 and under AR(1) rho 0.5 sigma 0.10, at each eval density) and the Gao fit
in the corpus's provenance file.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import pandas as pd

from .claims import Row, holds
from .section_inputs import SectionInputs
from .tables import pct, to_markdown

GROUPS = {"supervised": "supervised corpus (digits MLPs; declining = overfitting)",
          "reward": "reward over-optimisation corpus",
          "gauss0.05": "synthetic E2 workload, Gaussian sigma 0.05",
          "ar1-0.10": "synthetic E2 workload, AR(1) rho 0.5 sigma 0.1",
          "drift-fit": "synthetic E2 workload, drift noise fitted to the public corpus"}
DENSITY_OF = {0.05: "5%", 0.1: "10%", 0.15: "15%", round(1 / 60, 6): "native"}
DENSITIES = ("native", "5%", "10%", "15%")
HEADLINE = "DeclineTest-0.05"
ALPHA = float(HEADLINE.rpartition("-")[2])   # its false-alarm budget
FPR_BAR, RECALL_BAR, LOST_BAR, E2_RECALL_BAR = 0.05, 0.80, 0.01, 0.95


def e9_summary(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds per (group, density, detector) of the detection metrics and JCT gain,
    and the number of seeds behind each mean (`n_seeds`, for the section's description)."""
    runs = runs.assign(density=[DENSITY_OF.get(round(float(v), 6), f"{float(v):g}")
                                for v in runs["value"]])
    ref = runs[runs["label"] == "SRTF-Est"].set_index(["density", "seed"])["jct"]
    cells = runs[runs["label"] != "SRTF-Est"].copy()
    cells["detector"] = [str(x).partition("@")[0] for x in cells["label"]]
    cells["group"] = [str(x).partition("@")[2] for x in cells["label"]]
    base = ref.reindex(pd.MultiIndex.from_frame(cells[["density", "seed"]])).to_numpy()
    cells["jct_gain"] = (base - cells["jct"].to_numpy()) / base
    keys = ["group", "density", "detector"]
    metrics = ["fpr", "recall", "recall_early", "saved_frac", "precision", "jct_gain"]
    groups = cells.groupby(keys, sort=False)
    return groups[metrics].mean().join(groups["seed"].nunique().rename("n_seeds")).reset_index()


def _wide(frame: pd.DataFrame, cell) -> str:
    """One row per detector, one column per density, each cell formatted by `cell(row)`."""
    out = []
    for det, sub in frame.groupby("detector", sort=False):
        row = {"detector": det}
        for d in DENSITIES:
            hit = sub[sub["density"] == d]
            row[d] = cell(hit.iloc[0]) if len(hit) else "–"
        out.append(row)
    return to_markdown(pd.DataFrame(out))


def _per_group(frame: pd.DataFrame, key: str, title, cell) -> list[str]:
    """One wide table per value of `key`, under the heading `title(first row of the group)`."""
    parts = []
    for name, sub in frame.groupby(key, sort=False):
        parts += [title(name, sub.iloc[0]), _wide(sub, cell), ""]
    return parts


def healthy_tables(corpus: pd.DataFrame) -> list[str]:
    """(a): per family, false stops / mean share of gain lost on healthy runs, and recall."""
    return _per_group(
        corpus, "family",
        lambda fam, r: f"**{fam}** ({int(r['n_healthy'])} healthy runs, {int(r['n_declining'])} "
                       "declining; each run once; cell: false stops / mean share of gain lost / "
                       "recall)\n",
        lambda r: f"{pct(r['false_stops'])} / {pct(r['share_lost'])} / {pct(r['recall'])}")


def hacking_tables(e9: pd.DataFrame) -> list[str]:
    """(b): per e9 group, recall / recall before completion / GPU-minutes saved / FPR."""
    return _per_group(
        e9, "group",
        lambda g, r: f"**{GROUPS.get(g, g)}** (cell: recall / recall before completion / "
                     "GPU-minutes saved / FPR)\n",
        lambda r: f"{pct(r['recall'])} / {pct(r['recall_early'])} / {pct(r['saved_frac'])} / "
                  f"{pct(r['fpr'])}")


def best_lines(e9: pd.DataFrame) -> list[str]:
    """Per group and density: the highest-recall detector at FPR <= 5% (else the lowest FPR)."""
    lines = []
    for (group, density), sub in e9.groupby(["group", "density"], sort=False):
        ok = sub[sub["fpr"] <= FPR_BAR]
        where = f"{GROUPS.get(group, group)}, evals {density}"
        if len(ok):
            r = ok.sort_values(["recall", "precision"]).iloc[-1]
            lines.append(f"- {where}: highest recall at FPR <= 5%: {r['detector']} (recall "
                         f"{pct(r['recall'])}, FPR {pct(r['fpr'])}, saved "
                         f"{pct(r['saved_frac'])}).")
        else:
            r = sub.sort_values("fpr").iloc[0]
            lines.append(f"- {where}: no rule keeps FPR <= 5%; lowest FPR: {r['detector']} "
                         f"({pct(r['fpr'])}, recall {pct(r['recall'])}).")
    return lines


def _frontier_rows(frame: pd.DataFrame, by: str, fpr: str, suffix: str = "") -> list[dict]:
    """One row per (group, DeclineTest alpha): its `fpr` column and recall at each density."""
    rows = []
    for (group, det), sub in frame[frame["detector"].str.startswith("DeclineTest")].groupby(
            [by, "detector"], sort=False):
        row = {"group": f"{group}{suffix}", "detector": det}
        for d in DENSITIES:
            hit = sub[sub["density"] == d]
            row[f"FPR / recall @{d}"] = (f"{pct(hit[fpr].iloc[0])} / "
                                         f"{pct(hit['recall'].iloc[0])}" if len(hit) else "–")
        rows.append(row)
    return rows


def frontier_table(e9: pd.DataFrame, corpus: pd.DataFrame) -> str:
    """DeclineTest's false stops against recall as alpha varies, per group and density."""
    rows = (_frontier_rows(e9, "group", "fpr")
            + _frontier_rows(corpus, "family", "false_stops", " (run by run)"))
    return to_markdown(pd.DataFrame(rows))


def _verdict(ok: bool) -> str:
    return "**met**" if ok else "**not met**"


def _recall_targets(e9: pd.DataFrame) -> list[tuple[str, bool]]:
    """E2 at sigma 0.05 (evals every 5%) and AR(1) at each density: recall and FPR."""
    h = e9[e9["detector"] == HEADLINE]
    e2 = h[(h["group"] == "gauss0.05") & (h["density"] == "5%")]
    out = []
    if len(e2):
        r = e2.iloc[0]
        out.append((f"- E2, sigma 0.05, evals every 5%: recall {pct(r['recall'])} at FPR "
                    f"{pct(r['fpr'])} (target recall >= 95%, FPR <= 5%)",
                    r["recall"] >= E2_RECALL_BAR and r["fpr"] <= FPR_BAR))
    for _, r in h[h["group"] == "ar1-0.10"].iterrows():
        out.append((f"- AR(1) rho 0.5, sigma 0.1, evals {r['density']}: recall "
                    f"{pct(r['recall'])} at FPR {pct(r['fpr'])} (target recall >= 80%, "
                    f"FPR <= 5%)", r["recall"] >= RECALL_BAR and r["fpr"] <= FPR_BAR))
    return out


def targets(e9: pd.DataFrame, corpus: pd.DataFrame) -> list[tuple[str, bool]]:
    """The issue's four targets for DeclineTest-0.05: (measured text, met)."""
    c = corpus[corpus["detector"] == HEADLINE]
    h = e9[e9["detector"] == HEADLINE]
    sim_fs = h[h["group"].isin(["supervised", "reward"])]["fpr"]
    worst_fs = max(c["false_stops"].max(), sim_fs.max() if len(sim_fs) else 0.0)
    lost = c["share_lost"].max()
    return [(f"- False stops of healthy corpus runs <= 5% at every density: worst "
             f"{pct(worst_fs)} (run by run and in e9)", worst_fs <= FPR_BAR),
            *_recall_targets(e9),
            (f"- Mean share of gain lost on healthy corpus runs <= 1%: worst {pct(lost)} over "
             "families and densities", lost <= LOST_BAR)]


def target_lines(e9: pd.DataFrame, corpus: pd.DataFrame) -> list[str]:
    """The issue's four targets for DeclineTest-0.05, with the measured numbers."""
    return [f"{text} — {_verdict(ok)}." for text, ok in targets(e9, corpus)]


def gao_lines(provenance: Path) -> list[str]:
    """Gao's alpha, beta fitted to the hacking reward runs, beside the simulator's calibration."""
    fit = json.loads(Path(provenance).read_text())["families"]["reward"]["gao_fit"]
    m, sim = fit["median"], fit["simulator"]
    return [f"Fitted to the {fit['n_runs']} hacking reward runs (gold gain since the first "
            f"eval against d = sqrt(KL), least squares per run, medians): alpha "
            f"{m['alpha']:.3f}, beta {m['beta']:.3f} (R^2 {m['r2']:.2f}), so the gold peak sits "
            f"at d = {m['d_peak']:.2f} with a gain of {m['gain']:.3f}. In the simulator's "
            f"terms, d grows as progress^{m['collapse']:.2f} (its `collapse` exponent, "
            f"calibrated to {sim['collapse'][0]:g}-{sim['collapse'][1]:g}) and the true peak "
            f"is at progress {m['test_peak_progress']:.2f} (calibrated "
            f"{sim['peak_progress'][0]:g}-{sim['peak_progress'][1]:g}); the gain at the peak "
            f"is {m['gain']:.3f} in gold-reward units (calibrated {sim['gain'][0]:g}-"
            f"{sim['gain'][1]:g} in eval-score units)."]


def e9_setup() -> tuple[int, int, dict[str, int]]:
    """configs/e9.yaml's seeds and jobs per run, and the evals a job gets at each density
    (`eval_points` of each swept interval), for the section's description."""
    from evalstop_gym.experiment import load_experiment
    from evalstop_gym.sim.workload import eval_points

    exp = load_experiment("e9")
    final = exp.config.evals.final
    intervals = sorted({float(c.value) for c in exp.cells if c.param == "evals.interval"})
    evals = {DENSITY_OF.get(round(v, 6), f"{v:g}"): len(eval_points(v, final))
             for v in intervals}
    return len(exp.seeds), exp.config.workload.n_jobs, evals


def why(e9: pd.DataFrame, evals: dict[str, int]) -> str:
    """Why DeclineTest misses a recall target, the eval counts from the schedules and the false
    stops from the runs; "" when every recall target is met."""
    if all(ok for _, ok in _recall_targets(e9)):
        return ""
    sparse = [evals[d] for d in ("15%", "5%") if d in evals]
    counts = f"the {min(sparse)} to {max(sparse)} evals of a 15% or 5% schedule" if sparse \
        else "the few evals of a sparse schedule"
    text = ("Why the recall targets are missed: DeclineTest measures the noise from the run's "
            "own evals (about n/2 degrees of freedom after n evals) and spends its budget over "
            f"every look by a union bound, so with {counts} its critical value sits far above "
            "what a known noise level would need; CUSUM and BOCPD learn the noise from other "
            "finished jobs instead.")
    h = e9[e9["detector"] == HEADLINE]
    gauss = h[h["group"] == "gauss0.05"]["fpr"]
    if len(gauss):
        text += (f" Its false stops under Gaussian noise, where its assumption holds, are at "
                 f"most {pct(gauss.max())} against alpha {pct(ALPHA)}.")
    above = h[(h["group"] == "ar1-0.10") & (h["fpr"] > ALPHA)]
    if len(above):
        where = [f"every {d}" if d != "native" else "the native density"
                 for d in above["density"]]
        text += (f" Under AR(1) noise they exceed alpha with evals {', '.join(where)}, where "
                 "second differences underestimate the noise of a block mean (its docstring's "
                 "warning).")
    return text


def corpus_section(corpus: pd.DataFrame, e9: pd.DataFrame | None, provenance: Path) -> str:
    """The whole section: targets, (a) healthy runs, (b) hacking runs, frontier, Gao fit."""
    n_seeds, n_jobs, evals = e9_setup()
    if e9 is not None and "n_seeds" in e9:   # the runs' own count (a sweep may use --seeds)
        n_seeds = int(e9["n_seeds"].max())
    every = [d for d in evals if d != "native"]
    options = ([f"every {', '.join(every)}"] if every else []) + (
        [f"at the corpus's native {evals['native']} per run"] if "native" in evals else [])
    schedules = " or ".join(options)
    parts = ["## Real training curves: the corpus and e9\n",
             "The corpus (`evalstop_gym/traces/data/corpus`, built by `evalstop-bench corpus "
             "build`) holds real runs trained on this machine; a run declines when its test "
             "curve peaks and falls by more than its noise. Tables (a) score every detector on "
             "every corpus run once (its own evals only; detectors that learn across runs get "
             "the family's other runs as finished peers). Tables (b) are e9's simulated "
             f"clusters ({n_seeds} seeds, {n_jobs} jobs each, evals {schedules}).\n"]
    if e9 is not None:
        reason = why(e9, evals)
        parts += ["### DeclineTest-0.05 against the targets\n", *target_lines(e9, corpus), "",
                  *([reason, ""] if reason else [])]
    parts += ["### (a) The corpus's runs, one by one\n", *healthy_tables(corpus)]
    if e9 is not None:
        parts += ["### (b) Hacking runs in simulated clusters (e9)\n", *hacking_tables(e9),
                  "### Which detector, per workload and density (e9)\n", *best_lines(e9), "",
                  "### DeclineTest's frontier as alpha varies\n", frontier_table(e9, corpus),
                  ""]
    parts += ["### Gao's functional form on the reward runs\n", *gao_lines(provenance), ""]
    return "\n".join(parts)


def section(runs: pd.DataFrame | None, inputs: SectionInputs) -> str:
    """The whole section, with the corpus's figure (drawn into `inputs.figures_dir`); without
    e9's runs, the corpus's tables alone."""
    from evalstop_gym.traces.corpus import corpus_file

    from .beyond_figures import corpus_figure

    corpus = inputs.corpus()
    text = corpus_section(corpus, None if runs is None else e9_summary(runs),
                          corpus_file("reward").parent / "provenance.json")
    inputs.drawn += corpus_figure(corpus, inputs.figures_dir)
    return text.replace("### (a) The corpus's runs, one by one\n",
                        "### (a) The corpus's runs, one by one\n\n"
                        "![false stops vs evals per run](figures/beyond_corpus.png)\n", 1)


def claims(runs: pd.DataFrame, name: str = "e9") -> list[Row]:
    """What the section says of DeclineTest where its assumption holds: under Gaussian noise its
    false stops stay within its alpha, at every density."""
    e9 = e9_summary(runs)
    fpr = e9[(e9["detector"] == HEADLINE) & (e9["group"] == "gauss0.05")]["fpr"]
    worst = float(fpr.max()) if len(fpr) else math.nan
    return [holds(name, f"{HEADLINE}'s false stops under Gaussian noise, where its assumption "
                  "holds, stay within its alpha", f"FPR <= {pct(ALPHA)}", f"at most {pct(worst)}",
                  len(fpr) > 0 and worst <= ALPHA, f"every density, {GROUPS['gauss0.05']}")]
