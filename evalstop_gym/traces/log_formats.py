"""The log formats people have, told apart by name and content, each read into `LoggedRun`s.

`logs` reads the replay CSV and Hugging Face `trainer_state.json`; this module adds the rest,
`read_logs_skipping`, the dispatcher, and `read_logs` (it warns of what was skipped). Column
mappings:
- Lightning `CSVLogger` `metrics.csv`: a `step` column (an `epoch` column is ignored) and one
  column per logged metric; a row fills only what was logged in it (validation cells are blank
  on training rows). Any CSV of a `step` column and metric columns is read the same way. The
  run is named by its folder (`lightning_logs/version_0`).
- TensorBoard: an `events.out.tfevents.*` file, or a folder: each folder under it holding event
  files is a run named by its path. Scalars (and TF2 scalar tensors) by tag, at their steps.
- MLflow metric history (`mlflow` UI or API export): columns `key, value, step, timestamp`, one
  row per logged value; a `run_id` (or `run_name`, `run`) column splits runs, else the file is
  one run named after it.
- W&B "Export CSV" of a panel: `Step, <run name> - <metric>, <run name> - <metric>__MIN,
  <run name> - <metric>__MAX, ...`; one run per run name, the `__MIN`/`__MAX` columns (the
  panel's sampling envelope) are ignored, blank cells are steps that run did not log.
- Keras history: a `CSVLogger` file (`epoch` and metric columns), or pandas' dump of
  `History.history` (`pd.DataFrame(history.history).to_csv()`: metric columns, one of them held
  out such as `val_loss`, led by a blank index column or none); one row per epoch.
The metric and its direction follow `log_metrics` in every format; the training loss is the
series named `loss`, `train_loss`, `train_loss_step`, `train/loss`... (the latest value at or
before each eval's step). These formats do not say `max_steps`: progress is step / last step.
"""

from __future__ import annotations

import bisect
import contextlib
import csv
import logging
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from .log_metrics import EVAL_TOKENS, pick_metric, tokens, train_loss_key
from .logs import (
    LogError,
    LoggedRun,
    MissingMetric,
    _check_steps,
    _csv_rows,
    _number,
    _step,
    _text_number,
    mode_for,
    read_csv_runs,
    read_trainer_state,
)
from .model_card import card_max_steps, card_series, read_card_text

logger = logging.getLogger(__name__)
TFEVENTS = "events.out.tfevents"
FORMATS = ("replay CSV (job_id, step, eval_score[, loss, max_steps, completed])",
           "trainer_state.json (or a checkpoint folder holding one)",
           "Lightning metrics.csv (step, metric columns)",
           f"TensorBoard ({TFEVENTS}.* or a folder of them)",
           "MLflow CSV (key, value, step, timestamp)",
           "W&B CSV (Step, '<run> - <metric>')",
           "Keras history (CSVLogger: epoch, metric columns; or pandas' dump of "
           "History.history: metric columns, one row per epoch)",
           "a model card's Training results table (README.md written by transformers' Trainer)")
Series = list[tuple[Any, Any, str]]        # (raw step, raw value, where) as logged


def read_logs(paths: Iterable[Path | str], metric: str | None = None,
              mode: str | None = None) -> list[LoggedRun]:
    """Runs from every log format `FORMATS` names; a log without the metric is skipped with a
    warning (`read_logs_skipping` returns what was skipped)."""
    runs, skipped = read_logs_skipping(paths, metric, mode)
    for line in skipped:
        logger.warning("skipped %s", line)
    return runs


def read_logs_skipping(paths: Iterable[Path | str], metric: str | None = None,
                       mode: str | None = None) -> tuple[list[LoggedRun], list[str]]:
    """(runs, one line per log skipped for lacking the metric); every log lacking it: LogError."""
    runs: list[LoggedRun] = []
    skipped: list[str] = []
    for p in map(Path, paths):
        if not p.exists():
            raise LogError(f"{p}: no such file or directory")
        try:
            runs.extend(read_path(p, metric, mode))
        except MissingMetric as exc:
            skipped.append(str(exc))
    if skipped and not runs:
        more = f" (and {len(skipped) - 1} more log(s) likewise)" if len(skipped) > 1 else ""
        raise LogError(f"no log has the metric: {skipped[0]}{more}")
    return runs, skipped


