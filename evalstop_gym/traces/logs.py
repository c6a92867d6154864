"""Eval curves from users' own training logs, validated, with their direction and length.

Formats (`log_formats.read_logs` tells them apart by name and content and reads the others:
Lightning metrics.csv, TensorBoard event files, MLflow and W&B CSV exports):
- Hugging Face `trainer_state.json`: `log_history` entries with a `step` and `eval_*` keys. The
  metric is `metric=` (a leading "-" means lower is better), else the log's
  `metric_for_best_model`, else the first known task metric by `log_metrics.PRIORITY`
  (accuracy, F1, WER, CER, ROUGE, BLEU, mAP, reward), else `eval_loss`, else the first other
  `eval_*` key; why is in the run's notes. Training-loss entries (`loss`) give each eval the
  latest loss logged at or before its step. `max_steps` is read from the log. A second eval
  logged at the same step (a final `trainer.evaluate()`) replaces the first, with a note (the HF
  callback, live, can only judge the first; both walk the log with `history_evals`).
- CSV with a header `job_id, step, eval_score[, loss]` and any further named columns (one of
  them may be chosen as the metric, e.g. `test_score`), UTF-8 (a byte-order mark is dropped),
  any number of runs, rows in any order of runs but in increasing step within a run. A
  `completed` column (yes/no, the run's last row decides) marks a crashed run (no); a
  `max_steps` column (the run's last non-empty cell decides) its planned length.

Direction: `mode=` if given, else the log's `greater_is_better`, else the metric's name (loss,
wer, cer, perplexity, ppl, error, in plural and suffix forms too: lower is better), else higher
is better; `LoggedRun.mode_from` says which. Values are kept in the metric's own units.
Errors (NaN, infinities, booleans or strings as scores, non-increasing steps, runs without evals,
missing or duplicated columns, rows longer than the header, unreadable files) raise `LogError`
naming the file and the row (CSV line number, or `log_history` index).
"""

from __future__ import annotations

import codecs
import contextlib
import csv
import json
import logging
import math
from collections.abc import Callable, Iterable, Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple, TextIO

from .log_metrics import LogError, choose_metric, mode_for, pick_metric

__all__ = ["CSV_COLUMNS", "HistoryEval", "LogError", "LoggedRun", "MissingMetric",
           "choose_metric", "history_evals", "mode_for", "read_csv_runs",
           "read_trainer_state"]

CSV_COLUMNS = ("job_id", "step", "eval_score")
logger = logging.getLogger(__name__)


class MissingMetric(LogError):
    """A log without the metric asked for: `read_logs` skips it unless every log lacks it."""


class LoggedRun(NamedTuple):
    run_id: str
    source: str
    metric: str
    mode: str                   # "max" or "min"
    mode_from: str              # what decided the mode: --mode, the log, the metric's name
    steps: tuple[int, ...]
    values: tuple[float, ...]   # the metric at each eval, in its own units
    losses: tuple[float, ...]   # training loss at each eval (NaN where none was logged before)
    max_steps: int | None       # the run's planned length, when the log says
    notes: tuple[str, ...] = ()  # what was chosen or tolerated on the reader's behalf
    completed: bool | None = None   # a CSV's `completed` column (no: the run crashed); None: unsaid


