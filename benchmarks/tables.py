"""The per-experiment table: mean ± 95% CI per cell, and the change and p-value vs the reference
(the paired t-test over the seeds a cell shares with its reference; Welch's where it has none)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .stats import PAIRED, WELCH, cells, compare, mean_ci

# (column title, metric, scale, decimals): fractions are shown as percentages
COLUMNS = (
    ("JCT (min)", "jct", 1.0, 0),
    ("TTFUC (min)", "ttfuc", 1.0, 0),
    ("wasted %", "wasted_frac", 100.0, 1),
    ("saved %", "saved_frac", 100.0, 1),
    ("precision %", "precision", 100.0, 1),
    ("recall %", "recall", 100.0, 1),
    ("FPR %", "fpr", 100.0, 1),
    ("FPR-all %", "fpr_all", 100.0, 1),
    ("Jain", "jain", 1.0, 3),
    ("stopped", "n_stopped", 1.0, 1),
)
DELTAS = (("ΔJCT %", "jct"), ("Δwasted %", "wasted_frac"))


def fmt_ci(values: list[float], scale: float = 1.0, decimals: int = 1) -> str:
    """'12.3 ± 0.4' (or '12.3' for one seed, '–' when undefined)."""
    mean, half, n = mean_ci([v * scale for v in values])
    if n == 0:
        return "–"
    if math.isnan(half):
        return f"{mean:.{decimals}f}"
    return f"{mean:.{decimals}f} ± {half:.{decimals}f}"


def fmt_p(p: float) -> str:
    if math.isnan(p):
        return "–"
    return "< 0.001" if p < 0.001 else f"{p:.3f}"


def table_frame(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool,
                comp: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell, text cells, ready to print or write as markdown; `comp` is
    `compare(runs, reference, match_value)` when the caller has it already."""
    comp = compare(runs, reference, match_value) if comp is None else comp
    rows = []
    for cell, grp in runs.groupby("cell", sort=False):
        row = {"cell": cell}
        for title, metric, scale, dec in COLUMNS:
            row[title] = fmt_ci(grp[metric].astype(float).tolist(), scale, dec)
        for title, metric in DELTAS:
            hit = comp[(comp["cell"] == cell) & (comp["metric"] == metric)]
            if hit.empty:
                row[title], row[f"p({metric})"] = "–", "–"
                continue
            delta = hit["delta_pct"].iloc[0]
            row[title] = "–" if math.isnan(delta) else f"{delta:+.1f}"
            row[f"p({metric})"] = fmt_p(hit["p_value"].iloc[0])
        row["vs"] = comp.loc[comp["cell"] == cell, "reference"].iloc[0] if (
            comp["cell"] == cell).any() else "–"
        rows.append(row)
    return pd.DataFrame(rows)


def to_markdown(frame: pd.DataFrame) -> str:
    """A GitHub-flavoured markdown table (no extra dependency)."""
    head = "| " + " | ".join(map(str, frame.columns)) + " |"
    rule = "|" + "|".join("---" for _ in frame.columns) + "|"
    body = ["| " + " | ".join(str(v) for v in row) + " |" for row in frame.itertuples(False)]
    return "\n".join([head, rule, *body])


def which_test(comp: pd.DataFrame) -> str:
    """Which test the p columns hold, for the table's note: the paired t-test where every cell
    shares seeds with its reference, Welch's where none does, and which is which otherwise."""
    used = set(comp.loc[comp["cell"] != comp["reference"], "test"])
    if used == {WELCH}:
        return "Welch's t-test: no cell shares two seeds with its reference"
    paired = "paired t-test over the seeds each cell shares with its reference"
    if used == {PAIRED} or not used:
        return paired
    unpaired = sorted(set(comp.loc[comp["test"] == WELCH, "cell"]))
    return f"{paired}; Welch's t-test for {', '.join(unpaired)} (fewer than two shared)"


def experiment_markdown(title: str, runs: pd.DataFrame, reference: Mapping[str, Any],
                        match_value: bool) -> str:
    """table.md of one experiment: a heading, what the columns mean, the table."""
    n_seeds = runs["seed"].nunique()
    comp = compare(runs, reference, match_value)
    ref = ", ".join(f"{k}={v}" for k, v in reference.items()) or "none"
    where = " at the same sweep value" if match_value and "value" not in reference else ""
    note = (f"Mean ± 95% CI (t-distribution) over {n_seeds} seed(s); {len(cells(runs))} cells. "
            f"Δ and p ({which_test(comp)}) against the reference cell ({ref}){where}: ΔJCT > 0 "
            f"is faster, Δwasted < 0 is less waste. FPR is over healthy RLHF jobs; FPR-all over "
            f"all non-hacking jobs.")
    table = to_markdown(table_frame(runs, reference, match_value, comp))
    return f"## {title}\n\n{note}\n\n{table}\n"


# The terminal table: the headline columns only, so it fits TERMINAL_WIDTH characters
TERMINAL_COLUMNS = ("JCT (min)", "wasted %", "precision %", "recall %", "FPR %", "ΔJCT %",
                    "p(jct)")
TERMINAL_TITLES = ("JCT", "wasted%", "prec%", "recall%", "FPR%", "ΔJCT%", "p")
TERMINAL_WIDTH = 100


def terminal_table(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool,
                   width: int = TERMINAL_WIDTH) -> str:
    """The headline columns of `table_frame`, aligned in at most `width` characters (long cell
    names are shortened with '…'); table.md and summary.csv keep every column."""
    frame = table_frame(runs, reference, match_value)
    body = [[str(v).replace(" ± ", "±") for v in frame[c]] for c in TERMINAL_COLUMNS]
    widths = [max(len(t), *(len(v) for v in col)) for t, col in zip(TERMINAL_TITLES, body,
                                                                      strict=True)]
    room = max(8, width - sum(w + 2 for w in widths))
    names = [_shorten(str(c), room) for c in frame["cell"]]
    name_w = max(len("cell"), *(len(n) for n in names))
    lines = ["cell".ljust(name_w) + "".join(f"  {t:>{w}}" for t, w in
                                          zip(TERMINAL_TITLES, widths, strict=True))]
    for i, name in enumerate(names):
        lines.append(name.ljust(name_w) + "".join(f"  {col[i]:>{w}}" for col, w in
                                                  zip(body, widths, strict=True)))
    return "\n".join(lines)


def _shorten(text: str, room: int) -> str:
    return text if len(text) <= room else text[:room - 1] + "…"