def read_path(path: Path, metric: str | None = None, mode: str | None = None) -> list[LoggedRun]:
    """The runs of one log, in whichever format `detect` finds."""
    reader = {"replay": read_csv_runs, "trainer_state": lambda *a: [read_trainer_state(*a)],
              "lightning": read_lightning_csv, "tensorboard": read_tensorboard,
              "mlflow": read_mlflow_csv, "wandb": read_wandb_csv,
              "model_card": read_model_card, "keras": read_keras_csv}[detect(path)]
    return reader(path, metric, mode)


def detect(path: Path) -> str:
    """The format of `path`, by its name, then its first line; one line listing the formats
    read when it is none of them."""
    if path.is_dir():
        if (path / "trainer_state.json").is_file():
            return "trainer_state"
        if next(path.rglob(f"{TFEVENTS}*"), None) is not None:
            return "tensorboard"
        raise _unknown(path, "a folder without trainer_state.json or TensorBoard event files")
    if path.name.startswith(TFEVENTS):
        return "tensorboard"
    if path.suffix.lower() == ".json":
        return "trainer_state"
    if path.suffix.lower() == ".md":
        return "model_card"
    header = _header(path)
    if header is None:
        if path.suffix.lower() == ".csv":
            return "replay"                # its reader names the byte that is not UTF-8
        raise _unknown(path, "not text")
    columns = set(header)
    if {"job_id", "step"} <= columns:
        return "replay"
    if {"key", "value", "step"} <= {c.lower() for c in columns}:
        return "mlflow"
    if header[:1] == ["Step"] and any(" - " in c for c in header):
        return "wandb"
    if "step" in columns and len(header) > 1:
        return "lightning"
    if "epoch" in {c.lower() for c in columns} and len(header) > 1:
        return "keras"
    if _history_columns(header) is not None:
        return "keras"
    if header[:1] and header[0].lstrip().startswith("{"):
        return "trainer_state"
    raise _unknown(path, f"columns {', '.join(header) or 'none'}")


def read_model_card(path: Path, metric: str | None = None,
                    mode: str | None = None) -> list[LoggedRun]:
    """The run of a model card's Training results table (`model_card`), named by its folder."""
    text = read_card_text(path)
    where = str(path)
    series = {path.parent.name or path.stem: card_series(text, where)}
    max_steps = card_max_steps(text, where)
    runs = runs_from_series(path, "model card", series, metric, mode)
    return [r._replace(max_steps=max_steps) if max_steps and max_steps >= r.steps[-1] else r
            for r in runs]


def _unknown(path: Path, what: str) -> LogError:
    return LogError(f"{path}: not a log replay reads ({what}); it reads: {'; '.join(FORMATS)}")


def _header(path: Path) -> list[str] | None:
    """The first CSV row (None if the file does not start as UTF-8 text)."""
    try:
        with path.open(encoding="utf-8-sig", newline="") as handle:
            return [c.strip() for c in next(csv.reader([handle.readline()]), [])]
    except (UnicodeDecodeError, csv.Error):
        return None
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror})") from None


def read_lightning_csv(path: Path, metric: str | None = None,
                       mode: str | None = None) -> list[LoggedRun]:
    """The run of a Lightning `metrics.csv` (or any CSV of `step` and metric columns)."""
    series = _wide_series(path, "step", "step[, epoch], metric columns", ("step", "epoch"),
                          lambda cell, where: cell)
    parent = path.parent
    run = f"{parent.parent.name}/{parent.name}" if parent.name.startswith("version_") \
        else parent.name or path.stem
    return runs_from_series(path, "Lightning metrics.csv", {run: series}, metric, mode)


