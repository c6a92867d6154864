"""`evalstop-bench replay LOGS...`: what each detector would have done on your own runs.

Logs: replay CSVs, Hugging Face trainer_state.json, Lightning metrics.csv, TensorBoard event
files, MLflow and W&B CSV exports (`traces.log_formats` says how each is mapped). The metric is
`--metric`, else the log's choice, else by a documented priority (`traces.log_metrics`); why is
printed. A log without the metric is skipped with a line naming its keys; if every log lacks
it, replay fails with exit code 2.

Every logged run is fed eval by eval to a `RunMonitor` (the live monitor, so replay and a live
run decide alike) with the run's direction: `--mode`, else the log's `greater_is_better`, else
the metric's name (loss, wer, cer, perplexity, error, plurals and suffixes too: lower is
better); the metric and what decided its direction are printed. Progress is step / the log's
`max_steps` (a replay CSV's `max_steps` column), else step / the run's last logged step.
The table says where the detector would have stopped and which checkpoint stop-and-save would
have kept (the best eval up to the stop; the final one if it
never stops); a detector that cannot act on a log (no training loss for LossPlateau, a job type
it does not monitor) says so in the `note` column.

Detectors that learn across runs (MedianPruner, CUSUM and BOCPD with the pooled noise estimate)
judge each run with every *other* run of its group as a finished peer (leave one out), so the
order of the files never changes a result. Groups (`--group-by`): one per metric and direction
(default), one per file, each run alone, or all runs together; a group that mixes metrics is
reported with a warning. A peer counts as completed unless its log stops before its max_steps;
a run its CSV marks `completed=no` (it crashed) is replayed but is never any run's peer (the
run list says so).
Cost is linear in a log's length for the detectors whose update is O(1) (see `online`). A
detector that learns from other runs is judged leave-one-out, each run by a fresh detector
fed every other run of its group: O(runs^2) per group, times that detector's own cost. The
default detectors are all O(1) or O(window) per eval (EvalStop, Patience, MedianPruner), so a
run of thousands of evals replays in seconds; CUSUM and BOCPD with the pooled noise estimate
rescan a run's history at each eval and are replayed only when named. A progress bar (evals
replayed) goes to stderr.
"""

from __future__ import annotations

import argparse
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from evalstop_gym.online import RunMonitor
from evalstop_gym.policies import PolicyNameError, make_detector
from evalstop_gym.policies.detector import learns_from_runs
from evalstop_gym.sim.protocols import CONTINUE, Detector, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView
from evalstop_gym.sim.workload import JOB_TYPES
from evalstop_gym.traces.log_formats import FORMATS, read_logs_skipping
from evalstop_gym.traces.logs import LogError, LoggedRun

from ..analysis import tables
from ..durable import write_csv

DEFAULT_DETECTORS = ("EvalStop-2", "Patience-3", "MedianPruner")   # O(1)/O(window) per eval
GROUP_BY = ("metric", "file", "run", "none")


class ReplayRow(NamedTuple):
    run: str
    metric: str
    mode: str
    detector: str
    stopped: bool
    stop_step: float | None      # a logged step (integral in most logs)
    stop_progress: float
    kept_step: float
    kept_score: float
    final_score: float
    best_score: float
    note: str
    reason: str


def monitor_for(run: LoggedRun, detector: Detector | str, job_type: str) -> RunMonitor:
    return RunMonitor(detector, run.mode, run.max_steps or run.steps[-1], job_type)


def _loss(x: float) -> float | None:
    return None if math.isnan(x) else x


class _RecordOnly:
    """The detector of a monitor that only records (a peer's log): it is never asked, and it
    takes every job type, so building a peer of a LoRA run warns of nothing."""

    name = "record-only"
    milestones: tuple[float, ...] = ()
    types: tuple[str, ...] = JOB_TYPES
    needs: tuple[str, ...] = ("evals",)

    def decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        pass

    def reset(self) -> None:
        pass


def peer_view(run: LoggedRun, job_type: str) -> SchedulerJobView:
    """A finished run as a peer: 'completed' unless its log stops before its max_steps."""
    monitor = monitor_for(run, _RecordOnly(), job_type)   # records only; never decides
    for step, value, loss in zip(run.steps, run.values, run.losses, strict=True):
        monitor.record(step, value, _loss(loss))
    completed = run.completed if run.completed is not None else \
        run.max_steps is None or run.steps[-1] >= run.max_steps
    return monitor.final_view(completed)


