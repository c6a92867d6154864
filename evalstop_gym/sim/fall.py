"""How far a run has fallen from its best eval so far: the one reading of a decline that a
detector's rule (`MaterialDecline`), a monitor's stop reason and the public-run scorer share.

Scores are oriented (higher is better); the best is the first argmax, as the kept checkpoint is.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

LEVEL_EVALS = 3   # the level a drop is measured to: the mean of up to this many latest evals


class Fall(NamedTuple):
    """Evals since the best, the drop to the recent level and to the latest eval, the gain (the
    best minus the lowest eval up to it) and the best's index."""

    after: int
    drop: float
    latest_drop: float
    gain: float
    best_at: int


def fall_since_best(scores: Sequence[float] | np.ndarray, level_evals: int = LEVEL_EVALS) -> Fall:
    """The run's fall from its first best so far."""
    s = np.asarray(scores, dtype=float)
    b = int(np.argmax(s))
    after = s[b + 1:]
    level = float(after[-level_evals:].mean()) if len(after) else float(s[b])
    return Fall(len(after), float(s[b] - level), float(s[b] - s[-1]),
                float(s[b] - s[:b + 1].min()), b)