def _wide_series(path: Path, index: str, expected: str, skip: tuple[str, ...],
                 step_of: Callable[[str, str], Any]) -> dict[str, Series]:
    """Each metric column of a CSV of one row per logged step (`index` the step's column, read
    by `step_of(cell, where)`); blank cells are metrics not logged in that row."""
    header, rows = _csv_rows(path, (index,), expected)
    keys = [c for c in header if c not in skip]
    series: dict[str, Series] = {k: [] for k in keys}
    with contextlib.closing(rows):
        for line, row in rows:
            where = f"{path}: line {line}"
            if len(row) > len(header):
                raise LogError(f"{where}: {len(row)} values for {len(header)} columns")
            cells = dict(zip(header, row, strict=False))
            step = step_of(cells[index], where)
            for key in keys:
                if cells.get(key, "").strip():
                    series[key].append((step, cells[key], where))
    return series


def read_keras_csv(path: Path, metric: str | None = None,
                   mode: str | None = None) -> list[LoggedRun]:
    """The run of a Keras history: a `CSVLogger` file (`epoch` and metric columns, one row per
    epoch; epoch e, counted from 0, is step e + 1), or pandas' dump of `History.history`
    (`pd.DataFrame(history.history).to_csv()`: metric columns only, led by a blank index column
    or none; the n-th row is step n)."""
    header = _header(path) or []
    epoch = next((c for c in header if c.lower() == "epoch"), None)
    if epoch is None and _history_columns(header) is not None:
        series = _history_series(path, header)
    else:
        epoch = epoch or "epoch"
        series = _wide_series(path, epoch, "epoch, metric columns", (epoch,),
                              lambda cell, where: _text_number(cell, where, "epoch") + 1)
    return runs_from_series(path, "Keras CSVLogger history", {path.parent.name or path.stem:
                                                              series}, metric, mode)


def _history_columns(header: list[str]) -> list[str] | None:
    """The metric columns of a pandas dump of a Keras `History` (None if `header` is not one):
    every column named (but a leading blank or `Unnamed: 0` index), one of them held out."""
    names = header[1:] if header[:1] and (not header[0] or header[0].startswith("Unnamed:")) \
        else header
    if len(names) < 2 or not all(names) or not any(set(tokens(c)) & EVAL_TOKENS for c in names):
        return None
    return names


def _history_series(path: Path, header: list[str]) -> dict[str, Series]:
    """Each metric column of a pandas-dumped history; its n-th data row is step n."""
    names = _history_columns(header) or []
    _, rows = _csv_rows(path, (), "metric columns, one row per epoch")
    series: dict[str, Series] = {k: [] for k in names}
    with contextlib.closing(rows):
        for n, (line, row) in enumerate(rows, start=1):
            where = f"{path}: line {line}"
            if len(row) > len(header):
                raise LogError(f"{where}: {len(row)} values for {len(header)} columns")
            cells = dict(zip(header, row, strict=False))
            for key in names:
                if cells.get(key, "").strip():
                    series[key].append((n, cells[key], where))
    return series


def read_mlflow_csv(path: Path, metric: str | None = None,
                    mode: str | None = None) -> list[LoggedRun]:
    """Runs of an MLflow metric-history CSV (`key, value, step, timestamp[, run_id]`)."""
    header, rows = _csv_rows(path, (), "key, value, step, timestamp")
    lower = {c.lower(): c for c in header}
    if not {"key", "value", "step"} <= set(lower):
        rows.close()
        raise LogError(f"{path}: line 1: an MLflow CSV has columns key, value, step, timestamp; "
                       f"its columns are: {', '.join(header)}")
    run_column = next((lower[c] for c in ("run_id", "run_name", "run") if c in lower), None)
    series: dict[str, dict[str, Series]] = {}
    with contextlib.closing(rows):
        for line, row in rows:
            cells = dict(zip(header, row, strict=False))
            run = cells.get(run_column, "").strip() if run_column else path.stem
            key = cells.get(lower["key"], "").strip()
            if not run or not key:
                raise LogError(f"{path}: line {line}: empty {'key' if run else run_column}")
            series.setdefault(run, {}).setdefault(key, []).append(
                (cells.get(lower["step"], ""), cells.get(lower["value"], ""),
                 f"{path}: line {line}"))
    return runs_from_series(path, "MLflow CSV", series, metric, mode, in_step_order=False)