def replay_run(run: LoggedRun, detector: Detector, job_type: str = "rlhf") -> ReplayRow:
    """Feed one run's evals to `detector` through a RunMonitor; where it stops, what it keeps."""
    monitor = monitor_for(run, detector, job_type)
    decision = None
    for step, value, loss in zip(run.steps, run.values, run.losses, strict=True):
        decision = monitor.update(step, value, _loss(loss))
        if decision.stop:
            break
    assert decision is not None
    best = min(run.values) if run.mode == "min" else max(run.values)
    why = monitor.cannot_act()
    stopped = decision.stop
    return ReplayRow(
        run.run_id, run.metric, run.mode, detector.name, stopped,
        decision.step if stopped else None, decision.progress if stopped else math.nan,
        decision.best_step if stopped else run.steps[-1],
        decision.best_value if stopped else run.values[-1], run.values[-1], best,
        f"cannot act: {why}" if why else "", monitor.reason)


def group_runs(runs: Sequence[LoggedRun], group_by: str) -> dict[str, list[LoggedRun]]:
    """Runs by group, each group in the order given (which does not change any result)."""
    if group_by not in GROUP_BY:
        raise LogError(f"--group-by={group_by!r}: expected one of {', '.join(GROUP_BY)}")
    groups: dict[str, list[LoggedRun]] = {}
    for i, run in enumerate(runs):
        key = {"metric": f"{run.metric} ({run.mode})", "file": run.source,
               "run": f"{i}:{run.run_id}", "none": "all"}[group_by]
        groups.setdefault(key, []).append(run)
    return groups


def mixed_groups(groups: dict[str, list[LoggedRun]]) -> list[str]:
    """Warnings for groups whose runs have different metrics or directions."""
    out = []
    for key, members in groups.items():
        kinds = sorted({f"{r.metric} ({r.mode})" for r in members})
        if len(kinds) > 1:
            out.append(f"group {key!r} pools runs of different metrics ({', '.join(kinds)}): "
                       f"cross-run detectors will compare them as one population")
    return out


def replay(runs: Sequence[LoggedRun], detectors: Sequence[str], job_type: str = "rlhf",
           group_by: str = "metric",
           progress: Callable[[int], None] | None = None) -> pd.DataFrame:
    """One row per (run, detector), runs in the order given; `progress(n)` hears each run's
    number of evals once it is replayed. A crashed run (`completed=no`) is no one's peer."""
    groups = group_runs(runs, group_by)
    peers: dict[str, list[SchedulerJobView | None]] = {}   # for the first cross-run detector
    rows: dict[tuple[int, int], ReplayRow] = {}
    order = {id(r): i for i, r in enumerate(runs)}
    for d, name in enumerate(detectors):
        made = make_detector(name)
        if made is None:
            continue
        cross = learns_from_runs(made)

        def fresh(name: str = name) -> Detector:
            made = make_detector(name)
            assert made is not None   # the name made a detector just above
            return made

        for key, members in groups.items():
            shared = fresh()
            if cross and key not in peers:
                peers[key] = [None if r.completed is False else peer_view(r, job_type)
                              for r in members]
            for i, run in enumerate(members):
                detector = fresh() if cross else shared
                if cross:
                    for j, view in enumerate(peers[key]):
                        if j != i and view is not None:
                            detector.on_job_end(view)
                rows[(order[id(run)], d)] = replay_run(run, detector, job_type)
                if progress is not None:
                    progress(len(run.steps))
    return pd.DataFrame([rows[k] for k in sorted(rows)], columns=list(ReplayRow._fields))


def to_markdown(table: pd.DataFrame) -> str:
    """The replay table for a terminal or a README (no `tabulate` needed)."""
    shown = table.drop(columns=["reason"]).assign(
        stop_step=table["stop_step"].map(lambda s: "-" if pd.isna(s) else str(int(s))),
        stop_progress=table["stop_progress"].map(lambda p: "-" if pd.isna(p) else f"{p:.2f}"),
        kept_score=table["kept_score"].map("{:.4g}".format),
        final_score=table["final_score"].map("{:.4g}".format),
        best_score=table["best_score"].map("{:.4g}".format))
    return tables.to_markdown(shown)


