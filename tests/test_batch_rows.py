"""`batch_rows.row`: compiled, the same row as a[i] (values, shape, dtype), and writes to it land
in the parent, for every dtype and rank the compiled batch keeps its state in."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.env.batch_rows import row
from evalstop_gym.sim.jit import HAS_NUMBA, njit


@njit(cache=False)
def _copy_and_write(a, i):
    """row i of a, copied; then its last element written over its first, through the row."""
    view = row(a, i)
    before = view.copy()
    flat = view.reshape(view.size)
    flat[0] = flat[view.size - 1]
    return before


@pytest.mark.parametrize("dtype", [np.float64, np.float32, np.int64, np.int8, np.bool_])
@pytest.mark.parametrize("shape", [(5, 7), (4, 6, 3)])
def test_row_is_a_i_and_writes_through(dtype: type, shape: tuple[int, ...]) -> None:
    rng = np.random.default_rng(len(shape))
    a = (rng.random(shape) * 100).astype(dtype) if dtype is not np.bool_ \
        else rng.random(shape) < 0.5
    for i in range(shape[0]):
        expected = a[i].copy()
        got = _copy_and_write(a, i)
        assert got.dtype == expected.dtype and got.shape == expected.shape
        np.testing.assert_array_equal(got, expected)
        written = expected.copy()
        written.flat[0] = written.flat[-1]
        np.testing.assert_array_equal(a[i], written)   # written through to the parent


@pytest.mark.skipif(not HAS_NUMBA, reason="without numba `row` is a[i] itself")
def test_row_refuses_what_it_cannot_view() -> None:
    from numba.core.errors import TypingError

    with pytest.raises(TypingError):
        _copy_and_write(np.zeros(5), 1)                   # a 1-D array has no rows
    with pytest.raises(TypingError):
        _copy_and_write(np.zeros((6, 5))[:, ::2], 1)      # not C-contiguous
