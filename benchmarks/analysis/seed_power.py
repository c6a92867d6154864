"""E2's deltas over many seeds: BEYOND.md's section on them, and the claims it states.

Each cell against the base scheduler alone, with Welch's p (the paper's test, seeds as
independent samples) beside the paired p (every cell of a seed runs the same workload).
"""

from __future__ import annotations

import math

import pandas as pd

from .claims import ALPHA, Row, holds
from .section_inputs import SectionInputs
from .stats import improvement, paired_p, welch_p
from .tables import to_markdown

REFERENCE = "SRTF-Est"
HEADLINE = f"EvalStop-2+{REFERENCE}"
SEED_METRICS = (("jct", "JCT"), ("wasted_frac", "wasted"))


def seed_power(runs: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Per policy and metric: the change against `reference` over every seed, with Welch's p
    (the paper's test, seeds as independent samples) and the paired p (seeds as pairs)."""
    by_policy = {pol: g.set_index("seed") for pol, g in runs.groupby("policy", sort=False)}
    ref = by_policy[reference]
    rows = []
    for policy, cell in by_policy.items():
        if policy == reference:
            continue
        for metric, name in SEED_METRICS:
            a, b = cell[metric].astype(float), ref[metric].astype(float)
            rows.append({"policy": policy, "metric": name, "seeds": int(a.count()),
                         "delta_pct": improvement(metric, float(a.mean()), float(b.mean())),
                         "welch_p": welch_p(a.tolist(), b.tolist()),
                         "paired_p": paired_p(a.to_dict(), b.to_dict())})
    return pd.DataFrame(rows)


def _p(p: float) -> str:
    return "n/a" if math.isnan(p) else "< 0.001" if p < 0.001 else f"{p:.3f}"


def seed_power_section(runs: pd.DataFrame, reference: str = REFERENCE) -> str:
    """The table and what it says about EvalStop's headline JCT gain."""
    power = seed_power(runs, reference)
    wide = power.pivot(index="policy", columns="metric").sort_index(axis=1)
    table = pd.DataFrame({
        "cell": wide.index,
        **{f"Δ{name} %": [f"{v:+.1f}" for v in wide[("delta_pct", name)]]
           for _, name in SEED_METRICS},
        **{f"{name} p (Welch / paired)": [f"{_p(w)} / {_p(q)}" for w, q in
                                          zip(wide[("welch_p", name)], wide[("paired_p", name)],
                                              strict=True)]
           for _, name in SEED_METRICS}})
    head = power[(power["policy"] == f"EvalStop-2+{reference}") & (power["metric"] == "JCT")]
    lines = [f"Each cell against {reference} alone over {int(power['seeds'].max())} seeds; "
             "ΔJCT > 0 is faster, Δwasted < 0 is less waste. Welch's test treats the seeds as "
             "independent samples, as the paper does; every cell of a seed runs the same "
             "workload, so the paired test on per-seed differences is the sharper one.\n",
             to_markdown(table), ""]
    if len(head):
        h = head.iloc[0]
        lines.append(f"EvalStop-2's JCT gain over {int(h['seeds'])} seeds: {h['delta_pct']:+.1f}% "
                     f"(Welch p {_p(h['welch_p'])}, paired p {_p(h['paired_p'])}).")
    return "\n".join(lines)


def section(runs: pd.DataFrame | None, inputs: SectionInputs) -> str:
    if runs is None:
        return ""
    return "\n".join([f"## E2's deltas over many seeds ({inputs.name})\n",
                      seed_power_section(runs), ""])


def claims(runs: pd.DataFrame, name: str = "e2x") -> list[Row]:
    """EvalStop-2's JCT gain holds over many seeds; the paired test is the sharper one."""
    power = seed_power(runs)
    return [headline_claim(power, name), sharper_claim(power, name)]


def headline_claim(power: pd.DataFrame, name: str) -> Row:
    """E2's headline: EvalStop-2 shortens the mean JCT, significantly by the paired test."""
    head = power[(power["policy"] == HEADLINE) & (power["metric"] == "JCT")]
    if head.empty:
        return holds(name, f"{HEADLINE} shortens the mean JCT over many seeds", "faster, p < "
                     f"{ALPHA:g}", "n/a", False, f"no {HEADLINE} runs")
    h = head.iloc[0]
    ok = h["delta_pct"] > 0 and h["paired_p"] < ALPHA
    return holds(name, f"{HEADLINE} shortens the mean JCT over {int(h['seeds'])} seeds",
                 f"ΔJCT > 0, paired p < {ALPHA:g}",
                 f"{h['delta_pct']:+.1f}% (paired p {_p(h['paired_p'])})", bool(ok),
                 "paired t-test on per-seed differences against " + REFERENCE)


def sharper_claim(power: pd.DataFrame, name: str) -> Row:
    """The section's reason for the paired test: it finds every change Welch's test finds
    (p < ALPHA), and more; a NaN p (nothing varies) finds nothing."""
    welch, paired = power["welch_p"] < ALPHA, power["paired_p"] < ALPHA
    missed = int((welch & ~paired).sum())
    return holds(name, "The paired test on per-seed differences is the sharper one",
                 f"finds every change Welch's finds (p < {ALPHA:g}), and more",
                 f"paired {int(paired.sum())}, Welch {int(welch.sum())} of {len(power)}; "
                 f"Welch's alone: {missed}", missed == 0 and paired.sum() > welch.sum(),
                 "every cell, JCT and wasted compute")
