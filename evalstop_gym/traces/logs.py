"""Eval curves from users' own training logs, validated, and the scheduler views they imply.

Two formats:
- Hugging Face `trainer_state.json`: `log_history` entries with a `step` and `eval_*` keys. The
  metric is chosen by name (`metric=`), or by default the first `eval_*` key in the log that is
  not bookkeeping (loss, runtime, samples/steps per second, ...). If `eval_loss` is the only
  eval metric it is used negated, so that higher is better like every other score here.
  Training-loss entries (`loss`) give each eval the latest loss logged at or before its step.
- CSV with a header `job_id, step, eval_score[, loss]`, any number of runs, rows in any order of
  runs but in increasing step within a run.
Errors (NaN, infinities, non-increasing steps, runs without evals, missing columns) raise
`LogError` naming the file and the row (CSV line number, or `log_history` index).
"""

from __future__ import annotations

import csv
import json
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from ..sim.view import ClusterView, SchedulerJobView

BOOKKEEPING = {"eval_loss", "eval_runtime", "eval_samples_per_second", "eval_steps_per_second",
               "eval_jit_compilation_time", "eval_model_preparation_time"}
CSV_COLUMNS = ("job_id", "step", "eval_score")


class LogError(ValueError):
    """A training log that cannot be replayed; the message names the file and the row."""


class LoggedRun(NamedTuple):
    run_id: str
    source: str
    metric: str
    steps: tuple[int, ...]
    scores: tuple[float, ...]
    losses: tuple[float, ...]   # one per eval, or empty when the log has no training loss


def _number(value: Any, where: str, name: str) -> float:
    try:
        x = float(value)
    except (TypeError, ValueError):
        raise LogError(f"{where}: {name} is not a number ({value!r})") from None
    if not math.isfinite(x):
        raise LogError(f"{where}: {name} is {value!r}; NaN and infinities cannot be replayed")
    return x


def _step(value: Any, where: str) -> int:
    x = _number(value, where, "step")
    if x != int(x) or x < 0:
        raise LogError(f"{where}: step must be a whole number >= 0, got {value!r}")
    return int(x)


def _check_steps(steps: Sequence[int], rows: Sequence[str], source: str, run: str) -> None:
    if not steps:
        raise LogError(f"{source}: run {run!r} has no evals")
    for i in range(1, len(steps)):
        if steps[i] <= steps[i - 1]:
            raise LogError(f"{rows[i]}: step {steps[i]} of run {run!r} does not increase "
                           f"(previous eval at step {steps[i - 1]})")
    if steps[-1] <= 0:
        raise LogError(f"{rows[-1]}: run {run!r} ends at step 0; progress cannot be measured")


def choose_metric(history: Sequence[dict[str, Any]]) -> tuple[str, float]:
    """(metric key, sign): the first non-bookkeeping eval_* key, else -eval_loss."""
    keys = [k for entry in history for k in entry if k.startswith("eval_")]
    for key in keys:
        if key not in BOOKKEEPING:
            return key, 1.0
    if "eval_loss" in keys:
        return "eval_loss", -1.0
    return "", 1.0


def read_trainer_state(path: Path, metric: str | None = None) -> LoggedRun:
    """One run from a Hugging Face trainer_state.json (or a checkpoint dir holding one)."""
    path = Path(path)
    if path.is_dir():
        path = path / "trainer_state.json"
    try:
        history = json.loads(path.read_text())["log_history"]
    except (OSError, ValueError, KeyError, TypeError) as exc:
        raise LogError(f"{path}: not a readable trainer_state.json with log_history ({exc})") \
            from None
    key, sign = (metric, 1.0) if metric else choose_metric(history)
    if not key:
        raise LogError(f"{path}: log_history has no eval_* metric")
    steps, scores, losses, rows, last_loss = [], [], [], [], math.nan
    for i, entry in enumerate(history):
        where = f"{path}: log_history[{i}]"
        if "loss" in entry:
            last_loss = _number(entry["loss"], where, "loss")
        if key in entry:
            steps.append(_step(entry.get("step"), where))
            scores.append(sign * _number(entry[key], where, key))
            losses.append(last_loss)
            rows.append(where)
    _check_steps(steps, rows, str(path), str(path))
    kept = tuple(losses) if all(math.isfinite(x) for x in losses) else ()
    name = key if sign > 0 else f"-{key}"
    run_id = path.parent.name if path.name == "trainer_state.json" else path.stem
    return LoggedRun(run_id or path.stem, str(path), name, tuple(steps),
                     tuple(scores), kept)


