"""Per-job scalar draws of a `numpy.random.Generator`, made as whole arrays, bit for bit.

A workload draws, job after job, a bounded integer and some uniform doubles from one stream
(a job's GPU count after its duration; a corpus run before its loss parameters). Drawn one call
at a time that is two numpy calls per job; drawn as two arrays it would be other numbers, since
the two kinds of draw take the stream's 64-bit words differently: a double takes a word, an
integer below 2**32 takes half of one (numpy's PCG64 keeps the other half for the next such
draw) and Lemire's method may reject a draw and take another. So `interleaved` reads the raw
words once and lays them out as those calls would have; in the rare case of a rejection it
rewinds the stream and makes the calls one by one, so the numbers are always the calls'.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

WORD = np.uint64(0xFFFFFFFF)


def interleaved(rng: np.random.Generator, spans: np.ndarray, n_doubles: int,
                integer_first: bool) -> tuple[np.ndarray, np.ndarray]:
    """What, for each job k in turn, `rng.integers(0, spans[k] + 1)` and `rng.random(n_doubles)`
    (the integer first when `integer_first`, else after) return: (integers (n,), doubles
    (n, n_doubles)). A span of 0 draws nothing, as numpy's does."""
    spans = np.asarray(spans, dtype=np.int64)
    state = rng.bit_generator.state
    fast = state["bit_generator"] == "PCG64" and bool(np.all(spans < 0xFFFFFFFF))
    if fast:
        result = _from_words(rng, spans, n_doubles, integer_first, state)
        if result is not None:
            return result
        rng.bit_generator.state = state      # a rejection: rewind and draw call by call
    return _one_by_one(rng, spans, n_doubles, integer_first)


def _one_by_one(rng: np.random.Generator, spans: np.ndarray, n_doubles: int,
                integer_first: bool) -> tuple[np.ndarray, np.ndarray]:
    ints, doubles = np.zeros(len(spans), np.int64), np.empty((len(spans), n_doubles))
    for k, span in enumerate(spans.tolist()):
        if integer_first:
            ints[k] = rng.integers(0, span + 1)
        doubles[k] = rng.random(n_doubles)
        if not integer_first:
            ints[k] = rng.integers(0, span + 1)
    return ints, doubles


def _from_words(rng: np.random.Generator, spans: np.ndarray, n_doubles: int,
                integer_first: bool, state: Mapping[str, Any]
                ) -> tuple[np.ndarray, np.ndarray] | None:
    """The draws from the stream's raw words, or None when a draw would have been rejected
    (then the stream has moved on and the caller rewinds it)."""
    n = len(spans)
    has_int = spans > 0
    buffered = int(state["has_uint32"])
    # the p-th half-word draw (p counts a half kept from before) takes a new word when p is even
    p = np.cumsum(has_int) - has_int + buffered          # per job: its integer's p
    takes_word = has_int & (p % 2 == 0)
    # words taken by each job: its doubles, and one more when its integer takes a new word
    per_job = n_doubles + takes_word.astype(np.int64)
    first = np.cumsum(per_job) - per_job                 # index of the job's first word
    raw = rng.bit_generator.random_raw(int(per_job.sum()))
    double_at = first[:, None] + np.arange(n_doubles)[None, :]
    int_word = first + (0 if integer_first else n_doubles)
    if integer_first:
        double_at = double_at + takes_word[:, None]
    doubles = (raw[double_at] >> np.uint64(11)) * (1.0 / 9007199254740992.0)
    # a draw that takes no word reads the half the draw before it kept (or one kept from before)
    drawn = np.flatnonzero(has_int)
    words = np.zeros(len(drawn), np.uint64)
    taking = takes_word[drawn]
    words[taking] = raw[int_word[drawn[taking]]]
    kept = np.empty(len(drawn), np.uint64)
    kept[1:] = words[:-1] >> np.uint64(32)
    kept[:1] = np.uint64(state["uinteger"]) & WORD
    halves = np.zeros(n, np.uint64)
    halves[drawn] = np.where(takes_word[drawn], words & WORD, kept)
    excl = (spans + 1).astype(np.uint64)
    m = halves * excl
    threshold = (WORD - spans.astype(np.uint64)) % excl
    if np.any(has_int & ((m & WORD) < threshold)):
        return None
    ints = np.where(has_int, (m >> np.uint64(32)).astype(np.int64), 0)
    _keep_half(rng, len(drawn) + buffered, words, kept)
    return ints, doubles


def _keep_half(rng: np.random.Generator, halves_drawn: int, words: np.ndarray,
               kept: np.ndarray) -> None:
    """Leave the stream's kept half-word as the calls would: the high half of the last word an
    integer took when an odd number of halves were drawn in all, none otherwise."""
    state = dict(rng.bit_generator.state)
    if halves_drawn % 2 and len(words):
        state["has_uint32"], state["uinteger"] = 1, int(words[-1] >> np.uint64(32))
    elif halves_drawn % 2 == 0:
        state["has_uint32"], state["uinteger"] = 0, 0
    rng.bit_generator.state = state