def read_wandb_csv(path: Path, metric: str | None = None,
                   mode: str | None = None) -> list[LoggedRun]:
    """Runs of a W&B panel export (`Step, <run> - <metric>[, ...__MIN, ...__MAX]`)."""
    header, rows = _csv_rows(path, ("Step",), "Step, '<run name> - <metric>', ...")
    columns = {c: tuple(c.rsplit(" - ", 1)) for c in header
               if " - " in c and not c.endswith(("__MIN", "__MAX"))}
    series: dict[str, dict[str, Series]] = {}
    for run, key in columns.values():
        series.setdefault(run, {})[key] = []
    with contextlib.closing(rows):
        for line, row in rows:
            cells = dict(zip(header, row, strict=False))
            for column, (run, key) in columns.items():
                if cells.get(column, "").strip():
                    series[run][key].append((cells["Step"], cells[column], f"{path}: line {line}"))
    return runs_from_series(path, "W&B CSV", series, metric, mode, in_step_order=False)


def read_tensorboard(path: Path, metric: str | None = None,
                     mode: str | None = None) -> list[LoggedRun]:
    """Runs of a TensorBoard event file, or of each folder under `path` holding event files."""
    try:
        from tensorboard.backend.event_processing.event_accumulator import (  # type: ignore[import-untyped]
            EventAccumulator,
        )
    except ImportError:
        raise LogError(f"{path}: reading TensorBoard event files needs the tensorboard package "
                       f"(pip install tensorboard)") from None
    if path.is_dir():
        folders = sorted({f.parent for f in path.rglob(f"{TFEVENTS}*")})
        targets = {str(f.relative_to(path)) if f != path else path.name: f for f in folders}
    else:
        targets = {path.parent.name or path.name: path}
    series = {}
    for run, target in targets.items():
        for file in sorted(target.glob(f"{TFEVENTS}*")) if target.is_dir() else [target]:
            check_event_file(file)   # the reader logs a broken record and reads on: no values
        accumulator = EventAccumulator(str(target), size_guidance={"scalars": 0, "tensors": 0})
        try:
            accumulator.Reload()
        except Exception as exc:   # the reader raises its own errors (DataLossError...)
            raise LogError(f"{target}: not a readable TensorBoard event file ({exc})") from None
        series[run] = _scalars(accumulator, target)
    return runs_from_series(path, "TensorBoard", series, metric, mode)


def check_event_file(path: Path) -> None:
    """Refuses (LogError naming the byte) an event file whose records' framing is broken: each
    TFRecord is a length, its masked CRC-32C, the data and the data's CRC. A last record cut
    short is a writer still at work, not corruption; the data's own CRCs are left to the reader
    (hashing every byte in Python would be slow on a long run's file)."""
    from tensorboard.compat.tensorflow_stub.pywrap_tensorflow import (  # type: ignore[import-untyped]
        masked_crc32c,
    )

    size, pos = path.stat().st_size, 0
    with open(path, "rb") as fh:
        while pos + 12 <= size:
            fh.seek(pos)
            header = fh.read(12)
            length = int.from_bytes(header[:8], "little")
            if masked_crc32c(header[:8]) != int.from_bytes(header[8:], "little"):
                raise LogError(f"{path}: a corrupt TensorBoard event file (the record at byte "
                               f"{pos} fails its length checksum); it cannot be replayed")
            pos += 12 + length + 4
        if 0 < size < 12:
            raise LogError(f"{path}: a corrupt TensorBoard event file ({size} bytes, less than "
                           f"one record's header); it cannot be replayed")


