"""Statistics over a runs DataFrame (one row per cell and seed): pure functions, no I/O.

Conventions: a 95% confidence interval from the t-distribution over seeds; each cell against its
reference cell by the paired t-test on per-seed differences where the two share seeds (every cell
of a seed runs the same workloads: common random numbers), Welch's t-test (unequal variances, the
paper's test) only where they do not; improvements as
signed percentages where positive is better for times ((ref - cell) / ref for JCT, TTFUC and
makespan) and the plain relative change (cell - ref) / ref for everything else, so a negative
wasted-compute change is a saving.
"""

from __future__ import annotations

import math
import warnings
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

import numpy as np
import pandas as pd
from scipy import stats as st

from evalstop_gym.metrics import METRIC_COLUMNS

LOWER_IS_BETTER_TIMES = ("jct", "ttfuc", "makespan")
CELL_FIELDS = ("cell", "label", "policy", "base", "detector", "param", "value")
PAIRED, WELCH = "paired t", "Welch"
MIN_PAIRS = 2   # fewer shared seeds than this: the cells are compared unpaired (Welch)
ROUNDING = 1e-9  # differences within this fraction of the values are rounding (80*1.1 - 100*1.1)


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


def pairs(a: Mapping[Any, float], b: Mapping[Any, float]) -> list[tuple[float, float]]:
    """(a, b) values of the seeds both have, in seed order, NaNs dropped."""
    shared = sorted(set(a) & set(b), key=str)
    return [(a[s], b[s]) for s in shared if not (math.isnan(a[s]) or math.isnan(b[s]))]


def paired_p(a: Mapping[Any, float], b: Mapping[Any, float]) -> float:
    """Two-sided paired t-test p-value over the seeds both have (every cell of a seed runs the
    same workload, so its per-seed differences cancel the workload's own variation); NaN when
    undefined (fewer than 2 shared seeds, or differences that do not vary)."""
    both = pairs(a, b)
    diffs = np.asarray([x - y for x, y in both], dtype=float)
    if len(diffs) < MIN_PAIRS or np.ptp(diffs) <= _rounding(both):
        return math.nan
    return float(st.ttest_rel([x for x, _ in both], [y for _, y in both]).pvalue)


def wilcoxon_p(a: Mapping[Any, float], b: Mapping[Any, float]) -> float:
    """Two-sided Wilcoxon signed-rank p-value of the per-seed differences a - b, as
    `scipy.stats.wilcoxon` computes it by default: zero differences dropped, `method="auto"`,
    which in SciPy 1.17 is the exact null distribution up to 50 pairs, exhaustive permutations
    up to 13 pairs when differences tie or are zero, the normal approximation beyond (older
    SciPy approximates whenever differences tie). It assumes no normality, so it checks the
    paired t-test; with 5 seeds its smallest possible p is 2/32 = 0.0625. NaN when undefined:
    fewer than 2 shared seeds, or every difference zero."""
    both = pairs(a, b)
    diffs = np.asarray([x - y for x, y in both], dtype=float)
    if len(diffs) < MIN_PAIRS or np.abs(diffs).max() <= _rounding(both):
        return math.nan
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        return float(st.wilcoxon(diffs).pvalue)


def _rounding(both: list[tuple[float, float]]) -> float:
    """The size below which a difference of these values is floating-point rounding."""
    return ROUNDING * max((max(abs(x), abs(y)) for x, y in both), default=0.0)


class Versus(NamedTuple):
    """A cell against its reference on one metric. `diff_mean` is cell - reference in the
    metric's units with the half-width `diff_ci95` of its 95% t interval: over the per-seed
    differences when paired, Welch's (Welch-Satterthwaite degrees of freedom) when not."""

    test: str
    p: float
    p_wilcoxon: float
    diff_mean: float
    diff_ci95: float
    n_pairs: int


def by_seed(values: Sequence[float], seeds: Sequence[Any] | None) -> dict[Any, float] | None:
    """seed -> value, or None when there are no seeds or one repeats (no pairing is defined)."""
    if seeds is None or len(set(seeds)) != len(seeds) or len(seeds) != len(values):
        return None
    return dict(zip(seeds, values, strict=True))