def _number(value: Any, where: str, name: str) -> float:
    """A JSON number: a real int or float, never a boolean or a numeric string."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise LogError(f"{where}: {name} must be a number, got {value!r}")
    return _finite(float(value), value, where, name)


def _finite(x: float, raw: Any, where: str, name: str) -> float:
    if not math.isfinite(x):
        raise LogError(f"{where}: {name} is {raw!r}; NaN and infinities cannot be replayed")
    return x


def _text_number(value: str | None, where: str, name: str) -> float:
    try:
        x = float(value)  # type: ignore[arg-type]
    except (TypeError, ValueError):
        raise LogError(f"{where}: {name} is not a number ({value!r})") from None
    return _finite(x, value, where, name)


def _step(x: float, raw: Any, where: str) -> int:
    if x != int(x) or x < 0:
        raise LogError(f"{where}: step must be a whole number >= 0, got {raw!r}")
    return int(x)


def _check_steps(steps: Sequence[int], places: Sequence[Any], label: Callable[[Any], str],
                 source: str, run: str, max_steps: int | None) -> None:
    """Steps increase and end in (0, max_steps]; `label(place)` names a row for the error."""
    rows = _Labels(places, label)
    if not steps:
        raise LogError(f"{source}: run {run!r} has no evals")
    for i in range(1, len(steps)):
        if steps[i] <= steps[i - 1]:
            raise LogError(f"{rows[i]}: step {steps[i]} of run {run!r} does not increase "
                           f"(previous eval at step {steps[i - 1]})")
    if steps[-1] <= 0:
        raise LogError(f"{rows[-1]}: run {run!r} ends at step 0; progress cannot be measured")
    if max_steps is not None and steps[-1] > max_steps:
        raise LogError(f"{rows[-1]}: step {steps[-1]} is past the log's max_steps={max_steps}")


class _Labels:
    """Row names built only when an error needs one (a log may hold millions of rows)."""

    def __init__(self, places: Sequence[Any], label: Callable[[Any], str]) -> None:
        self.places, self.label = places, label

    def __getitem__(self, i: int) -> str:
        return self.label(self.places[i])


def _load_state(path: Path) -> tuple[Path, dict[str, Any], list[dict[str, Any]]]:
    if path.is_dir():
        path = path / "trainer_state.json"
    try:
        data = json.loads(path.read_bytes().decode("utf-8-sig"))
    except (OSError, ValueError) as exc:
        raise LogError(f"{path}: not a readable trainer_state.json ({exc})") from None
    history = data.get("log_history") if isinstance(data, dict) else None
    if not isinstance(history, list) or not all(isinstance(e, dict) for e in history):
        raise LogError(f"{path}: log_history must be a list of objects (entries with a step and "
                       f"eval_* keys); got {type(history).__name__}")
    return path, data, history


def _log_settings(data: dict[str, Any]) -> dict[str, Any]:
    """metric_for_best_model / greater_is_better / max_steps, at the top level or in the state
    an EvalStopCallback saved (`stateful_callbacks`)."""
    found = {k: data.get(k) for k in ("metric_for_best_model", "greater_is_better")}
    callbacks = data.get("stateful_callbacks")
    saved = callbacks.get("EvalStopCallback") if isinstance(callbacks, dict) else None
    args = saved.get("args") if isinstance(saved, dict) else None
    if isinstance(args, dict) and found["metric_for_best_model"] is None:
        found["metric_for_best_model"] = args.get("metric")
        if args.get("mode") in ("max", "min"):
            found["greater_is_better"] = args["mode"] == "max"
    steps = data.get("max_steps")
    ok = isinstance(steps, int) and not isinstance(steps, bool) and steps > 0
    found["max_steps"] = steps if ok else None
    return found


def _metric_key(history: list[dict[str, Any]], metric: str | None,
                settings: dict[str, Any], path: Path) -> tuple[str, str | None, str]:
    """(key, mode implied by a leading '-', how the key was chosen)."""
    if metric:
        key = metric.removeprefix("-")
        return key, ("min" if metric.startswith("-") else None), "--metric"
    best = _eval_key(settings["metric_for_best_model"])
    if best:
        return best, None, "the log's metric_for_best_model"
    key, why = pick_metric(k for entry in history for k in entry if k.startswith("eval_"))
    if not key:
        raise LogError(f"{path}: log_history has no eval_* metric")
    return key, None, f"{why}; choose one with --metric"


class HistoryEval(NamedTuple):
    row: int                    # index in log_history
    step: int
    value: float
    loss: float | None          # latest training loss logged at or before it; None before any


def history_evals(history: Iterable[dict[str, Any]], key: str, where: str = "log_history",
                  strict: bool = True) -> Iterator[HistoryEval]:
    """Each `key` eval of a Trainer `log_history` in log order, with the latest training loss.

    The one walk the replay reader and the HF callback's resume share, so both pair losses with
    evals alike. Every eval is yielded, a repeat at the same step too: what counts is the
    caller's rule (a replay keeps the later one, a live callback can only judge the first).
    `strict` (replay): a boolean, a string, NaN or an infinity raises `LogError` naming
    `where[row]`, since a replay must not guess. Else (a resumed live run) values are float()ed
    as Trainer wrote them and an eval without a step is passed over; `RunMonitor.offer` skips what
    it cannot judge, as it did live, rather than end training with an error."""
    loss = None
    for i, entry in enumerate(history):
        at = f"{where}[{i}]"
        if "loss" in entry:
            loss = _number(entry["loss"], at, "loss") if strict else float(entry["loss"])
        if key not in entry:
            continue
        if strict:
            step = _step(_number(entry.get("step"), at, "step"), entry.get("step"), at)
            value = _number(entry[key], at, key)
        elif "step" in entry:
            step, value = int(entry["step"]), float(entry[key])
        else:
            continue
        yield HistoryEval(i, step, value, loss)


def read_trainer_state(path: Path | str, metric: str | None = None,
                       mode: str | None = None) -> LoggedRun:
    """One run from a Hugging Face trainer_state.json (or a checkpoint dir holding one)."""
    path, data, history = _load_state(Path(path))
    settings = _log_settings(data)
    key, sign_mode, chosen = _metric_key(history, metric, settings, path)
    # greater_is_better speaks of metric_for_best_model only
    flag = settings["greater_is_better"] if _eval_key(settings["metric_for_best_model"]) == key \
        else None
    run_mode, mode_from = mode_for(key, mode or sign_mode, flag)
    if mode is None and sign_mode:
        mode_from = "a leading '-' on --metric"
    steps: list[int] = []
    rows: list[int] = []
    values: list[float] = []
    losses: list[float] = []
    notes = [f"metric chosen by {chosen}"]
    label = f"{path}: log_history[{{}}]".format
    for ev in history_evals(history, key, f"{path}: log_history"):
        loss = math.nan if ev.loss is None else ev.loss
        if steps and ev.step == steps[-1]:
            notes.append(f"log_history[{ev.row}]: a second eval at step {ev.step} (a final "
                         f"evaluate?) replaces the one at log_history[{rows[-1]}]")
            values[-1], losses[-1], rows[-1] = ev.value, loss, ev.row
            continue
        steps.append(ev.step)
        values.append(ev.value)
        losses.append(loss)
        rows.append(ev.row)
    if not steps:
        raise MissingMetric(f"{path}: log_history has no {key!r} evals; its eval keys are: "
                            f"{', '.join(_eval_keys(history)) or 'none'}")
    _check_steps(steps, rows, label, str(path), str(path), settings["max_steps"])
    run_id = path.parent.name if path.name == "trainer_state.json" else path.stem
    return LoggedRun(run_id or path.stem, str(path), key, run_mode, mode_from, tuple(steps),
                     tuple(values), tuple(losses), settings["max_steps"], tuple(notes))


def _eval_key(name: Any) -> str:
    """metric_for_best_model as the key the log holds (Trainer prefixes 'eval_')."""
    if not isinstance(name, str) or not name:
        return ""
    return name if name.startswith("eval_") else f"eval_{name}"


def _eval_keys(history: list[dict[str, Any]]) -> list[str]:
    return sorted({k for e in history for k in e if k.startswith("eval_") or k == "loss"})


def _csv_rows(path: Path, required: Sequence[str] = CSV_COLUMNS[:2],
              expected: str = f"{', '.join(CSV_COLUMNS)}[, loss, ...]") -> tuple[list[str], _Rows]:
    """Header and (line, values) rows of a UTF-8 CSV, refusing what cannot be a replay log;
    rows are read as they are used (a log may be larger than memory); close them when done,
    they hold the file open."""
    try:
        handle = path.open(encoding="utf-8-sig", newline="")
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror})") from None
    reader = csv.reader(handle)
    try:
        try:
            header = [c.strip() for c in next(reader, [])]
        except csv.Error as exc:
            raise LogError(f"{path}: not a CSV file ({exc})") from None
        except (UnicodeDecodeError, OSError) as exc:
            raise _unreadable(path, exc) from None
        seen = set()
        for column in header:
            if column in seen:
                raise LogError(f"{path}: line 1: column {column!r} appears twice")
            seen.add(column)
        missing = [c for c in required if c not in header]
        if missing:
            raise LogError(f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                           f"expected {expected}")
    except BaseException:
        handle.close()
        raise
    return header, _Rows(handle, reader, path)


class _Rows:
    """(line, values) rows, read as they are iterated; `close` releases the file whether or not
    they were (a generator closed before its first row never runs its cleanup)."""

    def __init__(self, handle: TextIO, reader: Any, path: Path) -> None:
        self.handle, self.reader, self.path = handle, reader, path

    def __iter__(self) -> Iterator[tuple[int, list[str]]]:
        reader = self.reader
        try:
            for row in reader:
                if row:
                    yield reader.line_num, row
        except csv.Error as exc:
            raise LogError(f"{self.path}: line {reader.line_num}: not CSV ({exc})") from None
        except (UnicodeDecodeError, OSError) as exc:
            raise _unreadable(self.path, exc) from None

    def close(self) -> None:
        self.handle.close()


def _unreadable(path: Path, exc: Exception) -> LogError:
    """The one-line error for a file that stops being readable text part way."""
    if not isinstance(exc, UnicodeDecodeError):
        return LogError(f"{path}: cannot read ({getattr(exc, 'strerror', None) or exc})")
    return LogError(f"{path}: not UTF-8 text (byte {_bad_byte(path, exc)}); a replay CSV is "
                    f"UTF-8 with a header {', '.join(CSV_COLUMNS)}[, loss, ...]")


def _bad_byte(path: Path, exc: UnicodeDecodeError) -> int:
    """Offset in the file of the first byte that is not UTF-8: a streamed decode reports it
    within the chunk it read, so find it again, a chunk at a time, only when it is needed."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    offset = 0
    try:
        with path.open("rb") as raw:
            for chunk in iter(lambda: raw.read(1 << 16), b""):
                pending = len(decoder.getstate()[0])
                try:
                    decoder.decode(chunk)
                except UnicodeDecodeError as found:
                    return offset - pending + found.start
                offset += len(chunk)
            decoder.decode(b"", final=True)
    except UnicodeDecodeError as found:   # the file ends inside a character
        return offset - len(found.object) + found.start
    except OSError:
        pass
    return exc.start


