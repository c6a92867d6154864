"""The checkpoint stop-and-save keeps, written once: the first best observed eval, and its truth.

A stop keeps the best eval seen so far; among equal scores the earlier one (a later tie brings
nothing, and the earlier checkpoint was saved first). The job record, the reward, the compiled
batch and `RunMonitor` all call these plain functions (numba compiles them for the batch), so
the rule cannot drift between them.
"""

from __future__ import annotations

from .rules import Floats


def best_eval(scores: Floats, start: int = 0, best: int = -1) -> int:
    """Index of the first best of `scores` (-1 when empty). With `best` the answer for
    scores[:start], only scores[start:] are read: a growing history is folded once."""
    for i in range(start, len(scores)):
        if best < 0 or scores[i] > scores[best]:
            best = i
    return best


def true_score_at(points: Floats, truth: Floats, progress: float) -> float:
    """Noiseless score of the checkpoint taken at `progress`: that of the nearest eval point
    (the first of equally near ones)."""
    at = 0
    for i in range(1, len(points)):
        if abs(points[i] - progress) < abs(points[at] - progress):
            at = i
    return truth[at]
