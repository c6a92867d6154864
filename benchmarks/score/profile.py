"""The performance profile: for each policy, the share of its runs whose normalised score
exceeds tau, as tau sweeps from below NoStop (0) past the reference (1).

rliable's figure for comparing whole score distributions rather than one aggregate: a curve that
lies above another everywhere dominates it (stochastically), whatever statistic one would pick.
One curve per score record, over its simulated runs (the tasks every policy shares).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from .aggregate import shown

if TYPE_CHECKING:
    from matplotlib.figure import Figure

TAUS = np.linspace(-0.25, 1.25, 121)


def profile(scores: Sequence[float]) -> np.ndarray:
    """Share of `scores` above each tau of TAUS (NaN runs left out)."""
    x = np.asarray([s for s in scores if s is not None and np.isfinite(s)], float)
    return (x[None, :] > TAUS[:, None]).mean(1) if len(x) else np.full(len(TAUS), np.nan)


def simulated_scores(record: dict[str, Any], real_tasks: set[str]) -> list[float]:
    return [r["normalised"] for r in record["runs"] if r["task"] not in real_tasks]


def draw_profiles(records: Sequence[dict[str, Any]], real_tasks: set[str]) -> Figure:
    """One step curve per policy, the NoStop (0) and reference (1) anchors dotted."""
    import matplotlib.pyplot as plt

    from ..analysis.figure_style import DOUBLE, policy_styles, style

    names = [shown(r["policy"]) for r in records]
    styles = policy_styles(names)
    with style():
        fig, ax = plt.subplots(figsize=(DOUBLE, 3.2))
        for record in records:
            s = styles[shown(record["policy"])]
            ax.step(TAUS, profile(simulated_scores(record, real_tasks)), where="post",
                    color=s.get("color"), ls=s.get("linestyle", "-"), label=shown(record["policy"]))
        for anchor in (0.0, 1.0):
            ax.axvline(anchor, color="0.6", lw=0.8, ls=":")
        ax.set(xlabel="normalised score tau (NoStop = 0, reference = 1)",
               ylabel="share of runs above tau", ylim=(-0.02, 1.02))
        ax.legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
        ax.set_title("Performance profiles over the simulated tasks' runs")
    return fig
