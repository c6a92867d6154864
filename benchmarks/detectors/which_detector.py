"""Which detector should be the default? Every candidate on E2 and on the corpus's healthy runs.

    evalstop-bench which-detector [--out DIR] [--seeds 42 123 ...] [--n-jobs 2]
        [--detectors NAME ... | FILE.py:Class-ARGS ...] [--beyond BEYOND.md] [--quick]

(or `python -m evalstop_gym.benchmarks.detectors.which_detector`, the same options). Each
finished simulated run is saved in `--out`/runs/<task> as it ends: stopped (Ctrl-C), the same
command resumes. Your own detector gets its row beside the built-ins and the oracle with
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
half and the test half (`corpus.public_scoring`). The recommendation and its budgets:
`which_study`. `--beyond` replaces the section between BEYOND.md's markers.

A view of the scoring machinery (`benchmarks.scoring`), as `evalstop-bench score` is: each
simulated cell is a scoring task, run through the sweep runner (each run saved as it ends, keyed
by what it depends on) and measured from its job records; the oracle's runs are the same probe
runs the score's references are measured with; real runs are judged through `online.RunMonitor`.
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from evalstop_gym.policies import PolicyNameError, make_detector
from evalstop_gym.traces.corpus import FAMILIES, load_family
from evalstop_gym.traces.public_runs import load_public

from .. import sections
from ..corpus.public_scoring import score_public
from ..corpus.scoring import score_run
from ..durable import write_csv, write_text
from ..scoring.measures import job_measures
from ..scoring.probes import run_probes
from ..scoring.tasks import run_tasks
from ..sweep.runner import DEFAULT_OPTIONS
from ..usage import UsageError
from .oracle import oracle_peaks
from .trend_cost import trend_cost
from .which_public import draw_public, public_lines
from .which_study import (
    BASE,
    DENSITIES,
    DETECTORS,
    END,
    NOISES,
    ORACLE_FPR,
    SEEDS,
    START,
    pct,
    study_tasks,
)
from .which_summary import recommendation_lines, summarise

log = logging.getLogger(__name__)
PROG = "evalstop-bench which-detector"
SIM_COLUMNS = ("detector", "noise", "density", "seed", "recall", "recall_early", "fpr",
               "fpr_monitored", "gpu_min_saved")


def simulated_rows(detectors: Sequence[str], seeds: Sequence[int], out: Path, n_jobs: int,
                   overrides: Mapping[str, object]) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(each detector's E2 runs over SRTF-Est, the oracle's RLHF jobs with their peak
    posteriors), one row per run and per job, in noise, density, detector, seed order: the
    study's cells run as scoring tasks, saved in `out` as they end and reused while nothing
    they depend on changed."""
    tasks = study_tasks(dict(overrides))
    cell = {task.id: {"noise": noise, "density": density}
            for (noise, density), task in tasks.items()}
    done = run_tasks(list(tasks.values()), BASE, seeds, detectors, out, n_jobs, DEFAULT_OPTIONS)
    runs = job_measures(done.runs, done.jobs).rename(columns={"policy": "detector"})
    runs = pd.concat([runs, pd.DataFrame(list(runs["task"].map(cell)))], axis=1)
    peaks = run_probes(oracle_peaks, list(tasks.values()), BASE, seeds, out, n_jobs)
    oracle = pd.concat([pd.DataFrame(list(peaks["task"].map(cell))), peaks], axis=1)
    return (runs[list(SIM_COLUMNS)],
            oracle[["noise", "density", "seed", "is_hacking", "peak", "peak_early"]])


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


def measure(detectors: Sequence[str], seeds: Sequence[int], out: Path, n_jobs: int = 1,
            overrides: Mapping[str, object] | None = None, corpus_runs: int | None = None,
            public_runs: int | None = None) -> tuple[pd.DataFrame, ...]:
    """(simulated rows, corpus rows, the oracle's RLHF jobs with their peak posteriors, public
    run rows): every run, with progress bars, seeds in parallel; each simulated run saved in
    `out/runs/` as it ends."""
    sim, oracle = simulated_rows(detectors, seeds, out / "runs", n_jobs, overrides or {})
    log.info("scoring the corpus's healthy runs")
    corpus = corpus_rows(detectors, corpus_runs)
    log.info("scoring the public runs")
    public = score_public(detectors, load_public()[:public_runs] if public_runs else None)
    return sim, corpus, oracle, public


def stop_workers() -> None:
    """End joblib's worker processes and release their semaphores (after a Ctrl-C)."""
    from joblib.externals.loky import get_reusable_executor  # type: ignore[import-untyped]

    get_reusable_executor().shutdown(wait=True, kill_workers=True)


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
        sim, corpus, oracle, public = measure(args.detectors, args.seeds, args.out,
                                              args.n_jobs, overrides, corpus_runs,
                                              8 if args.quick else None)
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