def versus(a: Sequence[float], b: Sequence[float], a_seeds: Sequence[Any] | None = None,
           b_seeds: Sequence[Any] | None = None) -> Versus:
    """Cell values `a` against reference values `b`: paired over their shared seeds when they
    share at least MIN_PAIRS (each seed once per side), else Welch's test on all values. Which
    test depends on the seeds alone, so every metric of two cells gets the same one; a seed
    whose value is NaN on either side drops out of the pairs (`n_pairs` counts those left)."""
    sa, sb = by_seed(a, a_seeds), by_seed(b, b_seeds)
    if sa is not None and sb is not None and len(set(sa) & set(sb)) >= MIN_PAIRS:
        both = pairs(sa, sb)
        mean, half, _ = mean_ci([x - y for x, y in both])
        return Versus(PAIRED, paired_p(sa, sb), wilcoxon_p(sa, sb), mean, half, len(both))
    return Versus(WELCH, welch_p(a, b), math.nan, *welch_diff(a, b), 0)


def welch_diff(a: Sequence[float], b: Sequence[float]) -> tuple[float, float]:
    """(mean(a) - mean(b), half-width of its 95% Welch interval); the half-width is NaN for
    fewer than 2 values a side, and 0 when neither side varies."""
    x = np.asarray([v for v in a if not math.isnan(v)], dtype=float)
    y = np.asarray([v for v in b if not math.isnan(v)], dtype=float)
    if len(x) == 0 or len(y) == 0:
        return math.nan, math.nan
    diff = float(x.mean() - y.mean())
    if len(x) < 2 or len(y) < 2:
        return diff, math.nan
    va, vb = x.var(ddof=1) / len(x), y.var(ddof=1) / len(y)
    if va + vb == 0:
        return diff, 0.0
    df = (va + vb) ** 2 / (va ** 2 / (len(x) - 1) + vb ** 2 / (len(y) - 1))
    return diff, float(st.t.ppf(0.975, df) * math.sqrt(va + vb))


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
    """Map each cell to its reference cell: at the same sweep value when `match_value`, and on
    the cell's own base when the reference names neither `base` nor `label` and that base has
    such a cell (E4's `{detector: none}`: each combination against its base alone); else the
    first cell that matches."""
    out: dict[str, str] = {}
    per_base = "base" in cell_table and is_per_base(reference)
    for _, row in cell_table.iterrows():
        want = dict(reference)
        if match_value and "value" not in want:
            want["value"] = row["value"]
        hits = _hits(cell_table, {**want, "base": row["base"]}) if per_base else []
        hits = hits or _hits(cell_table, want)
        if hits:
            out[row["cell"]] = hits[0]
    return out


def is_per_base(reference: Mapping[str, Any]) -> bool:
    """Whether `reference` is matched on each cell's own base (it names no base and no label)."""
    return not {"base", "label"} & set(reference)


def _hits(cell_table: pd.DataFrame, want: Mapping[str, Any]) -> list[str]:
    return [r["cell"] for _, r in cell_table.iterrows()
            if all(_matches(r, k, v) for k, v in want.items())]


COMPARE_COLUMNS = ["experiment", "cell", "against", "reference", "metric", "mean", "ref_mean",
                   "delta_pct", "p_value", "test", "p_wilcoxon", "diff_mean", "diff_ci95",
                   "n_pairs"]


def compare(runs: pd.DataFrame, reference: Mapping[str, Any], match_value: bool = False,
            name: str = "reference") -> pd.DataFrame:
    """Per cell and metric: means, the signed improvement and the test against the reference
    (`versus`: paired over the `seed` column where the two share seeds, Welch where not);
    `p_value` is that test's p, NaN for the reference against itself."""
    refs = reference_of(cells(runs), reference, match_value) if reference else {}
    groups = {c: g for c, g in runs.groupby("cell", sort=False)}
    rows = []
    for cell, ref in refs.items():
        a, b = groups[cell], groups[ref]
        seeds = [g["seed"].tolist() if "seed" in g else None for g in (a, b)]
        for m in metrics_in(runs):
            ca, cb = a[m].astype(float).tolist(), b[m].astype(float).tolist()
            mean_a, mean_b = mean_ci(ca)[0], mean_ci(cb)[0]
            v = versus(ca, cb, *seeds)
            rows.append({"experiment": a["experiment"].iloc[0], "cell": cell, "against": name,
                         "reference": ref, "metric": m, "mean": mean_a, "ref_mean": mean_b,
                         "delta_pct": improvement(m, mean_a, mean_b),
                         "p_value": math.nan if cell == ref else v.p, "test": v.test,
                         "p_wilcoxon": math.nan if cell == ref else v.p_wilcoxon,
                         "diff_mean": v.diff_mean, "diff_ci95": v.diff_ci95,
                         "n_pairs": v.n_pairs})
    return pd.DataFrame(rows, columns=COMPARE_COLUMNS)


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
                            values=COMPARE_COLUMNS[7:], aggfunc="first", dropna=False)
    wide.columns = [f"{v}_vs_{a}" for v, a in wide.columns]
    return summ.merge(wide.reset_index(), on=["cell", "metric"], how="left")
