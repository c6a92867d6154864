"""What the public runs show before their last eval, at each density: a scale for recall.

A detector is credited with a declining run only if it stops it before its last eval. At a sparse
density a run has a handful of evals; a decline that is plain in the whole curve at its logged
density may show in the evals before the last as one low eval, or not at all. This reading asks
the labelling rule itself (`traces.public_runs.hindsight_label`), told the eval noise sd of the
run's whole logged curve, what it calls the evals up to the last but one at each density: the
share of declining runs it still calls declining there (`visible`), and of healthy runs it calls
declining there (`healthy_read_declining`).

It is neither bound on a detector: the rule knows the noise a detector must estimate, and judges
one look where a detector has many (each a chance of a false stop); a detector may stop at an
earlier look. It says how much of the corpus's declines the curves hold at each density, which
puts the recall a detector reaches there on a scale.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import pandas as pd

from evalstop_gym.traces.public_runs import PublicRun, hindsight_label, robust_noise

from .scoring import DENSITIES, eval_index


def read_before_last(run: PublicRun, interval: float | None) -> str:
    """The hindsight rule's label of the run's evals before its last at an eval interval, with
    the noise of the whole logged curve taken as known."""
    scores = run.eval_score[eval_index(run.as_corpus_run(), interval)]
    if len(scores) < 2:
        return "ambiguous"
    return hindsight_label(scores[:-1], noise=robust_noise(run.eval_score)).label


def visible_declines(runs: Sequence[PublicRun],
                     densities: Mapping[str, float | None] = DENSITIES) -> pd.DataFrame:
    """Per (split, density): the share of declining runs read declining before their last eval,
    and of healthy runs read declining there."""
    rows = [{"split": run.split, "density": density, "label": run.label.label,
             "read_declining": read_before_last(run, interval) == "declining"}
            for density, interval in densities.items() for run in runs
            if run.label.label != "ambiguous"]
    frame = pd.DataFrame(rows)
    shares = frame.groupby(["split", "density", "label"], sort=False).read_declining.mean()
    table = shares.unstack("label").reset_index()
    return table.rename(columns={"declining": "visible", "healthy": "healthy_read_declining"})
