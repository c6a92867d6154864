"""Eval curves from a Hugging Face model card: the "Training results" table Trainer writes.

`transformers`' `Trainer.create_model_card` writes, under `### Training results`, a markdown table
`| Training Loss | Epoch | Step | Validation Loss | <metric> ... |`, one row per eval, and the
hyperparameters above it (`- training_steps: N` or `- num_epochs: E`). Columns map to the names
`trainer_state.json` uses, so the metric is chosen and oriented as for every other log
(`log_metrics`): `Validation Loss` is `eval_loss`, each later column `eval_<name>` (lower case,
spaces as underscores), `Training Loss` the training loss (`No log` where none was logged yet).
`max_steps` is `training_steps`, else `num_epochs` times the table's steps per epoch.
"""

from __future__ import annotations

import math
import re
from pathlib import Path
from typing import Any

from .log_metrics import LogError

__all__ = ["card_max_steps", "card_series", "is_model_card", "read_card_text"]

Series = list[tuple[Any, Any, str]]        # (raw step, raw value, where) as logged

HEADER = re.compile(r"^\|\s*Training Loss\s*\|\s*Epoch\s*\|\s*Step\s*\|", re.IGNORECASE)
FIXED = {"training loss": "loss", "epoch": "epoch", "step": "step",
         "validation loss": "eval_loss"}


def is_model_card(text: str) -> bool:
    """Whether `text` holds a Trainer "Training results" table."""
    return any(HEADER.match(line.strip()) for line in text.splitlines())


def _cells(line: str) -> list[str]:
    return [c.strip() for c in line.strip().strip("|").split("|")]


def _column(name: str) -> str:
    key = name.strip().lower()
    return FIXED.get(key, "eval_" + re.sub(r"[^a-z0-9/]+", "_", key).strip("_"))


def card_table(text: str, where: str) -> tuple[list[str], list[tuple[int, list[str]]]]:
    """(column keys, [(line number, cells)]) of the first Training results table."""
    lines = text.splitlines()
    start = next((i for i, line in enumerate(lines) if HEADER.match(line.strip())), None)
    if start is None:
        raise LogError(f"{where}: no 'Training results' table (| Training Loss | Epoch | Step "
                       "| ...); a model card written by transformers' Trainer has one")
    keys = [_column(c) for c in _cells(lines[start])]
    rows = []
    for i in range(start + 2, len(lines)):          # past the header and its |:---:| rule
        line = lines[i].strip()
        if not line.startswith("|"):
            break
        cells = _cells(line)
        if len(cells) != len(keys):
            raise LogError(f"{where}: line {i + 1}: {len(cells)} cells for {len(keys)} columns")
        rows.append((i + 1, cells))
    if not rows:
        raise LogError(f"{where}: the Training results table has no rows")
    return keys, rows


def card_series(text: str, where: str) -> dict[str, Series]:
    """Each column of the table as a (raw step, raw value, where) series; blank and `No log`
    cells are values not logged at that row."""
    keys, rows = card_table(text, where)
    step_at = keys.index("step")
    series: dict[str, Series] = {k: [] for k in keys if k not in ("step", "epoch")}
    for line, cells in rows:
        step = _number(cells[step_at], f"{where}: line {line}", "Step")
        for key, cell in zip(keys, cells, strict=True):
            if key in series and cell and cell.lower() != "no log":
                series[key].append((step, _number(cell, f"{where}: line {line}", key),
                                    f"{where}: line {line}"))
    return series


def _number(cell: str, where: str, name: str) -> float:
    try:
        return float(cell)
    except ValueError:
        raise LogError(f"{where}: {name} is {cell!r}, not a number") from None


def card_max_steps(text: str, where: str) -> int | None:
    """The run's planned steps: `training_steps`, else `num_epochs` x steps per epoch."""
    found = re.search(r"^\s*-\s*training_steps:\s*(\d+)", text, re.MULTILINE)
    if found:
        return int(found.group(1))
    epochs = re.search(r"^\s*-\s*num_epochs:\s*([0-9.]+)", text, re.MULTILINE)
    keys, rows = card_table(text, where)
    step, epoch = keys.index("step"), keys.index("epoch")
    last = rows[-1][1]
    try:
        per_epoch = float(last[step]) / float(last[epoch])
    except (ValueError, ZeroDivisionError):
        return None
    if epochs is None or not math.isfinite(per_epoch):
        return None
    return max(int(float(last[step])), round(float(epochs.group(1)) * per_epoch))


def read_card_text(path: Path) -> str:
    try:
        return path.read_text(encoding="utf-8-sig")
    except UnicodeDecodeError as exc:
        raise LogError(f"{path}: not UTF-8 text (byte {exc.start})") from None
    except OSError as exc:
        raise LogError(f"{path}: cannot read ({exc.strerror})") from None
