"""The paper's stated figures as checks against our runs: paper value, ours, and a verdict.

Every "ours" comes from the runs DataFrames; nothing measured is typed here. Verdicts:
`reproduced` (within the stated tolerance, or the stated bound holds), `same direction` (the
sign of the effect agrees but its size does not, or a stated change is not significant over our
seeds: p >= ALPHA by the paired t-test over the seeds the cell and its reference share, Welch's
only where they share fewer than two), `not reproduced` (with the measured number). A figure that
a constant was tuned to match is a `fit` when it holds (`as_fit`): agreement there tests nothing.
BEYOND.md's claims about its own runs have no paper figure behind them: they `hold` or `fail`.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Mapping
from typing import Any, NamedTuple

import pandas as pd

from .stats import WELCH, improvement, mean_ci, versus

Runs = Mapping[str, pd.DataFrame]
SRTF, EVAL2 = "SRTF-Est", "EvalStop-2+SRTF-Est"
REPRO, SAME, NOT, FIT = "reproduced", "same direction", "not reproduced", "fit"
VERDICTS = (REPRO, FIT, SAME, NOT)
HOLDS, FAILS = "holds", "fails"   # a claim BEYOND.md states about its own runs
STATED_VERDICTS = (HOLDS, FAILS)
ALPHA = 0.05   # a stated change is established when its p is below this (or nothing varies)


class Stat(NamedTuple):
    mean: float
    ci: float
    n: int
    values: list[float]
    seeds: tuple[Any, ...] = ()   # seed of each value (pairs cells that share seeds); () unknown


class Row(NamedTuple):
    experiment: str
    claim: str
    paper: str
    ours: str
    verdict: str
    why: str


def select(runs: pd.DataFrame, policy: str | None = None, value: float | None = None,
           label: str | None = None) -> pd.DataFrame:
    keep = pd.Series(True, index=runs.index)
    if policy is not None:
        keep &= runs["policy"] == policy
    if label is not None:
        keep &= runs["label"] == label
    if value is not None:
        keep &= (runs["value"].astype(float) - value).abs() < 1e-9
    return runs[keep]


def stat(runs: pd.DataFrame, metric: str, **sel: object) -> Stat:
    rows = select(runs, **sel)  # type: ignore[arg-type]
    vals = rows[metric].astype(float).tolist()
    seeds = tuple(rows["seed"]) if "seed" in rows else ()
    return Stat(*mean_ci(vals), vals, seeds)


def p_against(cell: Stat, ref: Stat) -> tuple[str, float]:
    """("paired p" or "Welch p", its value): cell against ref, paired over shared seeds."""
    v = versus(cell.values, ref.values, cell.seeds or None, ref.seeds or None)
    return ("Welch p" if v.test == WELCH else "paired p"), v.p


def fmt(s: Stat, pct: bool = False) -> str:
    scale, unit, dec = (100.0, "%", 1) if pct else (1.0, "", 0 if abs(s.mean) >= 100 else 2)
    if s.n == 0 or math.isnan(s.mean):
        return "n/a"
    ci = "" if math.isnan(s.ci) else f" ± {s.ci * scale:.{dec}f}"
    return f"{s.mean * scale:.{dec}f}{ci}{unit}"


def level(exp: str, claim: str, paper: float, s: Stat, tol: float, pct: bool = False,
          note: str = "") -> Row:
    """A stated number: reproduced when our mean is within `tol` of it (same units)."""
    scale = 100.0 if pct else 1.0
    paper_s = f"{paper * scale:g}{'%' if pct else ''}"
    if s.n == 0 or math.isnan(s.mean):
        return Row(exp, claim, paper_s, "n/a", NOT, "no runs")
    off = s.mean - paper
    ok = abs(off) <= tol
    why = (f"within ±{tol * scale:g}" if ok else f"off by {off * scale:+.1f}") + (
        f"; {note}" if note else "")
    return Row(exp, claim, paper_s, fmt(s, pct), REPRO if ok else NOT, why)


def bound(exp: str, claim: str, paper: str, s: Stat, test: Callable[[float], bool],
          pct: bool = False, note: str = "") -> Row:
    """A stated bound (e.g. precision >= 95%): reproduced when our mean satisfies it."""
    if s.n == 0 or math.isnan(s.mean):
        return Row(exp, claim, paper, "n/a", NOT, "no runs")
    ok = test(s.mean)
    return Row(exp, claim, paper, fmt(s, pct), REPRO if ok else NOT,
               ("holds" if ok else "bound fails") + (f"; {note}" if note else ""))


def delta(exp: str, claim: str, metric: str, cell: Stat, ref: Stat, paper: float | None,
          tol: float, better: int) -> Row:
    """A stated change vs a reference, in the paper's sign convention (`better` = +1 or -1)."""
    d = improvement(metric, cell.mean, ref.mean)
    test, p = p_against(cell, ref)
    ours = "n/a" if math.isnan(d) else f"{d:+.1f}% ({test} = {p:.3g})"
    paper_s = "improves" if paper is None else f"{paper:+.1f}%"
    if math.isnan(d):
        return Row(exp, claim, paper_s, ours, NOT, "undefined")
    if d * better <= 0:
        return Row(exp, claim, paper_s, ours, NOT, "opposite sign or no change")
    within = paper is None or abs(d - paper) <= tol
    size = ("" if paper is None else f", within ±{tol:g} points" if within
            else f", size off by {d - paper:+.1f} points")
    if p >= ALPHA:   # False for NaN: no spread on either side, the change is exact
        return Row(exp, claim, paper_s, ours, SAME, f"right sign, not significant{size}")
    return Row(exp, claim, paper_s, ours, REPRO if within else SAME, f"right sign{size}")