def read_csv_runs(path: Path | str, metric: str | None = None,
                  mode: str | None = None) -> list[LoggedRun]:
    """Every run of a `job_id, step, eval_score[, loss, ...]` CSV, in order of appearance."""
    path = Path(path)
    header, rows = _csv_rows(path)
    column = (metric or "eval_score").removeprefix("-")
    index = {c: i for i, c in enumerate(header)}
    with contextlib.closing(rows):  # the rows hold the file open
        if column not in header:
            raise MissingMetric(f"{path}: no column {column!r}; its columns are: "
                                f"{', '.join(header)}")
        run_mode, mode_from = mode_for(column, mode or ("min" if (metric or "")[:1] == "-"
                                                        else None))
        runs: dict[str, dict[str, Any]] = {}
        for line, row in rows:
            where = f"{path}: line {line}"
            if len(row) > len(header):
                raise LogError(f"{where}: {len(row)} values for {len(header)} columns")
            row = row + [""] * (len(header) - len(row))
            run_id = row[index["job_id"]].strip()
            if not run_id:
                raise LogError(f"{where}: empty job_id")
            rec = runs.setdefault(run_id, {"steps": [], "values": [], "losses": [], "lines": []})
            raw_step = row[index["step"]]
            rec["steps"].append(_step(_text_number(raw_step, where, "step"), raw_step, where))
            rec["values"].append(_text_number(row[index[column]], where, column))
            raw_loss = row[index["loss"]].strip() if "loss" in index else ""
            rec["losses"].append(_text_number(raw_loss, where, "loss") if raw_loss else math.nan)
            rec["lines"].append(line)
            if "completed" in index:
                rec["completed"] = _yes_no(row[index["completed"]], where)
            if "max_steps" in index and row[index["max_steps"]].strip():
                rec["max_steps"] = _max_steps(row[index["max_steps"]], where)
    if not runs:
        raise LogError(f"{path}: no rows after the header; a CSV needs at least one eval")
    out = []
    for run_id, rec in runs.items():
        max_steps = rec.get("max_steps")
        _check_steps(rec["steps"], rec["lines"], f"{path}: line {{}}".format, str(path), run_id,
                     max_steps)
        out.append(LoggedRun(run_id, str(path), column, run_mode, mode_from,
                             tuple(rec["steps"]), tuple(rec["values"]), tuple(rec["losses"]),
                             max_steps, completed=rec.get("completed")))
    return out


def _max_steps(value: str, where: str) -> int:
    """A `max_steps` cell: the run's planned length, a whole number > 0."""
    x = _text_number(value, where, "max_steps")
    if x != int(x) or x <= 0:
        raise LogError(f"{where}: max_steps must be a whole number > 0, got {value!r}")
    return int(x)


def _yes_no(value: str, where: str) -> bool | None:
    """A `completed` cell: yes/true/1 or no/false/0 (any case); empty: not said."""
    word = value.strip().lower()
    if word in ("yes", "true", "1"):
        return True
    if word in ("no", "false", "0"):
        return False
    if not word:
        return None
    raise LogError(f"{where}: completed is {value!r}; expected yes or no (or empty)")
