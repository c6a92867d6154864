"""Which detector should be the default? Every candidate on E2 and on the corpus's healthy runs.

    evalstop-bench which-detector [--out DIR] [--seeds 42 123 ...] [--n-jobs 2]
        [--detectors NAME ... | FILE.py:Class-ARGS ...] [--beyond BEYOND.md] [--quick]

(or `python -m evalstop_gym.benchmarks.detectors.which_detector`, the same options). Each
finished simulated run is saved in `--out`/runs as it ends: stopped (Ctrl-C), the same command
resumes. Your own detector gets its row beside the built-ins and the oracle with
`evalstop-bench which-detector --detectors mine.py:Mine-ARGS TrendTest-0.05 --out DIR`.

Simulated: E2 (SRTF-Est base) at eval noise sigma 0.05 (Gaussian) and under AR(1) rho 0.5 sigma
0.1, with evals every 5%, 10%, 15% and at the corpus's native density (1/60), per detector:
recall, recall before completion, GPU-minutes saved per run, FPR over healthy RLHF jobs (and,
under AR(1), over the healthy jobs of every type a detector monitors: DPO too); beside
them the Bayes oracle's recall at the detector's own FPR (`oracle.py`, which knows the generative
model; thresholded on one run's peak posteriors per seed) and each detector's share of it.
Real: the corpus's healthy runs, replayed at each density (leave one out peers for the detectors
that learn from runs; `benchmarks.corpus.scoring`), and the share a detector stops; and the
public training runs (`traces.public_runs`), each replayed alone at each density, on the design
half and the test half (`corpus.public_scoring`). The recommendation is the detector with the
best mean recall of the public runs' declines (design half; simulated recall breaks ties) among
those that, at every density, keep false stops of the corpus's healthy runs and of the public
design half's within `MAX_CORPUS_FALSE_STOPS` / `MAX_PUBLIC_FALSE_STOPS`, E2's FPR within
`MAX_FPR` and its AR(1) FPR within `MAX_AR1_FPR`. The test half is reported, never chosen on.
`--beyond` replaces the section between BEYOND.md's markers.
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pandas as pd

from evalstop_gym.policies import ComposedPolicy, PolicyNameError, SRTFEst, make_detector
from evalstop_gym.sim.protocols import capabilities
from evalstop_gym.simulate import resolve_config, simulate
from evalstop_gym.traces.corpus import FAMILIES, load_family
from evalstop_gym.traces.public_runs import load_public

from .. import sections
from ..corpus.public_limit import visible_declines
from ..corpus.public_scoring import score_public, summarise_public
from ..corpus.scoring import score_run
from ..durable import write_csv, write_json, write_text
from ..usage import UsageError
from .oracle import BayesOracle, recall_at_fpr

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)

DETECTORS = ("EvalStop-2", "Patience-3", "BOCPD-0.5", "DeclineTest-0.05", "TrendTest-0.05",
             "PeerPrior-0.05", "MaterialDecline-0.05", "MaterialDecline-0.02")
ORACLE = "Oracle"
DENSITIES = {"5%": 0.05, "10%": 0.10, "15%": 0.15, "native": 1.0 / 60.0}
NOISES = {"gauss": {"noise.model": "gaussian", "noise.sigma": 0.05},
          "ar1": {"noise.model": "ar1", "noise.rho": 0.5, "noise.sigma": 0.10},
          # fitted to the public corpus's design half (corpus noise-fit, docs/noise.md)
          "drift": {"noise.model": "drift", "noise.sigma": 0.128, "noise.drift_share": 0.983,
                    "noise.drift_scale": 0.25}}
SEEDS = (42, 123, 456, 789, 1024)
MAX_CORPUS_FALSE_STOPS = 0.02
MAX_PUBLIC_FALSE_STOPS = 0.02   # of the public corpus's healthy runs (design half), every density
MAX_AR1_FPR = 0.05
MAX_FPR = 0.01      # E2, Gaussian noise: the simulator's promise
E2_RECALL_PROMISE = 0.726   # E2, Gaussian noise, evals every 5%: the recall a default keeps
RECALL_TARGETS = {"native": 0.70, "5%": 0.70, "10%": 0.60, "15%": 0.50}   # public test half
ORACLE_FPR = 0.01   # the oracle's own row: its recall at FPR <= 1% (the detectors' bar)
PUBLIC_COLUMNS = ("design_recall", "design_false_stops", "test_recall", "test_false_stops",
                  "test_decline_avoided", "test_gain_lost", "test_drop_share")
# Detectors whose false-stop budget rests on the group's healthy peers resembling the run being
# judged (PeerPrior's: up to 2 alpha where they do not): recommended for groups of runs, never
# as the default that a lone run, or a group of unlike runs, gets without asking.
PEER_BUDGET = ("PeerPrior",)
COST_SIZES = (1_000, 10_000)
START, END = sections.markers(sections.WHICH_DETECTOR)
PROG = "evalstop-bench which-detector"


def sim_row(detector: str, noise: str, density: str, seed: int,
            overrides: Mapping[str, object]) -> dict[str, object]:
    """One simulated E2 run of `detector` over SRTF-Est."""
    config = resolve_config("e2", {**NOISES[noise], "evals.interval": DENSITIES[density],
                                   **overrides})
    det = BayesOracle(config, threshold=None) if detector == ORACLE else make_detector(detector)
    if det is None:
        raise ValueError(f"detector {detector!r}: expected a detector name, not 'none'")
    result = simulate(config, ComposedPolicy(det, SRTFEst()), seed)
    if isinstance(det, BayesOracle):   # its peak posteriors, to match any detector's FPR
        return {"detector": detector, "noise": noise, "density": density, "seed": seed,
                "jobs": [{"is_hacking": r["is_hacking"], "peak": det.peaks[r["job_id"]][0],
                          "peak_early": det.peaks[r["job_id"]][1]}
                         for r in result.records if r["job_id"] in det.peaks]}
    m = result.metrics
    types = capabilities(det).types
    healthy = [r for r in result.records if not r["is_hacking"] and r["job_type"] in types]
    return {"detector": detector, "noise": noise, "density": density, "seed": seed,
            "recall": m["recall"], "recall_early": m["recall_early"], "fpr": m["fpr"],
            "fpr_monitored": np.mean([r["stopped"] for r in healthy]) if healthy else np.nan,
            "gpu_min_saved": sum(r["saved_gpu_minutes"] for r in result.records)}


def corpus_rows(detectors: Sequence[str], max_runs: int | None) -> pd.DataFrame:
    """Each detector on each healthy corpus run (the first `max_runs` of each family) at each
    density, with the family's other runs (healthy or not) as finished peers."""
    rows = []
    for family in FAMILIES:
        runs = load_family(family)
        chosen = [i for i, r in enumerate(runs) if not r.declines][:max_runs]
        for density, interval in ((d, DENSITIES[d] if d != "native" else None)
                                  for d in DENSITIES):
            for name in detectors:
                for i in chosen:
                    row = score_run(name, runs[i], runs[:i] + runs[i + 1:], interval)
                    rows.append({"density": density, **row})
    return pd.DataFrame(rows)


