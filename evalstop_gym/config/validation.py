"""The one checking mechanism of every configuration: fields declared with `_f`, checked at
construction, built from plain data with the field's path in each message.

A field says its type (the annotation) and what it allows (`_f`: a range, a supported size, a
set of choices, a text pattern, a least number of items); a class adds cross-field `rules`.
Platform configs (schema.py) and experiment files (evalstop_gym.experiment) are both declared
this way, so a bad value anywhere gets the same one-line `ConfigError` naming its key path and
what is allowed. Nothing here knows a particular field.
"""

from __future__ import annotations

import dataclasses
import functools
import math
import numbers
import re
import types
import typing
from collections.abc import Callable, Collection, Mapping
from dataclasses import field
from datetime import date, datetime
from typing import Any, ClassVar


class ConfigError(ValueError):
    """A configuration value is missing, misspelt or outside its allowed range."""


class ConfigFieldError(ConfigError):
    """One field of one config object is wrong (`name`, `detail`); `build` re-prefixes it with
    the section path."""

    def __init__(self, owner: str, name: str, detail: str) -> None:
        self.name, self.detail = name, detail
        where = f"{owner}.{name}" if owner and name else owner or name
        super().__init__(f"{where}: {detail}")


class _Bad(Exception):
    """A value's problem, before the field that holds it is known (`at`: the item inside it,
    e.g. "[1]" or ".value")."""

    def __init__(self, detail: str, at: str = "") -> None:
        super().__init__(detail)
        self.detail, self.at = detail, at


def _f(default: Any = dataclasses.MISSING, lo: float | None = None, hi: float | None = None,
       doc: str = "", lo_open: bool = False, cap: float | None = None, why: str = "",
       choices: Collection[Any] = (), pattern: re.Pattern[str] | None = None,
       pattern_doc: str = "", min_items: int = 0, distinct: bool = False,
       factory: Callable[[], Any] | None = None) -> Any:
    """A dataclass field with what it allows, checked at construction: the range [lo, hi] (or
    (lo, hi] with `lo_open`), for a size the largest value supported (`cap`) and the reason
    (`why`), the allowed `choices`, a text `pattern` (described by `pattern_doc`), and for a list
    its least length (`min_items`) and whether items must be `distinct`. No default: required."""
    meta = {"lo": lo, "hi": hi, "doc": doc, "lo_open": lo_open, "cap": cap, "why": why,
            "choices": tuple(choices), "pattern": pattern, "pattern_doc": pattern_doc,
            "min_items": min_items, "distinct": distinct}
    if factory is not None:
        return field(default_factory=factory, metadata=meta)
    return field(default=default, metadata=meta)


def allow(**meta: Any) -> tuple[tuple[str, Any], ...]:
    """What a type used inside another allows, as `_f`'s keywords plus `keys` (a mapping's
    allowed keys): `Annotated[Mapping[str, int], allow(keys=("a", "b"))]` (hashable, as a
    union's members must be)."""
    return tuple(sorted(meta.items()))


class _Cap(typing.TypedDict):
    """`_f`'s `cap` and `why`, typed so `**GPUS_CAP` type-checks against `_f`'s keywords."""

    cap: float
    why: str


# Cross-field rules of a class: each returns (field, problem) or None.
Rule = Callable[[Any], "tuple[str, str] | None"]


class Validated:
    """Base of every config dataclass: construction checks each field's type, range and size
    from its `_f` metadata, then the class's cross-field `rules`, so YAML, --set, gym.make
    keywords and the Python API share one check (a new `_f` field is checked with no extra
    code). A `root` class's messages name its fields without the class name."""

    rules: ClassVar[tuple[Rule, ...]] = ()
    root: ClassVar[bool] = False

    def __post_init__(self) -> None:
        validate(self)


@functools.cache
def _field_hints(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls, include_extras=True)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def validate(obj: Validated) -> None:
    """Check (and normalise: 2 -> 2.0, lists -> tuples) every field of `obj`, then its
    cross-field rules; a problem raises `ConfigFieldError` naming the field."""
    cls: type = type(obj)   # mypy checks type[Validated] against Hashable by its instances
    owner = "" if obj.root else cls.__name__
    for f, hint in _field_hints(cls):
        value = getattr(obj, f.name)
        try:
            checked = _checked(hint, value, f.metadata)
        except _Bad as exc:
            raise ConfigFieldError(owner, f.name + exc.at, exc.detail) from None
        if checked is not value:
            object.__setattr__(obj, f.name, checked)
    for rule in obj.rules:
        problem = rule(obj)
        if problem is not None:
            raise ConfigFieldError(owner, *problem)


