"""The compiled forms of the full-control step's hot loops: the engine's helpers as copies that
numba inlines where the step calls them, and loops compiled without reference counts.

The engine compiles its small helpers (a job's key and reported progress, the waiting heaps'
push, pop and fill, `rules.priority_key`) as calls: inlined into each step of the event loop,
they would lengthen its cold compile. A call that takes arrays costs more than the helper's
arithmetic (numba passes each array as seven fields and wraps the call in a reference-count
call per array), and the full-control step makes such calls per running job and per table row
of every env at every pass. So the step compiles inlined copies of the same functions, in which
the helpers they call are inlined copies too: the same code, so the same bits, with no call.

The loops over a pass's running jobs and table rows (`uncounted`) are handed borrowed views
(`sim/borrowed.py`, no reference held), allocate nothing and keep no array past their call, so
the reference counts numba would make there (a call each, on every view and slice taken) are
left out: numba's `_nrt=False`. Code that allocates (or calls what does) cannot be compiled so.
"""

from __future__ import annotations

import types
from collections.abc import Callable
from typing import Any

from ..sim.jit import njit


def inlined(fn: Callable[..., Any], **callees: Callable[..., Any]) -> Callable[..., Any]:
    """`fn` (a plain function, or a numba dispatcher's) compiled to be inlined wherever compiled
    code calls it, the global names in `callees` bound to the functions given (inlined copies
    of what it calls) instead of its module's. Never compiled alone, so never cached."""
    plain = getattr(fn, "py_func", fn)
    if callees:
        plain = types.FunctionType(plain.__code__, {**plain.__globals__, **callees},
                                   plain.__name__, plain.__defaults__, plain.__closure__)
    return njit(cache=False, inline="always")(plain)


# a loop over borrowed views that allocates nothing (see the top): no reference counts (measured
# on the table and the allocation at N=64: +25% full-control vector steps/s)
uncounted = njit(cache=True, _nrt=False)