def read_csv_runs(path: Path) -> list[LoggedRun]:
    """Every run of a `job_id, step, eval_score[, loss]` CSV, in order of first appearance."""
    path = Path(path)
    try:
        with path.open(newline="") as fh:
            reader = csv.DictReader(fh)
            header = [c.strip() for c in reader.fieldnames or []]
            missing = [c for c in CSV_COLUMNS if c not in header]
            if missing:
                raise LogError(f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                               f"expected {', '.join(CSV_COLUMNS)}[, loss]")
            raw = [({k.strip(): v for k, v in row.items() if k}, reader.line_num)
                   for row in reader]
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror})") from None
    runs: dict[str, dict[str, list[Any]]] = {}
    for row, line in raw:
        where = f"{path}: line {line}"
        run_id = (row.get("job_id") or "").strip()
        if not run_id:
            raise LogError(f"{where}: empty job_id")
        rec = runs.setdefault(run_id, {"steps": [], "scores": [], "losses": [], "rows": []})
        rec["steps"].append(_step(row.get("step"), where))
        rec["scores"].append(_number(row.get("eval_score"), where, "eval_score"))
        if "loss" in header and (row.get("loss") or "").strip():
            rec["losses"].append(_number(row["loss"], where, "loss"))
        rec["rows"].append(where)
    if not runs:
        raise LogError(f"{path}: no rows after the header; a CSV needs at least one eval")
    out = []
    for run_id, rec in runs.items():
        _check_steps(rec["steps"], rec["rows"], str(path), run_id)
        losses = tuple(rec["losses"]) if len(rec["losses"]) == len(rec["steps"]) else ()
        out.append(LoggedRun(run_id, str(path), "eval_score", tuple(rec["steps"]),
                             tuple(rec["scores"]), losses))
    return out


def read_logs(paths: Iterable[Path | str], metric: str | None = None) -> list[LoggedRun]:
    """Runs from CSV files, trainer_state.json files, or checkpoint dirs holding one."""
    runs: list[LoggedRun] = []
    for p in map(Path, paths):
        if not p.exists():
            raise LogError(f"{p}: no such file or directory")
        runs.extend(read_csv_runs(p) if p.suffix.lower() == ".csv"
                    else [read_trainer_state(p, metric)])
    return runs


def replay_views(run: LoggedRun, job_type: str = "rlhf",
                 job_id: int = 0) -> list[SchedulerJobView]:
    """The view a scheduler would have had after each eval; progress = step / last step."""
    total = run.steps[-1]
    progress = tuple(s / total for s in run.steps)
    views = []
    for i in range(1, len(run.steps) + 1):
        losses = run.losses[:i]
        views.append(SchedulerJobView(
            job_id=job_id, tenant=0, job_type=job_type, gpus=1, arrival_time=0.0,
            state="running" if i < len(run.steps) else "completed", progress=progress[i - 1],
            loss=losses[-1] if losses else math.nan, eval_progress=progress[:i],
            eval_scores=run.scores[:i], loss_history=losses, duration_estimate=0.0,
            attained_minutes=0.0, n_preemptions=0))
    return views


REPLAY_CLUSTER = ClusterView(now=0.0, total_gpus=1, free_gpus=0, n_waiting=0, n_running=1)
