"""Per-job integer and double draws made as arrays are the draws of the calls, one job at a time."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.sim.stream_draws import _one_by_one, interleaved


@pytest.mark.parametrize("seed", range(40))
def test_interleaved_draws_are_the_calls_draws(seed: int) -> None:
    """Any spans (0: no draw), integer first or last, 0 to 4 doubles, a half-word kept from an
    earlier draw or not; spans near 2**32 reject often, and the rewind must give the calls'."""
    r = np.random.default_rng(seed)
    spans = r.integers(0, 9, int(r.integers(0, 60)))
    if seed % 5 == 0:
        spans = r.integers(0, 3_500_000_000, 30)
    for integer_first in (True, False):
        for n_doubles in (0, 1, 4):
            a, b = np.random.default_rng(seed + 100), np.random.default_rng(seed + 100)
            if seed % 2:
                a.integers(0, 3), b.integers(0, 3)
            got = interleaved(a, spans, n_doubles, integer_first)
            want = _one_by_one(b, spans, n_doubles, integer_first)
            assert got[0].tolist() == want[0].tolist()
            assert got[1].tobytes() == want[1].tobytes()
            # the stream is left where the calls leave it, a kept half-word included
            assert a.integers(0, 7, 5).tolist() == b.integers(0, 7, 5).tolist()
            assert a.random() == b.random()
