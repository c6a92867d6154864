"""`evalstop-bench replay LOGS...`: what each detector would have done on your own runs.

For every logged run and every detector, the detector is shown the run's evals one at a time
(progress = step / last step of that run) exactly as a scheduler would see them. The table says
where it would have stopped (step, progress) and which checkpoint stop-and-save would have kept
(the best eval up to the stop; the final one if it never stops). Runs are replayed in the order
given, and each is reported to the detector as finished before the next starts, so detectors that
learn across jobs (CUSUM and BOCPD's noise estimate, MedianPruner's peers) learn as a platform
would. StopAt-p acts at the first eval at or past p, as logs hold no other check points.
"""

from __future__ import annotations

import argparse
import dataclasses
import math
from collections.abc import Sequence
from typing import NamedTuple

import pandas as pd

from evalstop_gym.traces.logs import REPLAY_CLUSTER, LogError, LoggedRun, read_logs, replay_views
from evalstop_gym.policies import PolicyNameError, make_detector

from . import tables

DEFAULT_DETECTORS = ("EvalStop-2", "Patience-3", "CUSUM-0-3", "BOCPD-0.5", "MedianPruner")


class ReplayRow(NamedTuple):
    run: str
    detector: str
    stopped: bool
    stop_step: int | None
    stop_progress: float
    kept_step: int
    kept_score: float
    final_score: float
    best_score: float
    reason: str


def replay_run(run: LoggedRun, detector, job_type: str = "rlhf") -> ReplayRow:
    """Feed one run's evals to `detector`; report where it stops and what it keeps."""
    views = replay_views(run, job_type)
    stop_at, reason = None, ""
    for i, view in enumerate(views):
        decision = detector.decide(view, REPLAY_CLUSTER)
        if decision.stop:
            stop_at, reason = i, decision.reason
            break
    last = views[-1] if stop_at is None else dataclasses.replace(views[stop_at], state="stopped")
    detector.on_job_end(last)
    end = len(run.steps) - 1 if stop_at is None else stop_at
    kept = max(range(end + 1), key=lambda i: run.scores[i]) if stop_at is not None else end
    return ReplayRow(run.run_id, detector.name, stop_at is not None,
                     run.steps[stop_at] if stop_at is not None else None,
                     views[end].progress if stop_at is not None else math.nan,
                     run.steps[kept], run.scores[kept], run.scores[-1], max(run.scores), reason)


def replay(runs: Sequence[LoggedRun], detectors: Sequence[str],
           job_type: str = "rlhf") -> pd.DataFrame:
    """One row per (run, detector); each detector is fresh and sees the runs in order."""
    rows = []
    for name in detectors:
        detector = make_detector(name)
        if detector is None:
            continue
        detector.reset()
        rows.extend(replay_run(run, detector, job_type) for run in runs)
    return pd.DataFrame(rows, columns=list(ReplayRow._fields))


def to_markdown(table: pd.DataFrame) -> str:
    """The replay table for a terminal or a README (no `tabulate` needed)."""
    shown = table.drop(columns=["reason"]).assign(
        stop_step=table["stop_step"].map(lambda s: "-" if pd.isna(s) else str(int(s))),
        stop_progress=table["stop_progress"].map(lambda p: "-" if pd.isna(p) else f"{p:.2f}"),
        kept_score=table["kept_score"].map("{:.4g}".format),
        final_score=table["final_score"].map("{:.4g}".format),
        best_score=table["best_score"].map("{:.4g}".format))
    return tables.to_markdown(shown)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOGS",
                   help="CSV (job_id, step, eval_score[, loss]) or trainer_state.json files, "
                        "or checkpoint directories holding a trainer_state.json")
    p.add_argument("--detectors", nargs="+", default=list(DEFAULT_DETECTORS),
                   help=f"detector names (default: {' '.join(DEFAULT_DETECTORS)})")
    p.add_argument("--metric", default=None,
                   help="trainer_state.json eval metric (default: first eval_* that is not "
                        "loss/runtime/throughput; -eval_loss if that is the only one)")
    p.add_argument("--job-type", default="rlhf", choices=("rlhf", "dpo", "lora"),
                   help="job type the detectors are told (LoRA is unmonitored by most)")
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")


def main(args: argparse.Namespace) -> int:
    """Print the replay table; 2 on a bad log or detector name (the message says which)."""
    import sys

    try:
        runs = read_logs(args.logs, args.metric)
        table = replay(runs, args.detectors, args.job_type)
    except (LogError, PolicyNameError) as exc:
        print(f"evalstop-bench replay: {exc}", file=sys.stderr)
        return 2
    if args.csv:
        table.to_csv(args.csv, index=False)
    print(to_markdown(table))
    return 0
