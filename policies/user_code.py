"""A user's own code by path or module name: `--import mine.py`, `--policy mine.py:SlopeStop-3`.

A file is imported under a module name that holds its content hash, so an edited file is
imported afresh even by a worker process that imported the old one (loky reuses its workers),
and a module imported by name is reloaded when its file changed. `source_digest` hashes the bytes
of every file a user module was built from (its own and the helpers it imported from its folder),
which is what the runs' cache key needs: edit the file and every run that used it is stale.
"""

from __future__ import annotations

import hashlib
import importlib
import importlib.util
import os
import re
import sys
from collections.abc import Iterable
from pathlib import Path
from types import ModuleType
from typing import Any

from evalstop_gym.experiment import MODEL_PREFIX as MODEL_PREFIX  # names are parsed there
from evalstop_gym.experiment import absolute_ref as absolute_ref
from evalstop_gym.experiment import is_file_ref as is_file_ref
from evalstop_gym.experiment import is_user_ref as is_user_ref
from evalstop_gym.experiment import user_target as user_target

MODULE_PREFIX = "evalstop_user_"
EXPECTED = ("expected a Python file (path/to/mine.py) or an importable module "
            "(package.module)")
_SOURCES: dict[str, tuple[Path, ...]] = {}   # ref -> the files importing it read
_STAMPS: dict[str, str] = {}                 # ref -> hash of those files' bytes at import
_ROOTS: dict[str, Path] = {}                 # ref -> the folder its own helpers live under
_NUMBER = re.compile(r"[+-]?[0-9]+")


class UserCodeError(ValueError):
    """A user module or name that cannot be imported or built (one line, no traceback)."""


