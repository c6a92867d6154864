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
The table (`replay_logs`, also `evalstop_gym.replay`: a tidy DataFrame, one row per run and
detector) says where the detector would have stopped and which checkpoint stop-and-save would
have kept (the best eval up to the stop; the final one if it never stops); a detector that
cannot act on a log (no training loss for LossPlateau, a job type it does not monitor, too few
ended peers for MedianPruner) says so in the `note` column (`RunMonitor.cannot_act`). Steps are
the trainer's: a Lightning `metrics.csv` logs validation at global_step - 1, and its steps are
shifted by one so that a kept step names the `epoch=E-step=S.ckpt` ModelCheckpoint saved.
`--plot OUT` draws each run's curve with the best, each detector's stop and the kept checkpoint
(`replay_plot`).

The detectors are `DEFAULT_DETECTOR` alone unless `--detectors` names others; `--compare` adds
`COMPARE`, a short list of single-run rules beside it (each O(1) or O(window) per eval).

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
default detector and the `--compare` list cost O(1) or O(window) per eval, so a run of
thousands of evals replays in seconds; CUSUM and BOCPD with the pooled noise estimate
rescan a run's history at each eval and are replayed only when named. A progress bar (evals
replayed) goes to stderr.
"""

from __future__ import annotations

import argparse
import csv
import logging
import math
import os
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import NamedTuple

import pandas as pd

from evalstop_gym.online import DEFAULT_DETECTOR, RunMonitor
from evalstop_gym.policies import PolicyNameError, make_detector
from evalstop_gym.policies.detector import learns_from_runs
from evalstop_gym.sim.protocols import CONTINUE, Detector, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView
from evalstop_gym.sim.workload import JOB_TYPES
from evalstop_gym.traces.log_formats import FORMATS, read_logs_skipping
from evalstop_gym.traces.logs import LogError, LoggedRun

from ..analysis import tables
from ..durable import write_csv
from ..usage import UsageError

DEFAULT_DETECTORS = (DEFAULT_DETECTOR,)
# --compare: the default beside the paper's rule and Lightning's / HF's patience rule; all judge
# a run alone (so each can act on a single log) at O(1) or O(window) per eval
COMPARE = tuple(dict.fromkeys((DEFAULT_DETECTOR, "EvalStop-2", "Patience-3")))
GROUP_BY = ("metric", "file", "run", "none")
LIGHTNING_SHIFT = ("Lightning metrics.csv: validation is logged at global_step - 1; steps are "
                   "shifted by one to the trainer's (ModelCheckpoint's step=)")


class ReplayRow(NamedTuple):
    """One run judged by one detector; steps are the trainer's, values in the metric's units."""

    run_id: str
    source: str                  # the log file it was read from
    metric: str
    mode: str                    # "max" or "min"
    n_evals: int
    detector: str
    stopped: bool
    stop_step: float             # NaN: never stopped
    stop_progress: float         # NaN: never stopped
    value_at_stop: float         # NaN: never stopped
    best_step: float             # the run's best eval over the whole log (hindsight)
    best_value: float
    kept_step: float             # what stop-and-save keeps: the best up to the stop, else last
    kept_value: float
    final_value: float           # the last logged eval
    reason: str
    note: str                    # why the detector cannot act on this run ('' if it can)


COLUMNS = list(ReplayRow._fields)


def monitor_for(run: LoggedRun, detector: Detector | str, job_type: str) -> RunMonitor:
    """grouped=True: replay gives a cross-run detector its peers itself (leave one out); a lone
    run's lack of peers goes to the `note` column, not to a warning."""
    return RunMonitor(detector, run.mode, run.max_steps or run.steps[-1], job_type,
                      grouped=True)


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
    pick = min if run.mode == "min" else max
    best = pick(range(len(run.values)), key=lambda i: (run.values[i], -i if pick is max else i))
    why = monitor.cannot_act()
    stopped = decision.stop
    nan = math.nan
    return ReplayRow(
        run.run_id, run.source, run.metric, run.mode, len(run.steps), detector.name, stopped,
        decision.step if stopped else nan, decision.progress if stopped else nan,
        run.values[len(monitor.steps) - 1] if stopped else nan,
        run.steps[best], run.values[best],
        decision.best_step if stopped else run.steps[-1],
        decision.best_value if stopped else run.values[-1], run.values[-1], monitor.reason,
        f"cannot act: {why}" if why else "")


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
    number of evals once it is replayed. A crashed run (`completed=no`) is no one's peer. A
    Lightning CSVLogger run is judged at the trainer's steps (`lightning_shifted`)."""
    runs = [lightning_shifted(r) for r in runs]
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
    return pd.DataFrame([rows[k] for k in sorted(rows)], columns=COLUMNS)


