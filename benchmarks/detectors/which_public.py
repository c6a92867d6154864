"""The public runs' part of "Which detector?": each detector at each density on the design and
test halves (table and figure), and how much of the declines the curves show at all."""

from __future__ import annotations

from typing import TYPE_CHECKING

import pandas as pd

from evalstop_gym.traces.public_runs import load_public

from ..corpus.public_limit import visible_declines
from .which_study import DENSITIES, MAX_PUBLIC_FALSE_STOPS, ORACLE, pct

if TYPE_CHECKING:
    from matplotlib.figure import Figure


def public_lines(summary: pd.DataFrame, public: pd.DataFrame) -> list[str]:
    """The public corpus's table: each detector at each density, design half beside test half."""
    runs = public.drop_duplicates("run_id")
    count = {(split, label): int(((runs.split == split) & (runs.label == label)).sum())
             for split in ("design", "test") for label in ("declining", "healthy")}
    lines = ["### Real public runs", "",
             f"{len(runs)} public training runs (`evalstop_gym/traces/data/public/`: each "
             "run's repository, commit, path and licence in `provenance.json`; labels read in "
             "hindsight from the whole curve by `traces.public_runs.hindsight_label`), each "
             "replayed alone at its logged density and at evals every 5, 10 and 15%; split by "
             f"repository into a design half ({count['design', 'declining']} declining, "
             f"{count['design', 'healthy']} healthy) and a test half "
             f"({count['test', 'declining']} declining, {count['test', 'healthy']} healthy), "
             "ambiguous runs in neither count. Recall: declining runs stopped before their "
             "last eval; false stops: healthy runs stopped before their last eval; on the test "
             "half, the share of the evals after the best that stops spared (decline avoided), "
             "the share of the gain a healthy run's kept checkpoint lost to a stop (gain lost), "
             "and how far below its best a run was when stopped (the median over stops, as a "
             "share of what it had gained).", "",
             "![recall against false stops of the public runs](figures/beyond_public.png)", "",
             "| detector | density | design recall | design false stops | test recall "
             "| test false stops | test decline avoided | test gain lost | drop at stop |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in summary[summary.detector != ORACLE].itertuples():
        lines.append(f"| {r.detector} | {r.density} | {pct(r.design_recall)} | "
                     f"{pct(r.design_false_stops)} | {pct(r.test_recall)} | "
                     f"{pct(r.test_false_stops)} | {pct(r.test_decline_avoided)} | "
                     f"{pct(r.test_gain_lost)} | {pct(r.test_drop_share)} |")
    return [*lines, "", *visible_lines(public)]


def visible_lines(public: pd.DataFrame) -> list[str]:
    """How much of the declines the curves show before their last eval (`public_limit`): the
    scale the recall above is read on."""
    ids = set(public.run_id)
    seen = visible_declines([run for run in load_public() if run.run_id in ids])
    lines = ["What the curves show before their last eval (`corpus.public_limit`): the "
             "labelling rule itself, told each run's noise, applied to the evals before the "
             "last at each density. It sees fewer declines the sparser the evals: a decline "
             "plain in the whole curve can leave one low eval, or none, before the end. Not a "
             "bound on a detector (the rule knows the noise and judges one look), a scale for "
             "its recall.", "",
             "| density | design: declines visible | design: healthy read declining "
             "| test: declines visible | test: healthy read declining |",
             "|---|---|---|---|---|"]
    for density in DENSITIES:
        row = seen[seen.density == density].set_index("split")
        cells = [f"{pct(row.at[split, col])}" if split in row.index else "-"
                 for split in ("design", "test")
                 for col in ("visible", "healthy_read_declining")]
        lines.append(f"| {density} | {' | '.join(cells)} |")
    return [*lines, ""]


def draw_public(summary: pd.DataFrame) -> Figure:
    """Recall against false stops of the public runs, one panel per density: each detector's
    design half (hollow) and test half (filled)."""
    import matplotlib.pyplot as plt

    from ..analysis.figure_style import DOUBLE, MARKERS, family, policy_styles, style

    rows = summary[summary.detector != ORACLE]
    styles = policy_styles(rows.detector)
    variant: dict[str, int] = {}
    markers = {}
    for name in dict.fromkeys(rows.detector):   # a family's variants differ by marker
        v = variant[str(family(name))] = variant.get(str(family(name)), -1) + 1
        markers[name] = MARKERS[(MARKERS.index(styles[name]["marker"]) + v) % len(MARKERS)]
    with style():
        fig, axes = plt.subplots(1, len(DENSITIES), figsize=(DOUBLE, 2.6), sharey=True,
                                 sharex=True)
        for ax, density in zip(axes, DENSITIES, strict=True):
            for r in rows[rows.density == density].itertuples():
                colour = styles[r.detector]["color"]
                ax.plot(100 * r.design_false_stops, 100 * r.design_recall,
                        markers[r.detector], mfc="none", color=colour)
                ax.plot(100 * r.test_false_stops, 100 * r.test_recall, markers[r.detector],
                        color=colour, label=r.detector)
            ax.axvline(100 * MAX_PUBLIC_FALSE_STOPS, color="0.6", lw=0.8, ls=":")
            ax.set(title=f"evals every {density}" if density != "native" else "native")
        axes[0].set_ylabel("declines stopped (%)")
        fig.supxlabel("healthy runs stopped (%)", fontsize="medium")
        axes[-1].legend(fontsize="x-small", loc="upper left", bbox_to_anchor=(1.02, 1.0))
        fig.suptitle("Public runs: design half hollow, test half filled; dotted: the "
                     f"{MAX_PUBLIC_FALSE_STOPS:.0%} budget")
    return fig