def task_digest(task: tuple[str, str, str, int], overrides: Mapping[str, object]) -> str:
    """What a simulated run depends on: its cell, the overrides, the simulator's and policies'
    code, and the source of a user's detector (`FILE.py:Name-ARGS`), as a sweep's key has it."""
    from evalstop_gym.policies.registry import user_sources

    from ..sweep.runner import code_digest

    key = json.dumps({"task": list(task), "overrides": dict(overrides), "code": code_digest(),
                      "user": user_sources([task[0]])}, sort_keys=True, default=str)
    return hashlib.sha256(key.encode()).hexdigest()[:24]


def sim_saved(task: tuple[str, str, str, int], overrides: Mapping[str, object],
              path: Path | None, digest: str) -> dict[str, object]:
    """`sim_row`, its file written (atomically) by the worker the moment the run ends, so an
    interrupted study loses no finished run."""
    from ..sweep.runner import json_default

    row = sim_row(*task, overrides)
    if path is not None:
        write_json(path, {"digest": digest, "row": row}, default=json_default)
    return row


def saved_row(path: Path, digest: str) -> dict[str, object] | None:
    """A saved run's row, if it was made from the same `digest`."""
    from ..sweep.runner import read_run

    payload = read_run(path)
    return payload["row"] if isinstance(payload, dict) and payload.get("digest") == digest \
        else None