def ratio(exp: str, claim: str, paper: float, cell: Stat, ref: Stat, tol: float) -> Row:
    """A stated ratio of means (cell / ref): reproduced within `tol` of it, `same direction` when
    it lies on the same side of 1 as the paper's, else not reproduced."""
    r = cell.mean / ref.mean if ref.n and cell.n and ref.mean else math.nan
    paper_s = f"{paper:g}x"
    if math.isnan(r) or (r - 1) * (paper - 1) <= 0:
        return Row(exp, claim, paper_s, "n/a" if math.isnan(r) else f"{r:.2f}x", NOT,
                   "undefined" if math.isnan(r) else "opposite side of 1")
    if abs(r - paper) <= tol:
        return Row(exp, claim, paper_s, f"{r:.2f}x", REPRO, f"within ±{tol:g}x")
    return Row(exp, claim, paper_s, f"{r:.2f}x", SAME, f"right direction, off by {r - paper:+.2f}x")


def as_fit(row: Row, tuned: str) -> Row:
    """`row` for a figure that `tuned` (the constant named) was calibrated to: a held figure
    becomes a `fit`, since agreeing with one's own target is no test; a missed one stays missed."""
    why = f"{row.why}; a fit: {tuned} tuned to it"
    return row._replace(verdict=FIT if row.verdict == REPRO else row.verdict, why=why)


def check(exp: str, claim: str, paper: str, ours: str, ok: bool, why: str) -> Row:
    """A stated direction or ordering: reproduced or not."""
    return Row(exp, claim, paper, ours, REPRO if ok else NOT, why)


def holds(exp: str, claim: str, stated: str, ours: str, ok: bool, why: str) -> Row:
    """A claim BEYOND.md states about its runs (no paper figure behind it): it holds or not."""
    return Row(exp, claim, stated, ours, HOLDS if ok else FAILS, why)


def trend(runs: pd.DataFrame, metric: str, policy: str) -> list[tuple[float, Stat]]:
    """(sweep value, stat) pairs of one policy, in value order."""
    sub = runs[runs["policy"] == policy]
    values = sorted(sub["value"].astype(float).unique())
    return [(v, stat(sub, metric, value=v)) for v in values]


def show_trend(points: list[tuple[float, Stat]], pct: bool = True) -> str:
    return ", ".join(f"{v:g}: {fmt(s, pct)}" for v, s in points)
