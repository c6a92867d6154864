"""Bytes of state per env of a vector env's batch core, two ways, for `env_throughput`.

- array bytes: the nbytes of the numpy arrays the core holds (its attributes, through tuples,
  NamedTuples, lists and dicts, each array once), divided by N. For the compiled core this is
  its per-env state; for the reference core only its batched output buffers (the single envs'
  Python objects are not arrays).
- traced bytes: the Python heap (numpy's buffers included) that tracemalloc sees the core keep
  after it is built with N envs and every env reset, divided by N. It covers every core alike,
  the reference core's single envs too. A one-env core is built and reset first, so the config,
  the imports and compiled code already loaded are not counted.
"""

from __future__ import annotations

import gc
import tracemalloc
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np


class StateBytes(NamedTuple):
    """Per env, in bytes; `core` is the batch core's class name."""

    core: str
    array: float
    traced: float


def array_nbytes(root: Any) -> int:
    """The nbytes of every numpy array reachable from `root`'s attributes through containers
    (a shared array counted once)."""
    seen: set[int] = set()
    total = 0
    stack = [*vars(root).values()]
    while stack:
        obj = stack.pop()
        if id(obj) in seen:
            continue
        seen.add(id(obj))
        if isinstance(obj, np.ndarray):
            total += obj.nbytes
        elif isinstance(obj, (tuple, list)):
            stack.extend(obj)
        elif isinstance(obj, dict):
            stack.extend(obj.values())
    return total


def state_bytes(make_core: Callable[[int], Any], num_envs: int, seed: int = 0) -> StateBytes:
    """Build and reset a core of `num_envs` envs (`make_core(n)` returns an unreset core)."""
    warm = make_core(1)
    warm.reset([0], [seed])
    del warm
    gc.collect()
    tracemalloc.start()
    try:
        before = tracemalloc.get_traced_memory()[0]
        core = make_core(num_envs)
        core.reset(range(num_envs), [seed + i for i in range(num_envs)])
        gc.collect()
        traced = tracemalloc.get_traced_memory()[0] - before
    finally:
        tracemalloc.stop()
    return StateBytes(type(core).__name__, array_nbytes(core) / num_envs, traced / num_envs)
