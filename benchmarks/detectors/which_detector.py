"""Which detector should be the default? Every candidate on E2 and on the corpus's healthy runs.

    python -m evalstop_gym.benchmarks.detectors.which_detector [--out DIR] [--seeds 42 123 ...]
        [--n-jobs 2] [--beyond BEYOND.md] [--quick] [--trend-cost]

Simulated: E2 (SRTF-Est base) at eval noise sigma 0.05 (Gaussian) and under AR(1) rho 0.5 sigma
0.1, with evals every 5%, 10%, 15% and at the corpus's native density (1/60), per detector:
recall, recall before completion, GPU-minutes saved per run, FPR over healthy RLHF jobs (and,
under AR(1), over the healthy jobs of every type a detector monitors: DPO too); beside
them the Bayes oracle's recall at the detector's own FPR (`oracle.py`, which knows the generative
model; thresholded on one run's peak posteriors per seed) and each detector's share of it.
Real: the corpus's healthy runs, replayed at each density (leave one out peers for the detectors
that learn from runs; `benchmarks.corpus.scoring`), and the share a detector stops. The
recommendation is the detector with the best mean Gaussian recall among those whose corpus false
stops stay within `MAX_CORPUS_FALSE_STOPS` and whose AR(1) FPR stays within `MAX_AR1_FPR` at
every density. `--beyond` replaces the section between BEYOND.md's markers.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Mapping, Sequence
from pathlib import Path

import numpy as np
import pandas as pd

from evalstop_gym.policies import ComposedPolicy, SRTFEst, make_detector
from evalstop_gym.sim.protocols import capabilities
from evalstop_gym.simulate import resolve_config, simulate
from evalstop_gym.traces.corpus import FAMILIES, load_family

from .. import sections
from ..corpus.scoring import score_run
from ..durable import write_csv
from ..usage import UsageError
from .oracle import BayesOracle, recall_at_fpr

log = logging.getLogger(__name__)

DETECTORS = ("EvalStop-2", "Patience-3", "BOCPD-0.5", "DeclineTest-0.05", "TrendTest-0.05",
             "PeerPrior-0.05")
ORACLE = "Oracle"
DENSITIES = {"5%": 0.05, "10%": 0.10, "15%": 0.15, "native": 1.0 / 60.0}
NOISES = {"gauss": {"noise.model": "gaussian", "noise.sigma": 0.05},
          "ar1": {"noise.model": "ar1", "noise.rho": 0.5, "noise.sigma": 0.10}}
SEEDS = (42, 123, 456, 789, 1024)
MAX_CORPUS_FALSE_STOPS = 0.02
MAX_AR1_FPR = 0.05
ORACLE_FPR = 0.01   # the oracle's own row: its recall at FPR <= 1% (the detectors' bar)
# Detectors whose false-stop budget rests on the group's healthy peers resembling the run being
# judged (PeerPrior's: up to 2 alpha where they do not): recommended for groups of runs, never
# as the default that a lone run, or a group of unlike runs, gets without asking.
PEER_BUDGET = ("PeerPrior",)
COST_SIZES = (1_000, 10_000)
START, END = sections.markers(sections.WHICH_DETECTOR)


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


def measure(detectors: Sequence[str], seeds: Sequence[int], n_jobs: int = 1,
            overrides: Mapping[str, object] | None = None,
            corpus_runs: int | None = None) -> tuple[pd.DataFrame, pd.DataFrame, pd.DataFrame]:
    """(simulated rows, corpus rows, the oracle's RLHF jobs with their peak posteriors): every
    run, with a progress bar, seeds in parallel."""
    from joblib import Parallel, delayed
    from tqdm import tqdm

    tasks = [(d, n, dens, s) for n in NOISES for dens in DENSITIES
             for d in [*detectors, ORACLE] for s in seeds]
    run = Parallel(n_jobs=n_jobs, return_as="generator")(
        delayed(sim_row)(*t, overrides or {}) for t in tasks)
    rows = list(tqdm(run, total=len(tasks), desc="simulated runs"))
    sim = pd.DataFrame([r for r in rows if "jobs" not in r])
    oracle = pd.DataFrame([{**{k: r[k] for k in ("noise", "density", "seed")}, **job}
                           for r in rows if "jobs" in r for job in r["jobs"]])
    log.info("scoring the corpus's healthy runs")
    corpus = corpus_rows(detectors, corpus_runs)
    return sim, corpus, oracle


def oracle_at(oracle: pd.DataFrame, noise: str, density: str,
              fpr: float) -> tuple[float, float, float]:
    """The oracle's (recall, early recall, FPR) at the threshold whose FPR is at most `fpr`,
    over every seed's RLHF jobs at this noise and density."""
    jobs = oracle[(oracle.noise == noise) & (oracle.density == density)]
    healthy, hacking = jobs[~jobs.is_hacking], jobs[jobs.is_hacking]
    threshold, recall = recall_at_fpr(healthy.peak.to_numpy(), hacking.peak.to_numpy(), fpr)
    early = float(np.mean(hacking.peak_early.to_numpy() > threshold))
    return recall, early, float(np.mean(healthy.peak.to_numpy() > threshold))


def summarise(sim: pd.DataFrame, corpus: pd.DataFrame, oracle: pd.DataFrame) -> pd.DataFrame:
    """One row per (density, detector): the means over seeds, the corpus's false stops and the
    oracle's recall at the detector's own FPR (Gaussian and AR(1)); then the oracle itself at
    `ORACLE_FPR`."""
    mean = sim.groupby(["noise", "density", "detector"], sort=False)[
        ["recall", "recall_early", "fpr", "fpr_monitored", "gpu_min_saved"]].mean()
    rows = []
    for density in DENSITIES:
        for det in mean.index.get_level_values("detector").unique():
            g, a = mean.loc[("gauss", density, det)], mean.loc[("ar1", density, det)]
            stops = corpus[(corpus.density == density) & (corpus.detector == det)]["stopped"]
            best = oracle_at(oracle, "gauss", density, g.fpr)[0]
            rows.append({"density": density, "detector": det, "recall": g.recall,
                         "recall_early": g.recall_early, "gpu_min_saved": g.gpu_min_saved,
                         "fpr": g.fpr, "ar1_recall": a.recall, "ar1_fpr": a.fpr,
                         "ar1_fpr_monitored": a.fpr_monitored,
                         "corpus_false_stops": stops.mean() if len(stops) else np.nan,
                         "oracle_recall": best,
                         "ar1_oracle_recall": oracle_at(oracle, "ar1", density, a.fpr)[0],
                         "share_of_oracle": g.recall / best if best > 0 else np.nan})
        recall, early, fpr = oracle_at(oracle, "gauss", density, ORACLE_FPR)
        ar1_recall, _, ar1_fpr = oracle_at(oracle, "ar1", density, ORACLE_FPR)
        rows.append({"density": density, "detector": ORACLE, "recall": recall,
                     "recall_early": early, "gpu_min_saved": np.nan, "fpr": fpr,
                     "ar1_recall": ar1_recall, "ar1_fpr": ar1_fpr, "ar1_fpr_monitored": np.nan,
                     "corpus_false_stops": np.nan, "oracle_recall": recall,
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
                       and (g.ar1_fpr <= MAX_AR1_FPR).all()))
    if safe.empty:
        return None, (f"no detector kept corpus false stops <= {MAX_CORPUS_FALSE_STOPS:.0%} and "
                      f"AR(1) FPR <= {MAX_AR1_FPR:.0%} at every density")
    best = safe.groupby("detector")["recall"].mean().sort_values(ascending=False)
    return str(best.index[0]), (
        f"of the detectors whose false stops of the corpus's healthy runs stay <= "
        f"{MAX_CORPUS_FALSE_STOPS:.0%} and whose AR(1) FPR stays <= {MAX_AR1_FPR:.0%} at every "
        f"density ({', '.join(best.index)}), it has the best mean recall ({best.iloc[0]:.1%})")


def recommendation_lines(summary: pd.DataFrame) -> list[str]:
    """The default (a run on its own) and, where it differs, the pick for groups of runs."""
    default, why = recommend(summary, alone=True)
    lines = [f"**Default** (`DEFAULT_DETECTOR`: a budget that holds for a run on its own, "
             f"whatever its peers): `{default}`: {why}." if default
             else f"**Default:** none: {why}."]
    grouped, why = recommend(summary)
    if grouped != default:
        lines += ["", f"**For groups of runs** (MonitorGroup, Optuna, Ray Tune, `replay "
                     f"--group-by`; its budget holds as far as new healthy runs resemble the "
                     f"group's healthy ones): `{grouped}`: {why}."]
    return lines


def pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"


def render(summary: pd.DataFrame, seeds: Sequence[int], corpus_runs: int | None) -> str:
    """The `## Which detector?` section, markers included."""
    lines = [START, "## Which detector?", "",
             "Generated by `python -m evalstop_gym.benchmarks.detectors.which_detector` over "
             f"seeds {', '.join(map(str, seeds))}; do not edit by hand. E2 over SRTF-Est; recall, "
             "before-completion recall (early), GPU-minutes saved per run and FPR (healthy RLHF "
             "jobs) at Gaussian sigma 0.05; AR(1) rho 0.5 sigma 0.1 recall and FPR, and the FPR "
             "over the healthy jobs of every type the detector monitors (DPO jobs, which never "
             "decline in E2, as well); false stops of the corpus's healthy runs"
             + (f" (the first {corpus_runs} of each family)" if corpus_runs else "")
             + "; the Bayes oracle's recall at the detector's own FPR (Gaussian and AR(1); the "
             "oracle knows the generative model, `benchmarks/detectors/oracle.py`, and is "
             "thresholded on one run's peak posteriors) and the detector's share of it. The "
             f"oracle's row: its recall at FPR <= {ORACLE_FPR:.0%}.", ""]
    for density in DENSITIES:
        lines += [f"### Evals every {density}" if density != "native"
                  else "### Native density (1/60)", "",
                  "| detector | recall | early | GPU-min saved | FPR | AR(1) recall | AR(1) FPR "
                  "| AR(1) FPR, all monitored | corpus false stops | oracle recall at this FPR "
                  "| share of oracle | AR(1) oracle recall at this FPR |",
                  "|---|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in summary[summary.density == density].itertuples():
            saved = "n/a" if pd.isna(r.gpu_min_saved) else f"{r.gpu_min_saved:.0f}"
            lines.append(f"| {r.detector} | {pct(r.recall)} | {pct(r.recall_early)} | "
                         f"{saved} | {pct(r.fpr)} | {pct(r.ar1_recall)} | "
                         f"{pct(r.ar1_fpr)} | {pct(r.ar1_fpr_monitored)} | "
                         f"{pct(r.corpus_false_stops)} | "
                         f"{pct(r.oracle_recall)} | {pct(r.share_of_oracle)} | "
                         f"{pct(r.ar1_oracle_recall)} |")
        lines.append("")
    lines += [*recommendation_lines(summary), END]
    return "\n".join(lines) + "\n"


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


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evalstop_gym.benchmarks.detectors.which_detector",
                                description=__doc__.split("\n")[0])
    p.add_argument("--out", type=Path, default=Path("results/which_detector"),
                   help="folder for the rows (CSV) and the section (markdown)")
    p.add_argument("--seeds", type=int, nargs="+", default=list(SEEDS))
    p.add_argument("--n-jobs", type=int, default=1, help="parallel runs (joblib), >= 1")
    p.add_argument("--detectors", nargs="+", default=list(DETECTORS))
    p.add_argument("--beyond", type=Path, help="BEYOND.md to write the section into")
    p.add_argument("--trend-cost", action="store_true",
                   help="print TrendTest's cost on live runs of 1k and 10k evals, and exit")
    p.add_argument("--quick", action="store_true",
                   help="tiny settings for tests: 40 jobs, 3 healthy corpus runs per family")
    args = p.parse_args(argv)
    if args.n_jobs < 1:
        p.error(f"--n-jobs must be >= 1, got {args.n_jobs}")
    if any(s < 0 for s in args.seeds):
        p.error("--seeds must be integers >= 0")
    for name in args.detectors:
        make_detector(name)   # a bad name fails here, in one line, before any run
    if args.beyond is not None:
        try:
            sections.check_document(args.beyond, "--beyond")
        except UsageError as exc:
            p.error(str(exc))
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    if args.trend_cost:
        log.info("%s", trend_cost().to_string(index=False, float_format="%.3g"))
        return 0
    overrides = {"workload.n_jobs": 40} if args.quick else {}
    corpus_runs = 3 if args.quick else None
    sim, corpus, oracle = measure(args.detectors, args.seeds, args.n_jobs, overrides,
                                  corpus_runs)
    summary = summarise(sim, corpus, oracle)
    section = render(summary, args.seeds, corpus_runs)
    args.out.mkdir(parents=True, exist_ok=True)
    write_csv(sim, args.out / "simulated.csv")
    write_csv(corpus, args.out / "corpus.csv")
    write_csv(oracle, args.out / "oracle_jobs.csv")
    write_csv(summary, args.out / "summary.csv")
    (args.out / "which_detector.md").write_text(section)
    if args.beyond is not None:
        sections.write_into(args.beyond, sections.WHICH_DETECTOR, section)
    log.info("%s", section)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