def describe(runs: Sequence[LoggedRun]) -> list[str]:
    """One line per run: the metric used, its direction and why, the length, the notes."""
    lines = []
    for run in runs:
        length = (f"max_steps {run.max_steps}" if run.max_steps is not None
                  else f"max_steps unknown: progress = step / last step {run.steps[-1]}")
        lines.append(f"{run.run_id}: {run.metric}, {'lower' if run.mode == 'min' else 'higher'}"
                     f" is better (from {run.mode_from}), {len(run.steps)} evals, {length}")
        lines.extend(f"  note: {note}" for note in run.notes)
        if run.completed is False:
            lines.append("  note: crashed (completed=no): replayed, but never a peer that "
                         "cross-run detectors learn from")
    return lines


def check_csv_folder(path: Path) -> None:
    """--csv's folder exists (replay does not create folders)."""
    if not path.parent.is_dir():
        raise LogError(f"--csv {path}: folder {path.parent} does not exist; create it first")


def write_csv_atomic(table: pd.DataFrame, path: Path) -> None:
    """The table written to a temp file beside `path`, then renamed onto it."""
    check_csv_folder(path)
    write_csv(table, path)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("logs", nargs="+", metavar="LOGS",
                   help=f"training logs, told apart by name and content: {'; '.join(FORMATS)}")
    p.add_argument("--detectors", nargs="+", default=list(DEFAULT_DETECTORS),
                   help=f"detector names (default: {' '.join(DEFAULT_DETECTORS)}: each costs "
                        "O(1) or O(window) per eval, so long runs replay in seconds; CUSUM and "
                        "BOCPD rescan a run's history at every eval and are slow on runs of "
                        "thousands of evals)")
    p.add_argument("--metric", default=None,
                   help="the eval metric (trainer_state.json key, CSV column, tag or key; "
                        "default: the log's metric_for_best_model, else the first known task "
                        "metric: accuracy, F1, WER, CER, ROUGE, BLEU, reward, else the eval "
                        "loss; replay CSV: eval_score). A log without it is skipped")
    p.add_argument("--mode", default=None, choices=("max", "min"),
                   help="higher (max) or lower (min) is better (default: the log's "
                        "greater_is_better, else from the metric's name)")
    p.add_argument("--job-type", default="rlhf", choices=("rlhf", "dpo", "lora"),
                   help="job type the detectors are told (LoRA is unmonitored by most)")
    p.add_argument("--group-by", default="metric", choices=GROUP_BY,
                   help="which runs cross-run detectors learn from together (default: metric)")
    p.add_argument("--csv", default=None, help="also write the table to this CSV file")


def main(args: argparse.Namespace) -> int:
    """Print the replay table; 2 on a bad log or detector name (the message says which)."""
    from tqdm import tqdm

    from ..usage import UsageError, check_output

    if args.csv:
        check_output(args.csv, "--csv", "file", args.logs)
    try:
        if args.csv:
            check_csv_folder(Path(args.csv))   # before the replay, not after it
        active = [d for d in args.detectors if make_detector(d) is not None]
        if not active:
            raise UsageError(f"--detectors {' '.join(args.detectors)}: no detector to replay; "
                             f"name one or more, e.g. {' '.join(DEFAULT_DETECTORS)}")
        runs, skipped = read_logs_skipping(args.logs, args.metric, args.mode)
        for line in skipped:
            print(f"skipped (no such metric): {line}", file=sys.stderr)
        warnings = mixed_groups(group_runs(runs, args.group_by))
        total = sum(len(r.steps) for r in runs) * len(active)
        with tqdm(total=total, desc="replay", unit="eval", file=sys.stderr, leave=False) as bar:
            table = replay(runs, args.detectors, args.job_type, args.group_by, bar.update)
        if args.csv:
            write_csv_atomic(table, Path(args.csv))
    except (LogError, PolicyNameError) as exc:
        print(f"evalstop-bench replay: {exc}", file=sys.stderr)
        return 2
    if any(learns_from_runs(make_detector(d)) for d in args.detectors):
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
    print("\n".join(describe(runs)) + "\n")
    print(to_markdown(table))
    return 0