def to_markdown(table: pd.DataFrame) -> str:
    """The replay table for a terminal or a README (no `tabulate` needed)."""
    def step(s: float) -> str:
        return "-" if pd.isna(s) else f"{s:g}"

    def value(v: float) -> str:
        return "-" if pd.isna(v) else f"{v:.4g}"

    shown = table[["run_id", "metric", "mode", "detector", "stopped", "stop_step",
                   "stop_progress", "kept_step", "kept_value", "best_step", "best_value",
                   "note"]].assign(
        stop_step=table["stop_step"].map(step), kept_step=table["kept_step"].map(step),
        best_step=table["best_step"].map(step),
        stop_progress=table["stop_progress"].map(lambda p: "-" if pd.isna(p) else f"{p:.2f}"),
        kept_value=table["kept_value"].map(value), best_value=table["best_value"].map(value))
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


def lightning_shifted(run: LoggedRun) -> LoggedRun:
    """A Lightning CSVLogger run with its steps moved to the trainer's global_step.

    Lightning logs a validation at `_batches_that_stepped` before the step that ends the batch
    is counted, one below the `trainer.global_step` its callbacks (ModelCheckpoint's file name,
    EvalStopCallback's best_step) see. Only a CSV that Lightning wrote (its `epoch` column) is
    shifted; another CSV of step and metric columns is read as it says."""
    if "read as Lightning metrics.csv" not in run.notes or LIGHTNING_SHIFT in run.notes:
        return run
    try:
        with open(run.source, encoding="utf-8-sig", newline="") as handle:
            header = next(csv.reader([handle.readline()]), [])
    except OSError:
        return run
    if "epoch" not in [c.strip() for c in header]:
        return run
    steps = tuple(s + 1 for s in run.steps)
    max_steps = run.max_steps if run.max_steps is None or run.max_steps >= steps[-1] else None
    return run._replace(steps=steps, max_steps=max_steps, notes=(*run.notes, LIGHTNING_SHIFT))


def read_runs(logs: Sequence[str | Path | LoggedRun] | str | Path, metric: str | None = None,
              mode: str | None = None) -> tuple[list[LoggedRun], list[str]]:
    """The runs of the logs given (paths, or runs already read, which come first), in the
    trainer's steps; and one line per log skipped for lacking the metric."""
    items = [logs] if isinstance(logs, (str, Path)) else list(logs)
    given = [i for i in items if isinstance(i, LoggedRun)]
    paths = [i for i in items if not isinstance(i, LoggedRun)]
    read, skipped = read_logs_skipping(paths, metric, mode) if paths else ([], [])
    return [lightning_shifted(r) for r in (*given, *read)], skipped


def detector_names(detectors: str | Sequence[str] | None, compare: bool = False) -> list[str]:
    """The detectors to replay: DEFAULT_DETECTOR unless named; `compare` adds COMPARE."""
    names = [detectors] if isinstance(detectors, str) else list(detectors or DEFAULT_DETECTORS)
    if compare:
        names = [*names, *COMPARE]
    return list(dict.fromkeys(names))