def _scalars(accumulator: Any, target: Path) -> dict[str, Series]:
    """Scalar series by tag: simple values, and TF2's scalar tensors."""
    from tensorboard.util import tensor_util  # type: ignore[import-untyped]

    tags = accumulator.Tags()
    out: dict[str, Series] = {tag: [(e.step, e.value, f"{target}: tag {tag!r} step {e.step}")
                                    for e in accumulator.Scalars(tag)]
                              for tag in tags.get("scalars", [])}
    for tag in tags.get("tensors", []):
        if accumulator.SummaryMetadata(tag).plugin_data.plugin_name == "scalars":
            out[tag] = [(e.step, float(tensor_util.make_ndarray(e.tensor_proto).item()),
                         f"{target}: tag {tag!r} step {e.step}")
                        for e in accumulator.Tensors(tag)]
    return out


def _value(raw: Any, where: str, name: str) -> float:
    return _text_number(raw, where, name) if isinstance(raw, str) else _number(raw, where, name)


def _parsed(series: Series, name: str, in_step_order: bool) -> list[tuple[int, float, str]]:
    out = [(_step(_value(s, w, "step"), s, w), _value(v, w, name), w) for s, v, w in series]
    return out if in_step_order else sorted(out, key=lambda e: e[0])


def runs_from_series(path: Path, fmt: str, series: dict[str, dict[str, Series]],
                     metric: str | None, mode: str | None,
                     in_step_order: bool = True) -> list[LoggedRun]:
    """LoggedRuns from per-run metric series: the metric by `log_metrics`, each eval with the
    latest training loss at or before its step, a repeated step replaced by the later value.
    `in_step_order`: the file is in log order (steps must increase), else sorted by step."""
    keys = list(dict.fromkeys(k for by_key in series.values() for k in by_key))
    curves = [k for k in keys if max(len(by_key.get(k, ())) for by_key in series.values()) > 1]
    if metric:
        key, chosen = metric.removeprefix("-"), "--metric"
    else:
        # a metric logged once (a final test score) is no curve: chosen only if nothing else is
        key, why = pick_metric(curves)
        key, why = (key, why) if key else pick_metric(keys)
        chosen = f"{why}; choose one with --metric"
    if not key or not any(by_key.get(key) for by_key in series.values()):
        raise MissingMetric(f"{path}: {fmt} has no {key or 'eval metric'!r} values; its "
                            f"metrics are: {', '.join(keys) or 'none'}")
    run_mode, mode_from = mode_for(key, mode or ("min" if (metric or "")[:1] == "-" else None))
    if mode is None and (metric or "")[:1] == "-":
        mode_from = "a leading '-' on --metric"
    loss_key = train_loss_key(keys)
    runs = []
    for run_id, by_key in series.items():
        if not by_key.get(key):
            logger.warning("%s: run %r has no %r values; skipped", path, run_id, key)
            continue
        losses = _parsed(by_key.get(loss_key, []), loss_key, False)
        loss_steps = [s for s, _, _ in losses]
        steps: list[int] = []
        values: list[float] = []
        wheres: list[str] = []
        paired: list[float] = []
        notes = [f"read as {fmt}", f"metric chosen by {chosen}"]
        for step, value, where in _parsed(by_key[key], key, in_step_order):
            at = bisect.bisect_right(loss_steps, step) - 1
            loss = losses[at][1] if at >= 0 else float("nan")
            if steps and step == steps[-1]:
                notes.append(f"{where}: a second {key} at step {step} replaces the first")
                values[-1], wheres[-1], paired[-1] = value, where, loss
                continue
            steps.append(step)
            values.append(value)
            wheres.append(where)
            paired.append(loss)
        _check_steps(steps, wheres, str, str(path), run_id, None)
        runs.append(LoggedRun(run_id, str(path), key, run_mode, mode_from, tuple(steps),
                              tuple(values), tuple(paired), None, tuple(notes)))
    return runs


__all__ = ["FORMATS", "detect", "read_lightning_csv", "read_logs", "read_logs_skipping",
           "read_keras_csv", "read_mlflow_csv", "read_model_card", "read_path",
           "read_tensorboard", "read_wandb_csv", "runs_from_series"]
