"""Array views that hold no reference to their parent, for compiled code that hands many arrays
around in NamedTuples.

A numba view holds a reference to its parent, and numba's pruning leaves two atomic
reference-count calls for each array each time a NamedTuple of them is passed, unpacked or
dropped: over the engine's ~60 arrays, per step of the event loop, that cost made the loop
written as steps several times slower. A view without its reference (a NULL meminfo) makes
those calls a test of NULL. It is safe where the parent outlives every use of the view: the
caller's arguments keep the parents alive for the whole call, and no view is stored or returned
past it.
"""

from __future__ import annotations

from typing import Any

from .jit import HAS_NUMBA

if HAS_NUMBA:
    from numba.core import config as numba_config


def _row_plain(a: Any, i: int) -> Any:
    """a[i] (what `row` is without numba)."""
    return a[i]


def _borrow_plain(a: Any) -> Any:
    """a itself (what `borrow` is without numba)."""
    return a


row: Any = _row_plain
borrow: Any = _borrow_plain
# numba's config sets DISABLE_JIT through globals(), which mypy cannot see
JIT = HAS_NUMBA and not numba_config.DISABLE_JIT  # type: ignore[attr-defined]
if JIT:
    from numba.core import cgutils, types
    from numba.extending import intrinsic
    from numba.np.arrayobj import make_array, populate_array

    def _view(context: Any, builder: Any, sig: Any, args: Any) -> Any:
        """The view `sig` returns of args[0]: its row args[1] if given, else all of it."""
        parent = make_array(sig.args[0])(context, builder, args[0])
        view = make_array(sig.return_type)(context, builder)
        shape = cgutils.unpack_tuple(builder, parent.shape)
        strides = cgutils.unpack_tuple(builder, parent.strides)
        data, skip = parent.data, 0
        if len(args) > 1:
            start = builder.gep(builder.bitcast(parent.data, cgutils.voidptr_t),
                                [builder.mul(args[1], strides[0])])
            data, skip = builder.bitcast(start, parent.data.type), 1
        populate_array(view, data=data, shape=cgutils.pack_array(builder, shape[skip:]),
                       strides=cgutils.pack_array(builder, strides[skip:]),
                       itemsize=parent.itemsize, meminfo=None, parent=None)
        return view._getvalue()

    @intrinsic
    def row(typingctx: Any, a: Any, i: Any) -> Any:   # noqa: F811  (numba's form of a[i])
        """a[i] of a C-contiguous array, a view that holds no reference to `a`."""
        if not isinstance(a, types.Array) or a.ndim < 2 or a.layout != "C" \
                or not isinstance(i, types.Integer):
            return None
        return a.copy(ndim=a.ndim - 1)(a, types.intp), _view

    @intrinsic
    def borrow(typingctx: Any, a: Any) -> Any:   # noqa: F811  (numba's form of a[...])
        """All of array `a`, a view that holds no reference to it."""
        if not isinstance(a, types.Array):
            return None
        return a(a), _view