def measure(detectors: Sequence[str], seeds: Sequence[int], n_jobs: int = 1,
            overrides: Mapping[str, object] | None = None, corpus_runs: int | None = None,
            public_runs: int | None = None,
            out: Path | None = None) -> tuple[pd.DataFrame, ...]:
    """(simulated rows, corpus rows, the oracle's RLHF jobs with their peak posteriors, public
    run rows): every run, with a progress bar, seeds in parallel. With `out`, each simulated run
    is saved in `out/runs/` as it ends and reused while nothing it depends on changed."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    overrides = dict(overrides or {})
    tasks = [(d, n, dens, s) for n in NOISES for dens in DENSITIES
             for d in [*detectors, ORACLE] for s in seeds]
    digests = [task_digest(t, overrides) for t in tasks]
    runs = out / "runs" if out is not None else None
    paths = [runs / f"{d}.json" if runs is not None else None for d in digests]
    rows: list[dict[str, object] | None] = [
        saved_row(p, d) if p is not None else None for p, d in zip(paths, digests, strict=True)]
    todo = [i for i, r in enumerate(rows) if r is None]
    if runs is not None:
        runs.mkdir(parents=True, exist_ok=True)
    with tqdm(total=len(tasks), initial=len(tasks) - len(todo), desc="simulated runs") as bar:
        run = Parallel(n_jobs=n_jobs, return_as="generator")(
            delayed(sim_saved)(tasks[i], overrides, paths[i], digests[i]) for i in todo)
        for i, row in zip(todo, run, strict=True):
            rows[i] = row
            bar.update()
    done = [r for r in rows if r is not None]
    sim = pd.DataFrame([r for r in done if "jobs" not in r])
    oracle = pd.DataFrame([{**{k: r[k] for k in ("noise", "density", "seed")}, **job}
                           for r in done if "jobs" in r for job in r["jobs"]])  # type: ignore[attr-defined]
    log.info("scoring the corpus's healthy runs")
    corpus = corpus_rows(detectors, corpus_runs)
    log.info("scoring the public runs")
    public = score_public(detectors, load_public()[:public_runs] if public_runs else None)
    return sim, corpus, oracle, public


def stop_workers() -> None:
    """End joblib's worker processes and release their semaphores (after a Ctrl-C)."""
    from joblib.externals.loky import get_reusable_executor  # type: ignore[import-untyped]

    get_reusable_executor().shutdown(wait=True, kill_workers=True)


def oracle_at(oracle: pd.DataFrame, noise: str, density: str,
              fpr: float) -> tuple[float, float, float]:
    """The oracle's (recall, early recall, FPR) at the threshold whose FPR is at most `fpr`,
    over every seed's RLHF jobs at this noise and density."""
    jobs = oracle[(oracle.noise == noise) & (oracle.density == density)]
    healthy, hacking = jobs[~jobs.is_hacking], jobs[jobs.is_hacking]
    threshold, recall = recall_at_fpr(healthy.peak.to_numpy(), hacking.peak.to_numpy(), fpr)
    early = float(np.mean(hacking.peak_early.to_numpy() > threshold))
    return recall, early, float(np.mean(healthy.peak.to_numpy() > threshold))


