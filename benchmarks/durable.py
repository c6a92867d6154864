"""Output files that survive kills and concurrent sweeps: atomic writes and one lock per --out.

Every file a sweep or a report writes goes through `atomic_path`: the data is written to a temp
file in the same folder (named `.tmp-*`) and renamed onto the target with `os.replace`, so a
reader, or a rerun after a SIGKILL, sees either the old file or the new one, never a truncated one.

`out_lock(out)` holds a lock file (`OUT/.lock`, filelock) for a whole sweep: a second sweep on the
same folder says so and waits for the first (or refuses, with `wait=False`). Temp files left by a
killed sweep are removed only by the holder of the lock, when it first takes it, so one sweep
never deletes another's file in progress.
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import filelock

log = logging.getLogger(__name__)

TMP_PREFIX = ".tmp-"
LOCK_NAME = ".lock"
_LOCKS: dict[Path, filelock.FileLock] = {}


class OutputError(RuntimeError):
    """An output folder that cannot be created or written, or that another sweep holds."""


@contextlib.contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """A temp path beside `path` (same extension) to write to; renamed onto `path` when the block
    ends without an error, removed otherwise."""
    path = Path(path)
    _make_folder(path.parent)
    try:
        fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=TMP_PREFIX,
                                   suffix=f".part{path.suffix}")
    except OSError as exc:
        raise _cannot_write(path, exc) from None
    os.close(fd)
    try:
        os.chmod(tmp, 0o666 & ~_umask())   # mkstemp makes it private; outputs are for everyone
        yield Path(tmp)
        os.replace(tmp, path)
    except BaseException as exc:
        with contextlib.suppress(OSError):
            os.unlink(tmp)
        if isinstance(exc, OSError):   # a full disk, a quota, a read-only mount: one line
            raise _cannot_write(path, exc) from None
        raise


def _cannot_write(path: Path, exc: OSError) -> OutputError:
    return OutputError(f"{path}: cannot write this file ({exc.strerror or exc}); the previous "
                       "version, if any, is untouched")


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


def write_text(path: Path, text: str) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(text, encoding="utf-8")


def write_json(path: Path, payload: Any, default: Callable[[Any], Any] | None = None) -> None:
    with atomic_path(path) as tmp, open(tmp, "w") as fh:
        json.dump(payload, fh, default=default)


def write_csv(frame: Any, path: Path) -> None:
    """A pandas DataFrame as CSV (no index)."""
    with atomic_path(path) as tmp:
        frame.to_csv(tmp, index=False)


def copy_file(source: Path, target: Path) -> None:
    with atomic_path(target) as tmp:
        shutil.copyfile(source, tmp)


@contextlib.contextmanager
def out_lock(out: Path, wait: bool = True) -> Iterator[Path]:
    """Hold OUT's lock for the block (re-entrant in one process); yields OUT.

    Another process holding it: with `wait`, log that and wait for it; else raise OutputError.
    """
    out = Path(out)
    _make_folder(out)
    key = out.resolve()
    lock = _LOCKS.get(key)
    if lock is None:
        lock = _LOCKS[key] = filelock.FileLock(out / LOCK_NAME, thread_local=False)
    try:
        lock.acquire(timeout=0)
    except filelock.Timeout:
        if not wait:
            raise OutputError(f"{out}: another sweep is writing to this folder (lock "
                              f"{out / LOCK_NAME}); wait for it to end or use another --out") \
                from None
        log.warning("%s: another sweep is writing to this folder; waiting for it to end", out)
        lock.acquire()
    try:
        if lock.lock_counter == 1:
            remove_stale(out)
        yield out
    finally:
        lock.release()


def remove_stale(out: Path) -> int:
    """Remove the temp files and folders a killed writer left under `out`; how many."""
    stale = sorted(Path(out).rglob(f"{TMP_PREFIX}*"), key=lambda p: len(p.parts), reverse=True)
    for path in stale:
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:
            path.unlink(missing_ok=True)
    if stale:
        log.info("%s: removed %d temp file(s) left by an interrupted sweep", out, len(stale))
    return len(stale)


def _make_folder(folder: Path) -> None:
    try:
        folder.mkdir(parents=True, exist_ok=True)
    except OSError as exc:
        raise OutputError(f"{folder}: cannot create this folder ({exc.strerror or exc})") \
            from None