def _checked(hint: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is typing.Annotated:   # a type with its own allowance: Annotated[T, allow(...)]
        return _checked(args[0], value, {**meta, **{k: v for a in args[1:] for k, v in a}})
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise _Bad(f"expected a {hint.__name__} (a section), got {value!r}")
        return value
    if origin is tuple and args[-1] is Ellipsis:
        return _items(args[0], value, meta)
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise _Bad(f"expected [low, high], got {value!r}")
        items = tuple(_allowed(_scalar(a, v), meta) for a, v in zip(args, value, strict=True))
        if items[0] > items[1]:
            raise _Bad(f"low {items[0]} is above high {items[1]}")
        return items
    if origin in (Mapping, dict):
        return _mapping(args[1], value, meta)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return value
        kinds = [a for a in args if a is not type(None)]
        if len(kinds) > 1:
            return _any_of(kinds, type(None) in args, value, meta)
        hint = kinds[0]
        if isinstance(hint, type) and dataclasses.is_dataclass(hint) \
                or typing.get_origin(hint) is not None:
            return _checked(hint, value, meta)
    return _allowed(_scalar(hint, _matching(value, meta)), meta)


def _items(hint: Any, value: Any, meta: Mapping[str, Any]) -> tuple[Any, ...]:
    """A list's items, each checked, with its index in any message."""
    least = meta.get("min_items", 0)
    if not isinstance(value, (list, tuple)) or len(value) < least:
        raise _Bad(f"expected a {'non-empty ' if least == 1 else ''}list, got {value!r}")
    items = []
    for i, v in enumerate(value):
        try:
            items.append(_checked(hint, v, {**meta, "min_items": 0, "distinct": False}))
        except _Bad as exc:
            raise _Bad(exc.detail, f"[{i}]{exc.at}") from None
    if meta.get("distinct") and len(set(items)) != len(items):
        raise _Bad(f"expected a list of distinct values, got {list(value)!r}")
    return value if tuple(items) == value and isinstance(value, tuple) else tuple(items)


def _mapping(hint: Any, value: Any, meta: Mapping[str, Any]) -> dict[str, Any]:
    """A mapping with text keys (among `keys` when the field names them), each value checked."""
    keys = meta.get("keys")
    if not isinstance(value, Mapping) or not all(isinstance(k, str) for k in value) \
            or (keys is not None and set(value) - set(keys)):
        among = f"keys among {', '.join(sorted(keys))}" if keys is not None else "text keys"
        raise _Bad(f"expected a mapping with {among}, got {value!r}")
    inner = {k: v for k, v in meta.items() if k != "keys"}
    out = {}
    for k, v in value.items():
        try:
            out[k] = _checked(hint, v, inner)
        except _Bad as exc:
            raise _Bad(exc.detail, f".{k}{exc.at}") from None
    return out


_KIND = {bool: "true or false", int: "a number", float: "a number", str: "text"}


def _any_of(kinds: list[Any], none_ok: bool, value: Any, meta: Mapping[str, Any]) -> Any:
    """The first of several plain types that takes `value`, its own type first (2.0 stays a
    float and 2 an int: a swept value names its cell)."""
    for kind in sorted(kinds, key=lambda k: type(value) is not k):
        try:
            return _allowed(_scalar(kind, value), meta)
        except _Bad:
            continue
    names = list(dict.fromkeys(_KIND.get(k, getattr(k, "__name__", str(k))) for k in kinds))
    names += ["nothing"] if none_ok else []
    listed = names[0] if len(names) == 1 else f"{', '.join(names[:-1])} or {names[-1]}"
    raise _Bad(f"expected {listed}, got {value!r}")


def _scalar(hint: Any, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise _Bad(f"expected true or false, got {value!r}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise _Bad(f"expected a {'whole number' if hint is int else 'number'}, got {value!r}")
        if not math.isfinite(value):
            raise _Bad(f"expected a finite {'whole number' if hint is int else 'number'}, "
                       f"got {value!r}")
        if hint is int and value != math.trunc(value):
            raise _Bad(f"expected a whole number, got {value!r}")
        return hint(value) if type(value) is not hint else value
    if hint is str:
        if isinstance(value, datetime):    # YAML reads 2017-11-07 00:00:00 as a datetime
            return value.strftime("%Y-%m-%d %H:%M:%S")
        if isinstance(value, date):
            return value.strftime("%Y-%m-%d 00:00:00")
        if not isinstance(value, str) or not value.isprintable():
            raise _Bad(f"expected printable text, got {value!r}")
    return value


def _matching(value: Any, meta: Mapping[str, Any]) -> Any:
    """`value` if it is text matching the field's `pattern` (when it has one): a value of
    another type is refused with what the pattern allows, not only "expected text"."""
    pattern = meta.get("pattern")
    if pattern is not None and not (isinstance(value, str) and pattern.fullmatch(value)):
        raise _Bad(f"{value!r} is not {meta.get('pattern_doc') or pattern.pattern}")
    return value


def _allowed(value: Any, meta: Mapping[str, Any]) -> Any:
    """`value` if among the field's `choices`, inside its range [lo, hi] and at most its
    supported size `cap`."""
    choices = meta.get("choices")
    if choices and value not in choices:
        raise _Bad(f"{value!r} is not one of {', '.join(map(str, choices))}")
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return value
    lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    if too_low or (hi is not None and value > hi):
        left = "(" if lo_open else "["
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf)" if hi is None else f"{hi:g}]"
        raise _Bad(f"{value!r} is outside the allowed range {left}{lo_s}, {hi_s}")
    cap = meta.get("cap")
    if cap is not None and value > cap:
        cap_s = f"{cap:,}" if isinstance(cap, int) else f"{cap:g}"
        raise _Bad(f"{value!r} is above the supported maximum {cap_s} ({meta.get('why')})")
    return value


# --------------------------------------------------------------------------- building

def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set dotted keys in a nested dict; an unknown path is a ConfigError."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"overrides: expected a mapping of dotted keys to values "
                          f"(e.g. {{noise.sigma: 0.05}}), got {overrides!r}")
    for key, value in overrides.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"overrides: {key!r} is not a dotted key such as noise.sigma")
        node = data
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            if not isinstance(node.get(part), dict):
                raise ConfigError(f"{'.'.join(parts[:depth + 1])}: unknown section in override "
                                  f"'{key}'; known: {', '.join(sorted(node))}")
            node = node[part]
        if parts[-1] not in node:
            raise ConfigError(f"{key}: unknown key; known here: {', '.join(sorted(node))}")
        if isinstance(node[parts[-1]], dict) and isinstance(value, Mapping):
            node[parts[-1]] = {**node[parts[-1]], **value}
        else:
            node[parts[-1]] = value


