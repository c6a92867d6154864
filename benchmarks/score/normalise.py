"""A task's own measure and its normalised score: NoStop = 0, the task's reference = 1.

The measure of every task of evalstop-v1 is informedness, recall - FPR (Youden's J): stopping
nothing scores 0 and so does stopping everything, so neither recall bought with false stops nor
caution without recall counts. A run's normalised score is

    (measure - NoStop's measure) / (the reference's measure - NoStop's measure),

with both anchors stored in the suite (`references.py`): the Bayes oracle at its best threshold
on simulated tasks, the best known detector on real ones. So NoStop scores 0 and the reference 1
on every task by construction, a score above 1 beats the reference, and below 0 does worse than
never stopping.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from ..scoring.measures import informedness
from .suite import Suite


def normalised(rows: pd.DataFrame, suite: Suite) -> pd.DataFrame:
    """`rows` (task, policy, seed, recall, fpr, ...) with `measure` and `normalised` added."""
    tasks = {t.id: t for t in suite.tasks}
    low = rows["task"].map(lambda t: suite.reference(tasks[t])["nostop"])
    high = rows["task"].map(lambda t: suite.reference(tasks[t])["value"])
    measure = informedness(rows)
    return rows.assign(measure=measure, normalised=scale(measure, low, high))


def scale(measure: Any, nostop: Any, reference: Any) -> Any:
    """The normalisation alone, for values that are not run rows (the oracle's own)."""
    return (measure - nostop) / (reference - nostop)
