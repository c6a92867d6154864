"""The per-experiment table: mean ± 95% CI per cell, and the change and p-value vs the reference
(the paired t-test over the seeds a cell shares with its reference; Welch's where it has none)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from typing import Any

import pandas as pd

from .stats import PAIRED, WELCH, cells, compare, is_per_base, mean_ci

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


def pct(x: float | None) -> str:
    """A share as a percentage with one decimal; "n/a" when there is none."""
    return "n/a" if x is None or (isinstance(x, float) and math.isnan(x)) else f"{100 * x:.1f}%"


def fmt_value(value: Any) -> str:
    """A swept value in full ('0.05', '2', 'uniform'), '–' when the cell has none."""
    if value is None or (isinstance(value, float) and math.isnan(value)) or value == "":
        return "–"
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        number = float(value)
        return str(int(number)) if number.is_integer() else repr(number)
    return str(value)


def row_names(info: pd.DataFrame) -> dict[str, str]:
    """cell -> its row label: the cell's label, else its policy; the swept value goes in a column
    of its own (`param_columns`), so no label has to carry it. Cell ids where labels collide."""
    def name(cell: str, row: pd.Series) -> str:
        label = row.get("label", "")
        label = "" if not isinstance(label, str) else label
        return label or str(row.get("policy", "") or cell)
    names = {cell: name(cell, row) for cell, row in info.iterrows()}
    params = param_columns(info)
    keys = [(n, *(col[c] for col in params.values())) for c, n in names.items()]
    return names if len(set(keys)) == len(keys) else {c: c for c in names}


def param_columns(info: pd.DataFrame) -> dict[str, dict[str, str]]:
    """The varied parameter(s) as columns: param name -> {cell: its value, in full}."""
    if "param" not in info:
        return {}
    out: dict[str, dict[str, str]] = {}
    for cell, row in info.iterrows():
        if isinstance(row["param"], str) and row["param"]:
            out.setdefault(row["param"], {})[cell] = fmt_value(row.get("value"))
    return {p: {c: col.get(c, "–") for c in info.index} for p, col in out.items()}


def table_frame(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool,
                comp: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per cell, text cells, ready to print or write as markdown; `comp` is
    `compare(runs, reference, match_value)` when the caller has it already. Rows are named by
    label or policy, with each varied parameter as a column (nothing long to cut)."""
    comp = compare(runs, reference, match_value) if comp is None else comp
    info = cells(runs).set_index("cell")
    names, params = row_names(info), param_columns(info)
    rows = []
    for cell, grp in runs.groupby("cell", sort=False):
        row = {"cell": names[cell], **{p: col[cell] for p, col in params.items()}}
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
        refs = comp.loc[comp["cell"] == cell, "reference"]
        row["vs"] = "–" if refs.empty else _vs(cell, refs.iloc[0], names, params)
        rows.append(row)
    return pd.DataFrame(rows)


def _vs(cell: str, ref: str, names: Mapping[str, str],
        params: Mapping[str, Mapping[str, str]]) -> str:
    """The reference's row label, with its parameter value where it differs from the cell's."""
    moved = [f"{p}={col[ref]}" for p, col in params.items() if col[ref] != col[cell]]
    return names[ref] + (f" ({', '.join(moved)})" if moved else "")


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
    where += " over the same base" if "base" in runs and is_per_base(reference) else ""
    note = (f"Mean ± 95% CI (t-distribution) over {n_seeds} seed(s); {len(cells(runs))} cells. "
            f"Δ and p ({which_test(comp)}) against the reference cell ({ref}){where}: ΔJCT > 0 "
            f"is faster, Δwasted < 0 is less waste. FPR is over healthy RLHF jobs; FPR-all over "
            f"all non-hacking jobs.")
    table = to_markdown(table_frame(runs, reference, match_value, comp))
    return f"## {title}\n\n{note}\n\n{table}\n"


# The terminal table: the headline columns only, so it fits TERMINAL_WIDTH characters. Both
# FPRs: `fpr` (over healthy RLHF jobs: any stop-every-RLHF rule scores 100%) and the paper's
# (over all non-hacking jobs, the one its figures match), each named in the legend below.
TERMINAL_COLUMNS = ("JCT (min)", "wasted %", "precision %", "recall %", "FPR %", "FPR-all %",
                    "ΔJCT %", "p(jct)")
TERMINAL_TITLES = ("JCT", "wasted%", "prec%", "recall%", "FPR%", "FPR-all%", "ΔJCT%", "p")
TERMINAL_LEGEND = ("FPR: FP / healthy RLHF jobs (`fpr`); FPR-all: FP / all non-hacking jobs "
                   "(the paper's)")
TERMINAL_WIDTH = 100


def terminal_table(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool,
                   width: int = TERMINAL_WIDTH) -> str:
    """The headline columns of `table_frame`, aligned in at most `width` characters: the varied
    parameter keeps a column of its own; row labels too long for the room get a one-space gap
    between columns, then lose the base they all share (named in the header), then are
    shortened with '…'; a legend line after a blank
    one says which FPR is which. table.md and summary.csv keep every column."""
    frame = table_frame(runs, reference, match_value)
    params = list(frame.columns[1:frame.columns.get_loc("JCT (min)")])
    titles = [*(p.rsplit(".", 1)[-1] for p in params), *TERMINAL_TITLES]
    body = [[str(v).replace(" ± ", "±") for v in frame[c]] for c in (*params, *TERMINAL_COLUMNS)]
    widths = [max(len(t), *(len(v) for v in col)) for t, col in zip(titles, body, strict=True)]
    names, head = [str(c) for c in frame["cell"]], "cell"
    gap = 2 if max(map(len, names)) <= width - sum(w + 2 for w in widths) else 1
    room = max(8, width - sum(w + gap for w in widths))   # a narrower gap before any cut
    bases = set(runs["base"]) if "base" in runs else set()
    if len(bases) == 1 and max(map(len, names)) > room:   # E7: every cell over SRTF-Est
        base = str(bases.pop())
        head, names = _shorten(f"over {base}", room), [n.removesuffix(f"+{base}") for n in names]
    names = [_shorten(n, room) for n in names]
    name_w = max(len(head), *(len(n) for n in names))
    sep = " " * gap
    lines = [head.ljust(name_w) + "".join(f"{sep}{t:>{w}}" for t, w in
                                        zip(titles, widths, strict=True))]
    for i, name in enumerate(names):
        lines.append(name.ljust(name_w) + "".join(f"{sep}{col[i]:>{w}}" for col, w in
                                                  zip(body, widths, strict=True)))
    return "\n".join([*lines, "", TERMINAL_LEGEND])


def _shorten(text: str, room: int) -> str:
    return text if len(text) <= room else text[:room - 1] + "…"
