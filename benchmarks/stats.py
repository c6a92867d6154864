"""Statistics over a runs DataFrame (one row per cell and seed): pure functions, no I/O.

Conventions follow the paper: a 95% confidence interval from the t-distribution over seeds;
Welch's t-test (unequal variances) of each cell against its reference cell; improvements as
signed percentages where positive is better for times ((ref - cell) / ref for JCT, TTFUC and
makespan) and the plain relative change (cell - ref) / ref for everything else, so a negative
wasted-compute change is a saving.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np
import pandas as pd
from scipy import stats as st

from evalstop_gym.metrics import METRIC_COLUMNS

LOWER_IS_BETTER_TIMES = ("jct", "ttfuc", "makespan")
CELL_FIELDS = ("cell", "label", "policy", "base", "detector", "param", "value")


def mean_ci(values: Sequence[float], level: float = 0.95) -> tuple[float, float, int]:
    """(mean, CI half-width, n) ignoring NaNs; the half-width is NaN for fewer than 2 values."""
    x = np.asarray([v for v in values if not math.isnan(v)], dtype=float)
    if len(x) == 0:
        return math.nan, math.nan, 0
    if len(x) < 2:
        return float(x.mean()), math.nan, 1
    half = st.t.ppf(0.5 + level / 2, len(x) - 1) * x.std(ddof=1) / math.sqrt(len(x))
    return float(x.mean()), float(half), len(x)


def welch_p(a: Sequence[float], b: Sequence[float]) -> float:
    """Two-sided Welch's t-test p-value; NaN when it is undefined (no spread, < 2 values)."""
    x = np.asarray([v for v in a if not math.isnan(v)], dtype=float)
    y = np.asarray([v for v in b if not math.isnan(v)], dtype=float)
    if len(x) < 2 or len(y) < 2 or (np.ptp(x) == 0 and np.ptp(y) == 0):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(st.ttest_ind(x, y, equal_var=False).pvalue)


def paired_p(a: Mapping[int, float], b: Mapping[int, float]) -> float:
    """Two-sided paired t-test p-value over the seeds both have (every cell of a seed runs the
    same workload, so its per-seed differences cancel the workload's own variation); NaN when
    undefined (fewer than 2 shared seeds, or differences that do not vary)."""
    seeds = sorted(set(a) & set(b))
    pairs = [(a[s], b[s]) for s in seeds if not (math.isnan(a[s]) or math.isnan(b[s]))]
    diffs = np.asarray([x - y for x, y in pairs], dtype=float)
    if len(diffs) < 2 or np.ptp(diffs) == 0:
        return math.nan
    return float(st.ttest_rel([x for x, _ in pairs], [y for _, y in pairs]).pvalue)


def improvement(metric: str, cell: float, ref: float) -> float:
    """Signed percentage in the paper's convention (see the module docstring)."""
    if math.isnan(cell) or math.isnan(ref) or ref == 0:
        return math.nan
    if metric in LOWER_IS_BETTER_TIMES:
        return 100.0 * (ref - cell) / ref
    return 100.0 * (cell - ref) / ref


def metrics_in(runs: pd.DataFrame) -> list[str]:
    return [m for m in METRIC_COLUMNS if m in runs.columns]


def cells(runs: pd.DataFrame) -> pd.DataFrame:
    """One row per cell, in first-appearance order, with the fields references match on."""
    return runs.drop_duplicates("cell")[[c for c in CELL_FIELDS if c in runs.columns]]


def summarize(runs: pd.DataFrame) -> pd.DataFrame:
    """Long table: one row per (cell, metric) with mean, CI half-width, bounds and n."""
    rows = []
    for cell, grp in runs.groupby("cell", sort=False):
        for m in metrics_in(runs):
            mean, half, n = mean_ci(grp[m].astype(float).tolist())
            rows.append({"experiment": grp["experiment"].iloc[0], "cell": cell, "metric": m,
                         "n": n, "mean": mean, "ci95": half,
                         "ci_low": mean - half, "ci_high": mean + half})
    return pd.DataFrame(rows)


def _matches(row: pd.Series, field: str, want: Any) -> bool:
    have = row[field]
    if isinstance(want, (int, float)) and not isinstance(want, bool):
        try:
            return bool(np.isclose(float(have), float(want)))
        except (TypeError, ValueError):
            return False
    return str(have) == str(want)


def reference_of(cell_table: pd.DataFrame, reference: Mapping[str, Any],
                 match_value: bool) -> dict[str, str]:
    """Map each cell to its reference cell (the same sweep value when `match_value`)."""
    out: dict[str, str] = {}
    for _, row in cell_table.iterrows():
        want = dict(reference)
        if match_value and "value" not in want:
            want["value"] = row["value"]
        hits = [r["cell"] for _, r in cell_table.iterrows()
                if all(_matches(r, k, v) for k, v in want.items())]
        if hits:
            out[row["cell"]] = hits[0]
    return out


def compare(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool = False,
            name: str = "reference") -> pd.DataFrame:
    """Per cell and metric: means, the signed improvement and Welch's p against the reference."""
    refs = reference_of(cells(runs), reference, match_value) if reference else {}
    groups = {c: g for c, g in runs.groupby("cell", sort=False)}
    rows = []
    for cell, ref in refs.items():
        a, b = groups[cell], groups[ref]
        for m in metrics_in(runs):
            ca, cb = a[m].astype(float).tolist(), b[m].astype(float).tolist()
            mean_a, mean_b = mean_ci(ca)[0], mean_ci(cb)[0]
            rows.append({"experiment": a["experiment"].iloc[0], "cell": cell, "against": name,
                         "reference": ref, "metric": m, "mean": mean_a, "ref_mean": mean_b,
                         "delta_pct": improvement(m, mean_a, mean_b),
                         "p_value": math.nan if cell == ref else welch_p(ca, cb)})
    return pd.DataFrame(rows, columns=["experiment", "cell", "against", "reference", "metric",
                                       "mean", "ref_mean", "delta_pct", "p_value"])


def summary_table(runs: pd.DataFrame, references: Mapping[str, Mapping[str, Any]],
                  match_value: bool) -> pd.DataFrame:
    """summary.csv: mean/CI per cell and metric, joined with every named comparison."""
    summ = summarize(runs)
    parts = [compare(runs, ref, match_value and "value" not in ref, name)
             for name, ref in references.items() if ref]
    if not parts:
        return summ
    comp = pd.concat(parts, ignore_index=True)
    wide = comp.pivot_table(index=["cell", "metric"], columns="against",
                            values=["delta_pct", "p_value"], aggfunc="first", dropna=False)
    wide.columns = [f"{v}_vs_{a}" for v, a in wide.columns]
    return summ.merge(wide.reset_index(), on=["cell", "metric"], how="left")
