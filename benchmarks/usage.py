"""What every command checks of its user's input: one-line usage errors, --set values and output
paths (light: the entry point imports it before knowing which command runs)."""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.config import parse_yaml


class UsageError(ValueError):
    """A command-line value that makes no sense (reported in one line, exit code 2)."""


def parse_overrides(items: Sequence[str] | None) -> dict[str, Any]:
    """['workload.n_jobs=20'] -> {'workload.n_jobs': 20} (values parsed as YAML)."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. workload.n_jobs=20")
        out[key.strip()] = parse_yaml(value, f"--set {item!r}")
    return out


def check_output(path: str | Path, option: str, kind: str = "file",
                 inputs: Sequence[str | Path] = ()) -> Path:
    """A user's output path, checked before any work starts so that a long computation never
    ends in a traceback, and never replaces one of its own inputs: `kind` is "file" or "dir";
    raises UsageError (one line naming `option`) when the path is of the other kind, lies under
    a regular file, is in a folder that cannot be written, is the same file as an input, or lies
    inside an input that is a folder (a log folder, a training run's folder)."""
    path = Path(path)
    where = f"{option} {path}"
    if kind == "file" and path.is_dir():
        raise UsageError(f"{where}: is a folder; expected a file path")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise UsageError(f"{where}: is a file; expected a folder")
    for given in inputs:
        if _same_file(path, Path(given)):
            raise UsageError(f"{where}: is also an input ({given}); writing it would replace "
                             "it: choose another output path")
    target = Path(os.path.abspath(path)).resolve()
    for given in inputs:
        if Path(given).is_dir() and Path(given).resolve() in target.parents:
            raise UsageError(f"{where}: is inside the input folder {given}; writing it would "
                             "replace or add to what was read: choose a path outside it")
    ancestor = path if kind == "dir" else path.parent
    ancestor = Path(os.path.abspath(ancestor))
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{where}: {ancestor} is a file, not a folder; choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: folder {ancestor} is not writable; choose another path")
    return path


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` (or the trainer_state.json a checkpoint folder `b` holds) are one
    file: by inode where both exist, else by resolved path."""
    candidates = [b, b / "trainer_state.json"] if b.is_dir() else [b]
    for c in candidates:
        if a.exists() and c.exists():
            if os.path.samefile(a, c):
                return True
        elif a.resolve() == c.resolve():
            return True
    return False