def public_columns(public: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Per (density, detector): the public corpus's recall and false stops on each half, and
    on the test half the share of the decline avoided, of the gain lost, and the drop at stops."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in summarise_public(public).itertuples():
        row = out.setdefault((r.density, r.detector), {})
        row[f"{r.split}_recall"], row[f"{r.split}_false_stops"] = r.recall, r.false_stops
        if r.split == "test":
            row.update(test_decline_avoided=r.decline_avoided, test_gain_lost=r.gain_lost,
                       test_drop_share=r.drop_share)
    return out


def summarise(sim: pd.DataFrame, corpus: pd.DataFrame, oracle: pd.DataFrame,
              public: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (density, detector): the means over seeds, the corpus's false stops, the
    public corpus's columns (`public_columns`) and the oracle's recall at the detector's own FPR
    (Gaussian and AR(1)); then the oracle itself at `ORACLE_FPR`."""
    mean = sim.groupby(["noise", "density", "detector"], sort=False)[
        ["recall", "recall_early", "fpr", "fpr_monitored", "gpu_min_saved"]].mean()
    real = public_columns(public) if public is not None and len(public) else {}
    rows = []
    for density in DENSITIES:
        for det in mean.index.get_level_values("detector").unique():
            g, a = mean.loc[("gauss", density, det)], mean.loc[("ar1", density, det)]
            drift = mean.loc[("drift", density, det)] if ("drift", density, det) in mean.index \
                else pd.Series({"recall": np.nan, "fpr": np.nan})
            stops = corpus[(corpus.density == density) & (corpus.detector == det)]["stopped"]
            best = oracle_at(oracle, "gauss", density, g.fpr)[0]
            rows.append({"density": density, "detector": det, "recall": g.recall,
                         "recall_early": g.recall_early, "gpu_min_saved": g.gpu_min_saved,
                         "fpr": g.fpr, "ar1_recall": a.recall, "ar1_fpr": a.fpr,
                         "ar1_fpr_monitored": a.fpr_monitored, "drift_recall": drift.recall,
                         "drift_fpr": drift.fpr,
                         "corpus_false_stops": stops.mean() if len(stops) else np.nan,
                         "oracle_recall": best,
                         "ar1_oracle_recall": oracle_at(oracle, "ar1", density, a.fpr)[0],
                         "share_of_oracle": g.recall / best if best > 0 else np.nan,
                         **{c: real.get((density, det), {}).get(c, np.nan)
                            for c in PUBLIC_COLUMNS}})
        recall, early, fpr = oracle_at(oracle, "gauss", density, ORACLE_FPR)
        ar1_recall, _, ar1_fpr = oracle_at(oracle, "ar1", density, ORACLE_FPR)
        rows.append({"density": density, "detector": ORACLE, "recall": recall,
                     "recall_early": early, "gpu_min_saved": np.nan, "fpr": fpr,
                     "ar1_recall": ar1_recall, "ar1_fpr": ar1_fpr, "ar1_fpr_monitored": np.nan,
                     "drift_recall": np.nan, "drift_fpr": np.nan, "corpus_false_stops": np.nan,
                     "oracle_recall": recall,
                     "ar1_oracle_recall": ar1_recall, "share_of_oracle": 1.0})
    return pd.DataFrame(rows)


def recommend(summary: pd.DataFrame, alone: bool = False) -> tuple[str | None, str]:
    """The best mean Gaussian recall among detectors safe at every density; and why. `alone`:
    only detectors whose budget holds for a run on its own (none of `PEER_BUDGET`)."""
    real = summary[summary.detector != ORACLE]
    if alone:
        real = real[~real.detector.str.split("-").str[0].isin(PEER_BUDGET)]
    safe = real.groupby("detector").filter(
        lambda g: bool((g.corpus_false_stops <= MAX_CORPUS_FALSE_STOPS).all()
                       and (g.design_false_stops <= MAX_PUBLIC_FALSE_STOPS).all()
                       and (g.fpr <= MAX_FPR).all() and (g.ar1_fpr <= MAX_AR1_FPR).all()))
    if safe.empty:
        return None, (f"no detector kept false stops of the corpus's and the public runs' "
                      f"healthy runs <= {MAX_CORPUS_FALSE_STOPS:.0%}, FPR <= {MAX_FPR:.0%} and "
                      f"AR(1) FPR <= {MAX_AR1_FPR:.0%} at every density")
    means = safe.groupby("detector")[["design_recall", "recall"]].mean()
    best = means.sort_values(["design_recall", "recall"], ascending=False)
    return str(best.index[0]), (
        f"of the detectors whose false stops of healthy runs (the corpus's, and the public "
        f"runs' design half) stay <= {MAX_CORPUS_FALSE_STOPS:.0%}, whose FPR stays <= "
        f"{MAX_FPR:.0%} and AR(1) FPR <= {MAX_AR1_FPR:.0%} at every density "
        f"({', '.join(best.index)}), it has the best mean recall of the public runs' declines "
        f"(design half, {best.design_recall.iloc[0]:.1%}; simulated: "
        f"{best.recall.iloc[0]:.1%})")


def recommendation_lines(summary: pd.DataFrame) -> list[str]:
    """The default (a run on its own) and, where it differs, the pick for groups of runs."""
    default, why = recommend(summary, alone=True)
    lines = [f"**Default** (`DEFAULT_DETECTOR`: a budget that holds for a run on its own, "
             f"whatever its peers): `{default}`: {why}." if default
             else f"**Default:** none: {why}."]
    lines += target_lines(summary, default) if default else []
    grouped, why = recommend(summary)
    if grouped != default:
        lines += ["", f"**For groups of runs** (MonitorGroup, Optuna, Ray Tune, `replay "
                     f"--group-by`; its budget holds as far as new healthy runs resemble the "
                     f"group's healthy ones): `{grouped}`: {why}."]
    return lines


def target_lines(summary: pd.DataFrame, default: str) -> list[str]:
    """The default against what a default must reach on real runs (the public test half) and
    keep in the simulator, each target met or missed with the measured number (none without the
    public corpus's columns)."""
    if "test_recall" not in summary.columns:
        return []
    rows = summary[summary.detector == default].set_index("density")
    checks = [(f"test recall at {d} >= {pct(RECALL_TARGETS[d])}",
               rows.at[d, "test_recall"], rows.at[d, "test_recall"] >= RECALL_TARGETS[d])
              for d in RECALL_TARGETS]
    checks += [(f"test false stops at {d} <= {pct(MAX_PUBLIC_FALSE_STOPS)}",
                rows.at[d, "test_false_stops"],
                rows.at[d, "test_false_stops"] <= MAX_PUBLIC_FALSE_STOPS) for d in RECALL_TARGETS]
    checks += [(f"E2 recall at 5% >= {pct(E2_RECALL_PROMISE)}", rows.at["5%", "recall"],
                rows.at["5%", "recall"] >= E2_RECALL_PROMISE)]
    cells = "; ".join(f"{name}: {pct(value)} ({'met' if ok else 'missed'})"
                      for name, value, ok in checks)
    return ["", f"**The default against its targets:** {cells}. Where recall is missed, the "
                "table of what the curves show before their last eval says how much of it the "
                "curves hold at that density."]


def pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"


def render(summary: pd.DataFrame, seeds: Sequence[int], corpus_runs: int | None,
           public: pd.DataFrame | None = None) -> str:
    """The `## Which detector?` section, markers included."""
    lines = [START, "## Which detector?", "",
             "Generated by `evalstop-bench which-detector --beyond BEYOND.md` over "
             f"seeds {', '.join(map(str, seeds))}; do not edit by hand. E2 over SRTF-Est; recall, "
             "before-completion recall (early), GPU-minutes saved per run and FPR (healthy RLHF "
             "jobs) at Gaussian sigma 0.05; AR(1) rho 0.5 sigma 0.1 recall and FPR, and the FPR "
             "over the healthy jobs of every type the detector monitors (DPO jobs, which never "
             "decline in E2, as well); recall and FPR under the drift noise fitted to the "
             "public runs (`docs/noise.md`: a slow drift in progress beside i.i.d. noise, "
             f"sigma {NOISES['drift']['noise.sigma']:g}; the oracle, which assumes i.i.d. "
             "noise there, has no drift columns); "
             "false stops of the corpus's healthy runs"
             + (f" (the first {corpus_runs} of each family)" if corpus_runs else "")
             + "; the Bayes oracle's recall at the detector's own FPR (Gaussian and AR(1); the "
             "oracle knows the generative model, `benchmarks/detectors/oracle.py`, and is "
             "thresholded on one run's peak posteriors) and the detector's share of it. The "
             f"oracle's row: its recall at FPR <= {ORACLE_FPR:.0%}.", ""]
    for density in DENSITIES:
        lines += [f"### Evals every {density}" if density != "native"
                  else "### Native density (1/60)", "",
                  "| detector | recall | early | GPU-min saved | FPR | AR(1) recall | AR(1) FPR "
                  "| AR(1) FPR, all monitored | drift recall | drift FPR | corpus false stops "
                  "| oracle recall at this FPR | share of oracle "
                  "| AR(1) oracle recall at this FPR |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in summary[summary.density == density].itertuples():
            saved = "n/a" if pd.isna(r.gpu_min_saved) else f"{r.gpu_min_saved:.0f}"
            lines.append(f"| {r.detector} | {pct(r.recall)} | {pct(r.recall_early)} | "
                         f"{saved} | {pct(r.fpr)} | {pct(r.ar1_recall)} | "
                         f"{pct(r.ar1_fpr)} | {pct(r.ar1_fpr_monitored)} | "
                         f"{pct(r.drift_recall)} | {pct(r.drift_fpr)} | "
                         f"{pct(r.corpus_false_stops)} | "
                         f"{pct(r.oracle_recall)} | {pct(r.share_of_oracle)} | "
                         f"{pct(r.ar1_oracle_recall)} |")
        lines.append("")
    lines += public_lines(summary, public) if public is not None and len(public) else []
    lines += [*recommendation_lines(summary), END]
    return "\n".join(lines) + "\n"


def public_lines(summary: pd.DataFrame, public: pd.DataFrame) -> list[str]:
    """The public corpus's table: each detector at each density, design half beside test half."""
    runs = public.drop_duplicates("run_id")
    count = {(split, label): int(((runs.split == split) & (runs.label == label)).sum())
             for split in ("design", "test") for label in ("declining", "healthy")}
    lines = ["### Real public runs", "",
             f"{len(runs)} public training runs (`evalstop_gym/traces/data/public/`: each "
             "run's repository, commit, path and licence in `provenance.json`; labels read in "
             "hindsight from the whole curve by `traces.public_runs.hindsight_label`), each "
             "replayed alone at its logged density and at evals every 5, 10 and 15%; split by "
             f"repository into a design half ({count['design', 'declining']} declining, "
             f"{count['design', 'healthy']} healthy) and a test half "
             f"({count['test', 'declining']} declining, {count['test', 'healthy']} healthy), "
             "ambiguous runs in neither count. Recall: declining runs stopped before their "
             "last eval; false stops: healthy runs stopped before their last eval; on the test "
             "half, the share of the evals after the best that stops spared (decline avoided), "
             "the share of the gain a healthy run's kept checkpoint lost to a stop (gain lost), "
             "and how far below its best a run was when stopped (the median over stops, as a "
             "share of what it had gained).", "",
             "![recall against false stops of the public runs](figures/beyond_public.png)", "",
             "| detector | density | design recall | design false stops | test recall "
             "| test false stops | test decline avoided | test gain lost | drop at stop |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary[summary.detector != ORACLE].itertuples():
        lines.append(f"| {r.detector} | {r.density} | {pct(r.design_recall)} | "
                     f"{pct(r.design_false_stops)} | {pct(r.test_recall)} | "
                     f"{pct(r.test_false_stops)} | {pct(r.test_decline_avoided)} | "
                     f"{pct(r.test_gain_lost)} | {pct(r.test_drop_share)} |")
    return [*lines, "", *visible_lines(public)]


def visible_lines(public: pd.DataFrame) -> list[str]:
    """How much of the declines the curves show before their last eval (`public_limit`): the
    scale the recall above is read on."""
    ids = set(public.run_id)
    seen = visible_declines([run for run in load_public() if run.run_id in ids])
    lines = ["What the curves show before their last eval (`corpus.public_limit`): the "
             "labelling rule itself, told each run's noise, applied to the evals before the "
             "last at each density. It sees fewer declines the sparser the evals: a decline "
             "plain in the whole curve can leave one low eval, or none, before the end. Not a "
             "bound on a detector (the rule knows the noise and judges one look), a scale for "
             "its recall.", "",
             "| density | design: declines visible | design: healthy read declining "
             "| test: declines visible | test: healthy read declining |",
             "|---|---|---|---|---|"]
    for density in DENSITIES:
        row = seen[seen.density == density].set_index("split")
        cells = [f"{pct(row.at[split, col])}" if split in row.index else "-"
                 for split in ("design", "test")
                 for col in ("visible", "healthy_read_declining")]
        lines.append(f"| {density} | {' | '.join(cells)} |")
    return [*lines, ""]


def draw_public(summary: pd.DataFrame) -> Figure:
    """Recall against false stops of the public runs, one panel per density: each detector's
    design half (hollow) and test half (filled)."""
    import matplotlib.pyplot as plt

    from ..analysis.figure_style import DOUBLE, MARKERS, family, policy_styles, style

    rows = summary[summary.detector != ORACLE]
    styles = policy_styles(rows.detector)
    variant: dict[str, int] = {}
    markers = {}
    for name in dict.fromkeys(rows.detector):   # a family's variants differ by marker
        v = variant[str(family(name))] = variant.get(str(family(name)), -1) + 1
        markers[name] = MARKERS[(MARKERS.index(styles[name]["marker"]) + v) % len(MARKERS)]
    with style():
        fig, axes = plt.subplots(1, len(DENSITIES), figsize=(DOUBLE, 2.6), sharey=True,
                                 sharex=True)
        for ax, density in zip(axes, DENSITIES, strict=True):
            for r in rows[rows.density == density].itertuples():
                colour = styles[r.detector]["color"]
                ax.plot(100 * r.design_false_stops, 100 * r.design_recall,
                        markers[r.detector], mfc="none", color=colour)
                ax.plot(100 * r.test_false_stops, 100 * r.test_recall, markers[r.detector],
                        color=colour, label=r.detector)
            ax.axvline(100 * MAX_PUBLIC_FALSE_STOPS, color="0.6", lw=0.8, ls=":")
            ax.set(title=f"evals every {density}" if density != "native" else "native")
        axes[0].set_ylabel("declines stopped (%)")
        fig.supxlabel("healthy runs stopped (%)", fontsize="medium")
        axes[-1].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.suptitle("Public runs: design half hollow, test half filled; dotted: the "
                     f"{MAX_PUBLIC_FALSE_STOPS:.0%} budget")
    return fig


def trend_cost(sizes: Sequence[int] = COST_SIZES) -> pd.DataFrame:
    """What TrendTest costs on a live run of n evals (a RunMonitor fed a rising curve, so every
    eval is judged): the calibration from cold (seconds, tracemalloc peak MB) and then the
    monitor's updates (microseconds per eval, peak MB). Printed by `--trend-cost`; not a test:
    the rates move on a shared machine, the memory does not."""
    import time
    import tracemalloc

    from evalstop_gym.online import RunMonitor
    from evalstop_gym.policies.trend_null import grid_threshold, null_paths

    rows = []
    for n in sizes:
        null_paths.cache_clear()
        grid_threshold.cache_clear()
        tracemalloc.start()
        t0 = time.perf_counter()
        monitor = RunMonitor("TrendTest-0.05", mode="max", max_steps=n)
        monitor.update(1, 0.0)
        for i in range(2, 5):            # the first judged eval calibrates for n looks
            monitor.update(i, 0.001 * i)
        calibrate = time.perf_counter() - t0
        cal_peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.reset_peak()
        t1 = time.perf_counter()
        for i in range(5, n + 1):
            monitor.update(i, 0.001 * i + 0.0001 * math.sin(i))
        per_eval = (time.perf_counter() - t1) / max(n - 4, 1)
        rows.append({"evals": n, "calibration_s": calibrate, "calibration_peak_mb": cal_peak,
                     "us_per_eval": 1e6 * per_eval,
                     "monitor_peak_mb": tracemalloc.get_traced_memory()[1] / 1e6})
        tracemalloc.stop()
    return pd.DataFrame(rows)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", type=Path, default=Path("results/which_detector"),
                   help="folder for the rows (CSV), the section (markdown) and runs/, where each "
                        "finished simulated run is saved: the same command again resumes, "
                        "rerunning only runs whose cell, overrides or code changed "
                        "(default: results/which_detector)")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS), metavar="SEED",
                   help="E2 workload seeds, whole numbers >= 0 (default: the paper's five, "
                        f"{' '.join(map(str, SEEDS))})")
    p.add_argument("--n-jobs", type=int, default=1,
                   help="simulated runs in parallel (joblib processes), >= 1 (default: 1)")
    p.add_argument("--detectors", nargs="+", default=list(DETECTORS), metavar="NAME",
                   help="detectors to measure, each a registered name with its arguments "
                        "(e.g. TrendTest-0.05, EvalStop-2, BOCPD-0.5) or a class in a file of "
                        "yours, FILE.py:Class-ARGS (e.g. mine.py:DropFromBest-0.1); the oracle "
                        f"is always added (default: {' '.join(DETECTORS)})")
    p.add_argument("--beyond", type=Path, metavar="BEYOND.md",
                   help="write the section between the Which detector? markers of this file")
    p.add_argument("--trend-cost", action="store_true",
                   help="print TrendTest's cost on live runs of 1k and 10k evals, and exit")
    p.add_argument("--quick", action="store_true",
                   help="tiny settings for tests: 40 jobs, 3 healthy corpus runs per family, "
                        "8 public runs")


def main(args: argparse.Namespace | Sequence[str] | None = None) -> int:
    """`evalstop-bench which-detector` (a parsed namespace), or `python -m` (an argv list)."""
    if not isinstance(args, argparse.Namespace):
        p = argparse.ArgumentParser(prog=PROG, description=__doc__.split("\n")[0])
        add_arguments(p)
        args = p.parse_args(args)
        try:
            check_args(args)
        except (UsageError, PolicyNameError) as exc:
            p.error(str(exc))
    else:   # evalstop-bench reports its users' errors in one line itself
        check_args(args)
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.trend_cost:
        log.info("%s", trend_cost().to_string(index=False, float_format="%.3g"))
        return 0
    overrides = {"workload.n_jobs": 40} if args.quick else {}
    corpus_runs = 3 if args.quick else None
    try:
        sim, corpus, oracle, public = measure(args.detectors, args.seeds, args.n_jobs,
                                              overrides, corpus_runs, 8 if args.quick else None,
                                              out=args.out)
    except KeyboardInterrupt:
        stop_workers()
        log.warning("interrupted: the finished runs are saved in %s; the same command resumes",
                    args.out / "runs")
        return 130
    write_results(args, sim, corpus, oracle, public, corpus_runs)
    return 0


def check_args(args: argparse.Namespace) -> None:
    """Every argument checked, in one line each, before any run."""
    if args.n_jobs < 1:
        raise UsageError(f"--n-jobs {args.n_jobs}: expected a whole number >= 1")
    if any(s < 0 for s in args.seeds):
        raise UsageError(f"--seeds {' '.join(map(str, args.seeds))}: expected whole numbers >= 0")
    for name in args.detectors:
        make_detector(name)   # a bad name fails here, in one line, before any run
    if args.beyond is not None:
        sections.check_document(args.beyond, "--beyond")


def write_results(args: argparse.Namespace, sim: pd.DataFrame, corpus: pd.DataFrame,
                  oracle: pd.DataFrame, public: pd.DataFrame, corpus_runs: int | None) -> None:
    """The rows, the section and the figure into --out (and the section into --beyond)."""
    from ..analysis.figures import save

    summary = summarise(sim, corpus, oracle, public)
    section = render(summary, args.seeds, corpus_runs, public)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(sim, args.out / "simulated.csv")
    write_csv(corpus, args.out / "corpus.csv")
    write_csv(oracle, args.out / "oracle_jobs.csv")
    write_csv(public, args.out / "public.csv")
    write_csv(summary, args.out / "summary.csv")
    write_text(args.out / "which_detector.md", section)
    save(draw_public(summary), (args.beyond.parent if args.beyond else args.out) / "figures",
         "beyond_public")
    if args.beyond is not None:
        sections.write_into(args.beyond, sections.WHICH_DETECTOR, section)
    print(section)


if __name__ == "__main__":
    raise SystemExit(main())
