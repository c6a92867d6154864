"""The env's own arguments and actions, checked once: a bad value is a one-line ValueError that
names the argument and what it takes (config fields are checked by `config/validation.py`)."""

from __future__ import annotations

import math
from collections.abc import Iterable
from numbers import Real
from typing import Any

import numpy as np

from .observation import JOB_TYPES

MAX_TABLE_ROWS = 4096   # control="full" table rows: the observation grows with max_jobs x 19


def check_monitored(monitored: Any) -> tuple[str, ...]:
    """A non-empty sequence of known job types; a bare string is refused, not split."""
    if isinstance(monitored, (str, bytes)) or not isinstance(monitored, Iterable):
        raise ValueError(f"monitored={monitored!r}: expected a sequence of job types, e.g. "
                         f"('rlhf',), among {', '.join(JOB_TYPES)}")
    types = tuple(monitored)
    bad = [t for t in types if t not in JOB_TYPES]
    if bad or not types:
        raise ValueError(f"monitored={monitored!r}: expected one or more of "
                         f"{', '.join(JOB_TYPES)}" + (f"; unknown: {bad!r}" if bad else ""))
    return types


def check_milestones(milestones: Any) -> tuple[float, ...]:
    """Finite progress points strictly between 0 and 1."""
    if isinstance(milestones, (str, bytes)) or not isinstance(milestones, Iterable):
        raise ValueError(f"milestones={milestones!r}: expected a sequence of progress points "
                         f"in (0, 1), e.g. (0.65,)")
    points = tuple(milestones)
    for m in points:
        if isinstance(m, bool) or not isinstance(m, Real) or not math.isfinite(m) \
                or not 0.0 < float(m) < 1.0:
            raise ValueError(f"milestones: {m!r} is not a progress point: expected finite "
                             f"numbers in (0, 1)")
    return tuple(sorted({float(m) for m in points}))   # the cluster asks once at each point


def check_max_jobs(max_jobs: Any) -> int:
    if isinstance(max_jobs, bool) or not isinstance(max_jobs, (int, np.integer)) \
            or not 1 <= max_jobs <= MAX_TABLE_ROWS:
        raise ValueError(f"max_jobs={max_jobs!r}: expected a whole number in "
                         f"[1, {MAX_TABLE_ROWS}] (table rows of control='full')")
    return int(max_jobs)


def stop_action(action: Any) -> bool:
    """control="stop": 0 (continue) or 1 (stop), as an int (a Python bool is one, as for
    `Discrete.contains`) or a one-element integer array."""
    if isinstance(action, bool):
        return action
    arr = np.asarray(action) if not isinstance(action, (str, bytes)) else None
    if arr is None or arr.size != 1 or arr.ndim > 1 \
            or not np.issubdtype(arr.dtype, np.integer) or int(arr.reshape(-1)[0]) not in (0, 1):
        raise ValueError(f"action={action!r}: control='stop' takes 0 (continue) or 1 (stop), "
                         f"an int or a one-element integer array (Discrete(2))")
    return int(arr.reshape(-1)[0]) == 1


def full_action(action: Any, size: int) -> np.ndarray:
    """control="full": `size` whole numbers (integral floats too); a value outside its
    component's range is ignored later, as documented, but a non-number is an error."""
    try:
        arr = np.asarray(action)
        if np.issubdtype(arr.dtype, np.floating) and not np.all(np.isfinite(arr) & (arr % 1 == 0)):
            raise TypeError
        if not (np.issubdtype(arr.dtype, np.number) or arr.dtype == np.bool_) \
                or np.issubdtype(arr.dtype, np.complexfloating):
            raise TypeError
        arr = arr.astype(np.int64)
    except (TypeError, ValueError):
        raise ValueError(f"action={action!r}: control='full' takes {size} integers "
                         f"(MultiDiscrete)") from None
    if arr.shape != (size,):   # a (3, 3) array is not 9 entries in some order
        raise ValueError(f"full-mode action must have {size} entries, in one row of shape "
                         f"({size},); got shape {arr.shape}")
    return arr