def _required(cls: type) -> list[str]:
    return [f.name for f in dataclasses.fields(cls) if f.default is dataclasses.MISSING
            and f.default_factory is dataclasses.MISSING]


def build(cls: type, data: Mapping[str, Any] | None, path: str = "", root: str = "config") -> Any:
    """Build dataclass `cls` from a mapping: unknown keys, missing ones and sections here, every
    value's type and range in the dataclass's own check (`Validated`), errors prefixed with
    `path` (`root` names the top level: "config", or "" when the caller names the file)."""
    data = dict(data or {})
    names = {f.name for f in dataclasses.fields(cls)}
    head = f"{path or root}: " if path or root else ""
    unknown = sorted(set(data) - names, key=str)
    if unknown:
        raise ConfigError(f"{head}unknown key(s) {', '.join(map(str, unknown))}; "
                          f"allowed: {', '.join(sorted(names))}")
    missing = [n for n in _required(cls) if n not in data]
    if missing:
        raise ConfigError(f"{head}missing {', '.join(map(repr, missing))}")
    kwargs = {}
    for f, hint in _field_hints(cls):
        if f.name in data:
            name = f"{path}.{f.name}" if path else f.name
            kwargs[f.name] = _sections(hint, data[f.name], name)
    try:
        return cls(**kwargs)
    except ConfigFieldError as exc:
        name = ".".join(p for p in (path, exc.name) if p)
        raise ConfigError(f"{name or root or 'config'}: {exc.detail}") from None


def _sections(hint: Any, value: Any, name: str) -> Any:
    """Nested sections (and lists of them) built from mappings; plain values left as given."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType) and value is not None:
        parts = [a for a in typing.get_args(hint) if a is not type(None)]
        hint = parts[0] if len(parts) == 1 else hint
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            need = _required(hint)
            what = (f"a mapping with at least {', '.join(map(repr, need))}" if need
                    else "a section (mapping)")
            raise ConfigError(f"{name}: expected {what}, got {value!r}")
        return build(hint, value, name)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args[-1] is Ellipsis \
            and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, (list, tuple)) or not value:
            return value   # the field's own check names what it expects
        return tuple(_sections(args[0], v, f"{name}[{i}]") for i, v in enumerate(value))
    return value