def _hash(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()[:16]


def _one_line(exc: BaseException) -> str:
    return f"{type(exc).__name__}: {' '.join(str(exc).split())}"


def import_user_code(ref: str) -> ModuleType:
    """The module `ref` names, a file path or a dotted module name, imported (once per content).

    Raises UserCodeError in one line saying what was expected."""
    ref = ref.strip()
    if not ref:
        raise UserCodeError(f"empty name; {EXPECTED}")
    return _import_file(ref) if is_file_ref(ref) else _import_module(ref)


def _import_file(ref: str) -> ModuleType:
    path = Path(ref).expanduser()
    if not path.is_file():
        state = "is not a file" if path.exists() else "does not exist"
        raise UserCodeError(f"{ref} {state}; {EXPECTED}")
    if path.suffix != ".py":
        raise UserCodeError(f"{ref} is not a .py file; {EXPECTED}")
    path = path.resolve()
    key = str(path)
    tag = hashlib.sha256(f"{path}\0{_hash(path)}".encode()).hexdigest()[:16]   # where and what
    name = f"{MODULE_PREFIX}{re.sub(r'[^A-Za-z0-9_]', '_', path.stem)}_{tag}"
    if name in sys.modules and _fresh(key):
        return sys.modules[name]
    _forget(key)   # a helper it imported changed: import them all afresh
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None   # a .py file always has a loader
    module = importlib.util.module_from_spec(spec)
    folder = str(path.parent)
    if folder not in sys.path:   # its own helpers import as they would in a script
        sys.path.append(folder)
    before = set(sys.modules)
    sys.modules[name] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[name]
        raise UserCodeError(f"{ref}: importing it raised {_one_line(exc)}") from None
    _record(key, [path, *_new_files(before, path.parent)], path.parent)
    return module


def _import_module(ref: str) -> ModuleType:
    if not all(part.isidentifier() for part in ref.split(".")):
        raise UserCodeError(f"{ref!r} is neither a .py file nor a module name; {EXPECTED}")
    cwd = os.getcwd()
    if cwd not in sys.path and "" not in sys.path:   # as `python -m` would find it
        sys.path.append(cwd)
    if ref in _SOURCES and not _fresh(ref):
        _forget(ref)   # edited since this process imported it: import it (and helpers) afresh
    before = set(sys.modules)
    try:
        module = importlib.import_module(ref)
    except ModuleNotFoundError as exc:
        if exc.name and (ref == exc.name or ref.startswith(f"{exc.name}.")):
            raise UserCodeError(f"no module named {ref!r}; {EXPECTED}") from None
        raise UserCodeError(f"{ref}: importing it raised {_one_line(exc)}") from None
    except Exception as exc:
        raise UserCodeError(f"{ref}: importing it raised {_one_line(exc)}") from None
    file = getattr(module, "__file__", None)
    if file and ref not in _SOURCES:
        path = Path(file).resolve()
        top = sys.modules[ref.split(".")[0]]
        root = Path(str(getattr(top, "__file__", None) or path)).resolve().parent
        _record(ref, [path, *_new_files(before, root)], root)
    return module


def _stamp(files: Iterable[Path]) -> str:
    h = hashlib.sha256()
    for path in files:
        h.update(path.read_bytes() if path.is_file() else b"\0missing")
    return h.hexdigest()


def _record(key: str, files: list[Path], root: Path) -> None:
    _SOURCES[key] = tuple(dict.fromkeys(files))
    _STAMPS[key] = _stamp(_SOURCES[key])
    _ROOTS[key] = root


def _fresh(key: str) -> bool:
    """Whether the files `key` was imported from still hold the bytes they held then."""
    return key in _SOURCES and _STAMPS.get(key) == _stamp(_SOURCES[key])


def _forget(key: str) -> None:
    """Drops the modules built from `key`'s files, so that the next import reads them again."""
    files = set(_SOURCES.pop(key, ()))
    _STAMPS.pop(key, None)
    if not files:
        return
    for name, module in list(sys.modules.items()):
        file = getattr(module, "__file__", None)
        if isinstance(file, str) and Path(file).resolve() in files:
            del sys.modules[name]


def _new_files(before: set[str], root: Path) -> list[Path]:
    """Files of the modules imported since `before` that live under `root` (the user's own)."""
    out = []
    for name in sorted(set(sys.modules) - before):
        file = getattr(sys.modules.get(name), "__file__", None)
        if file and Path(file).suffix == ".py":
            path = Path(file).resolve()
            if path.is_relative_to(root):
                out.append(path)
    return out


def source_files(ref: str) -> tuple[Path, ...]:
    """The files the user module `ref` was built from (imported first when it was not)."""
    key = absolute_ref(ref)
    if key not in _SOURCES:
        import_user_code(ref)
    return _SOURCES.get(key, ())


def source_digest(refs: Iterable[str]) -> str:
    """Hash of the bytes of every file the user modules `refs` come from ('' for none)."""
    refs = sorted(set(refs))
    if not refs:
        return ""
    h = hashlib.sha256()
    for ref in refs:
        h.update(ref.encode())
        for path in source_files(ref):
            h.update(str(path).encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


def _argument(text: str) -> Any:
    """'3' -> 3, '0.02' -> 0.02, 'best' -> 'best': a name's dash-separated arguments."""
    if _NUMBER.fullmatch(text):
        return int(text)
    try:
        return float(text)
    except ValueError:
        return text


_MANTISSA = re.compile(r"[+-]?(?:[0-9]+\.?[0-9]*|\.[0-9]+)[eE]")


def split_args(text: str) -> list[str]:
    """'TrendTest-1e-12-3' -> ['TrendTest', '1e-12', '3']: a name's dash-separated parts, a
    number in scientific notation with a negative exponent kept whole."""
    parts: list[str] = []
    for part in text.split("-"):
        if parts and _MANTISSA.fullmatch(parts[-1]) and part[:1].isdigit():
            parts[-1] = f"{parts[-1]}-{part}"
        else:
            parts.append(part)
    return parts


def build_user_object(name: str) -> Any:
    """`target:Name-a-b` -> `Name(a, b)` from the module `target` (arguments as numbers where
    they read as numbers), for a class or a factory alike."""
    target, _, rest = name.rpartition(":")
    attr, *texts = split_args(rest)
    if not attr.isidentifier():
        raise UserCodeError(f"{attr!r} is not a Python name; expected "
                            f"{target}:Name[-arg...], e.g. {target}:SlopeStop-3-0.02")
    module = import_user_code(target)
    obj = getattr(module, attr, None)
    if not callable(obj):
        what = "defines no" if obj is None else "has a non-callable"
        raise UserCodeError(f"{target} {what} {attr!r}; expected a Detector or BaseScheduler "
                            "class, or a factory, defined in it")
    args = [_argument(t) for t in texts]
    before = set(sys.modules)
    try:
        built = obj(*args)
    except Exception as exc:
        call = f"{attr}({', '.join(map(repr, args))})"
        raise UserCodeError(f"{call} raised {_one_line(exc)}") from None
    key = absolute_ref(target)   # helpers it imports only when building count as its source too
    added = _new_files(before, _ROOTS[key]) if key in _ROOTS else []
    if added:
        _record(key, [*_SOURCES[key], *added], _ROOTS[key])
    return built