def replay_logs(logs: Sequence[str | Path | LoggedRun] | str | Path,
                detectors: str | Sequence[str] | None = None, *, metric: str | None = None,
                mode: str | None = None, job_type: str = "rlhf", group_by: str = "metric",
                compare: bool = False) -> pd.DataFrame:
    """What each detector would have done on your runs, as a tidy DataFrame.

        table = evalstop_gym.replay(["my_run/trainer_state.json"])
        table = evalstop_gym.replay("lightning_logs/version_0/metrics.csv", compare=True)

    `logs`: paths of any log `evalstop-bench replay` reads (or `LoggedRun`s). `detectors`:
    registered names, `DEFAULT_DETECTOR` if None; `compare=True` adds `COMPARE`. One row per
    run and detector with the columns of `ReplayRow` (steps are the trainer's, values in the
    metric's own units). A log without the metric is skipped with a warning; bad logs and names
    raise `LogError` / `PolicyNameError` (one line)."""
    if job_type not in JOB_TYPES:
        raise LogError(f"job_type={job_type!r}: expected one of {', '.join(JOB_TYPES)}")
    names = detector_names(detectors, compare)
    runs, skipped = read_runs(logs, metric, mode)
    for line in skipped:
        logging.getLogger(__name__).warning("skipped (no such metric): %s", line)
    return replay(runs, names, job_type, group_by)


def check_outside_inputs(path: str | Path, option: str, inputs: Sequence[str | Path]) -> None:
    """An output path that is not inside a folder given as an input (a TensorBoard event file
    of a replayed folder, say): writing there would replace or add to what was replayed."""
    target = Path(os.path.abspath(path)).resolve()
    for given in map(Path, inputs):
        folder = given.resolve()
        if folder.is_dir() and folder in target.parents:
            raise UsageError(f"{option} {path}: is inside the replayed folder {given}; writing it "
                             f"would replace or add to a log: choose a path outside it")


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
    p.add_argument("--detectors", nargs="+", default=None,
                   help=f"detector names (default: {' '.join(DEFAULT_DETECTORS)}, the default "
                        "detector of RunMonitor and every integration; CUSUM and BOCPD rescan a "
                        "run's history at every eval and are slow on runs of thousands of evals)")
    p.add_argument("--compare", action="store_true",
                   help=f"also replay {' '.join(COMPARE)}: single-run rules beside the default, "
                        "each O(1) or O(window) per eval")
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
    p.add_argument("--plot", default=None, metavar="OUT",
                   help="also draw each run's eval curve with its best eval, each detector's "
                        "stop (or 'never stopped') and the kept checkpoint, a grid for several "
                        "runs, to OUT (.png, .pdf or .svg)")


def check_outputs(args: argparse.Namespace) -> None:
    """--csv and --plot: not an input, not inside an input folder, in a folder that exists."""
    from ..usage import check_output
    from .replay_plot import check_plot_path

    for option, value in (("--csv", args.csv), ("--plot", args.plot)):
        if value:
            check_outside_inputs(value, option, args.logs)   # its wording: "replayed folder"
            check_output(value, option, "file", args.logs)
    if args.csv:
        check_csv_folder(Path(args.csv))
    if args.plot:
        check_plot_path(Path(args.plot))


def main(args: argparse.Namespace) -> int:
    """Print the replay table; 2 on a bad log or detector name (the message says which)."""
    from tqdm import tqdm

    try:
        check_outputs(args)        # before the replay, not after it
        names = detector_names(args.detectors, args.compare)
        active = [d for d in names if make_detector(d) is not None]
        if not active:
            raise UsageError(f"--detectors {' '.join(args.detectors)}: no detector to replay; "
                             f"name one or more, e.g. {' '.join(COMPARE)}")
        runs, skipped = read_runs(args.logs, args.metric, args.mode)
        for line in skipped:
            print(f"skipped (no such metric): {line}", file=sys.stderr)
        warnings = mixed_groups(group_runs(runs, args.group_by))
        total = sum(len(r.steps) for r in runs) * len(active)
        with tqdm(total=total, desc="replay", unit="eval", file=sys.stderr, leave=False) as bar:
            table = replay(runs, names, args.job_type, args.group_by, bar.update)
        if args.csv:
            write_csv_atomic(table, Path(args.csv))
        if args.plot:
            from .replay_plot import plot_replay

            plot_replay(runs, table, Path(args.plot))
    except (LogError, PolicyNameError) as exc:
        print(f"evalstop-bench replay: {exc}", file=sys.stderr)
        return 2
    if any(learns_from_runs(make_detector(d)) for d in active):
        for warning in warnings:
            print(f"warning: {warning}", file=sys.stderr)
    print("\n".join(describe(runs)) + "\n")
    print(to_markdown(table))
    if args.plot:
        print(f"\nfigure: {args.plot}")
    return 0
