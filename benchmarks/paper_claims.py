"""SPEC.md section 6 (and the issue checks on E2 and the matrix), one function per experiment.

Each function takes that experiment's runs DataFrame and returns report rows; tolerances are the
"rough size" the reproduction aims for: 10% of a time, 5 points of a percentage.
"""

from __future__ import annotations

from collections.abc import Callable

import pandas as pd

from .claims import (
    EVAL2,
    SRTF,
    Row,
    bound,
    check,
    delta,
    fmt,
    level,
    ratio,
    show_trend,
    stat,
    trend,
)
from .stats import improvement, welch_p

FPR_NOTE = "FPR over healthy RLHF jobs (SPEC); the paper's number matches FP / all non-hacking"


def e1(r: pd.DataFrame) -> list[Row]:
    jct = {p: stat(r, "jct", policy=p) for p in r["policy"].unique()}
    best = min(jct, key=lambda p: jct[p].mean)
    tt_e, tt_s = stat(r, "ttfuc", policy=EVAL2), stat(r, "ttfuc", policy="StopAt-0.65+SRTF-Est")
    gap = 100 * (tt_e.mean - tt_s.mean) / tt_s.mean
    return [
        check("E1", "EvalStop+SRTF has the best mean JCT", "best", f"best: {best} "
              f"({fmt(jct[best])}); EvalStop {fmt(jct[EVAL2])}", best == EVAL2,
              "ordering of cell means"),
        delta("E1", "EvalStop-2 JCT vs SRTF-Est", "jct", jct[EVAL2], jct[SRTF], None, 0, +1),
        check("E1", "EvalStop TTFUC matches StopAt-0.65", "matches", f"{gap:+.1f}% vs StopAt",
              abs(gap) <= 10, "within ±10%" if abs(gap) <= 10 else "differs by more than 10%"),
        level("E1", "StopAt-0.65 FPR-all (FP / non-hacking)", 0.097,
              stat(r, "fpr_all", policy="StopAt-0.65+SRTF-Est"), 0.05, True),
        level("E1", "StopAt-0.65 FPR (healthy RLHF)", 0.097,
              stat(r, "fpr", policy="StopAt-0.65+SRTF-Est"), 0.05, True, FPR_NOTE),
        level("E1", "EvalStop-2 FPR", 0.0, stat(r, "fpr", policy=EVAL2), 0.03, True),
    ]


def e2(r: pd.DataFrame) -> list[Row]:
    s = {m: {p: stat(r, m, policy=p) for p in r["policy"].unique()}
         for m in ("jct", "wasted_frac", "precision", "recall", "fpr", "fpr_all", "n_stopped",
                   "jain")}
    sa5, sa65, lp = "StopAt-0.5+SRTF-Est", "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est"
    rate = 0.6  # configured hacking fraction of RLHF jobs (configs/defaults.yaml)
    jain_e, jain_s = s["jain"][EVAL2], s["jain"][SRTF]
    jain_p = welch_p(jain_e.values, jain_s.values)
    fast = sorted(s["jct"], key=lambda p: s["jct"][p].mean)[:2]
    return [
        level("E2", "SRTF-Est mean JCT (min)", 1124, s["jct"][SRTF], 112.4,
              note="absolute minutes depend on the calibrated arrival rate and eval cost"),
        level("E2", "SRTF-Est wasted compute", 0.345, s["wasted_frac"][SRTF], 0.05, True),
        bound("E2", "EvalStop-2 precision >= 95% (paper 98.3%)", ">= 95%",
              s["precision"][EVAL2], lambda v: v >= 0.95, True),
        bound("E2", "EvalStop-2 recall >= 95% (paper 99%)", ">= 95%", s["recall"][EVAL2],
              lambda v: v >= 0.95, True),
        bound("E2", "EvalStop-2 FPR <= 3% (paper 1.5%)", "<= 3%", s["fpr"][EVAL2],
              lambda v: v <= 0.03, True),
        delta("E2", "EvalStop-2 JCT improvement vs SRTF-Est", "jct", s["jct"][EVAL2],
              s["jct"][SRTF], 9.4, 5, +1),
        delta("E2", "EvalStop-2 wasted change vs SRTF-Est", "wasted_frac",
              s["wasted_frac"][EVAL2], s["wasted_frac"][SRTF], -21.8, 5, -1),
        level("E2", "EvalStop-2 jobs stopped", 93, s["n_stopped"][EVAL2], 14),
        level("E2", "EvalStop-2 mean JCT (min)", 1018, s["jct"][EVAL2], 101.8),
        level("E2", "EvalStop-2 wasted compute", 0.269, s["wasted_frac"][EVAL2], 0.05, True),
        check("E2", "StopAt-0.5/0.65 have the best JCT", "best two", ", ".join(fast),
              set(fast) == {sa5, sa65}, "ordering of cell means"),
        level("E2", "StopAt-0.65 precision", 0.57, s["precision"][sa65], 0.05, True),
        bound("E2", "StopAt-0.65 precision within 5 points of the base rate", "60% ± 5",
              s["precision"][sa65], lambda v: abs(v - rate) <= 0.05, True,
              "configured hacking fraction 60%"),
        level("E2", "StopAt-0.65 FPR-all (FP / non-hacking)", 0.645, s["fpr_all"][sa65], 0.05,
              True),
        bound("E2", "StopAt-0.65 FPR >= 50% (healthy RLHF)", ">= 50%", s["fpr"][sa65],
              lambda v: v >= 0.5, True, FPR_NOTE),
        level("E2", "LossPlateau recall", 0.383, s["recall"][lp], 0.05, True),
        bound("E2", "LossPlateau recall <= 60%", "<= 60%", s["recall"][lp],
              lambda v: v <= 0.6, True),
        level("E2", "LossPlateau FPR (healthy RLHF)", 0.247, s["fpr"][lp], 0.05, True, FPR_NOTE),
        level("E2", "LossPlateau FPR-all (FP / non-hacking)", 0.247, s["fpr_all"][lp], 0.05,
              True),
        check("E2", "Jain's index with EvalStop within noise of SRTF-Est", "p > 0.05",
              f"{fmt(jain_e)} vs {fmt(jain_s)} (p = {jain_p:.3g})",
              min(jain_e.n, jain_s.n) > 1 and not jain_p <= 0.05,
              "Welch's t-test on Jain's index (p undefined only when neither varies)"),
        ratio("E2", "EvalSched JCT / SRTF-Est JCT", 2.2, s["jct"]["EvalSched"], s["jct"][SRTF],
              0.22),
    ]


def e3(r: pd.DataFrame) -> list[Row]:
    gains = [(v, 100 * (a.mean - b.mean) / a.mean) for (v, a), (_, b) in
             zip(trend(r, "jct", SRTF), trend(r, "jct", EVAL2), strict=True)]
    fp10 = stat(r, "fpr_all", policy=EVAL2, value=0.1)
    p10 = stat(r, "precision", policy=EVAL2, value=0.1)
    return [
        check("E3", "EvalStop's JCT gain grows with the RLHF share", "grows",
              ", ".join(f"{v:g}: {g:+.1f}%" for v, g in gains), gains[-1][1] > gains[0][1],
              "gain at 80% RLHF vs at 10%"),
        check("E3", "At 10% RLHF: no false positives", "0 FP", fmt(fp10, True),
              fp10.n > 0 and max(fp10.values) == 0, "FP / non-hacking jobs, every seed"),
        level("E3", "At 10% RLHF: precision", 1.0, p10, 0.0, True),
    ]


def e4(r: pd.DataFrame) -> list[Row]:
    rows = []
    for base in ("FIFO", "SJF-Est", "SRTF-Est", "LossAware"):
        cell, ref = f"{base}+EvalStop-2", base
        for m, lo, hi, sign in (("jct", 9, 25, +1), ("ttfuc", 5, 9, +1),
                                ("wasted_frac", -22, -20, -1)):
            d = delta("E4", f"{cell}: {m} vs {base} alone", m, stat(r, m, label=cell),
                      stat(r, m, label=ref), (lo + hi) / 2, (hi - lo) / 2 + 2, sign)
            rows.append(d._replace(paper=f"{lo:+d}..{hi:+d}%"))
        rows.append(bound("E4", f"{cell}: precision > 97%", "> 97%",
                          stat(r, "precision", label=cell), lambda v: v > 0.97, True))
        rows.append(bound("E4", f"{cell}: FPR < 3%", "< 3%", stat(r, "fpr", label=cell),
                          lambda v: v < 0.03, True))
    return rows


def e5(r: pd.DataFrame) -> list[Row]:
    def k(n: int, m: str):
        return stat(r, m, policy=f"EvalStop-{n}+SRTF-Est")
    return [
        level("E5", "k=1 jobs stopped", 127, k(1, "n_stopped"), 19),
        level("E5", "k=1 mean JCT (min)", 874, k(1, "jct"), 87.4),
        level("E5", "k=1 wasted compute", 0.194, k(1, "wasted_frac"), 0.05, True),
        level("E5", "k=2 jobs stopped", 93, k(2, "n_stopped"), 14),
        check("E5", "k=1 stops more jobs than k=2, with a higher FPR", "more, higher",
              f"stopped {fmt(k(1, 'n_stopped'))} vs {fmt(k(2, 'n_stopped'))}; FPR "
              f"{fmt(k(1, 'fpr'), True)} vs {fmt(k(2, 'fpr'), True)}",
              k(1, "n_stopped").mean > k(2, "n_stopped").mean
              and k(1, "fpr").mean > k(2, "fpr").mean, "cell means"),
        check("E5", "k >= 4 stops <= 2 jobs", "<= 2", f"k=4: {fmt(k(4, 'n_stopped'))}, "
              f"k=5: {fmt(k(5, 'n_stopped'))}", all(k(n, "n_stopped").mean <= 2 for n in (4, 5)),
              "mean jobs stopped, each k"),
    ]


def e6(r: pd.DataFrame) -> list[Row]:
    # The paper's 867 and 1123 are both read against one SRTF-Est JCT (1124, the 15% default),
    # so both point checks use that cell; the trend check compares at the same interval.
    ref = stat(r, "jct", policy=SRTF, value=0.15)
    same = {v: s for v, s in trend(r, "jct", SRTF)}
    ev = trend(r, "jct", EVAL2)
    gains = [(v, 100 * (same[v].mean - s.mean) / same[v].mean) for v, s in ev]
    at30 = stat(r, "jct", policy=EVAL2, value=0.3)
    gain30 = improvement("jct", at30.mean, ref.mean)
    return [
        delta("E6", "5% interval: EvalStop JCT vs SRTF-Est at the 15% default", "jct",
              stat(r, "jct", policy=EVAL2, value=0.05), ref, 24.0, 5, +1),
        level("E6", "5% interval: EvalStop mean JCT (min)", 867,
              stat(r, "jct", policy=EVAL2, value=0.05), 86.7),
        level("E6", "30% interval: EvalStop mean JCT (min)", 1123, at30, 112.3),
        check("E6", "30% interval saves < 1% (vs SRTF-Est at the 15% default)", "< 1%",
              f"{gain30:+.1f}%", gain30 < 1, "JCT gain against the paper's 1124-min reference"),
        check("E6", "Savings shrink as the interval grows", "shrinks",
              ", ".join(f"{v:g}: {g:+.1f}%" for v, g in gains), gains[0][1] > gains[-1][1],
              "JCT gain vs SRTF-Est at the same interval, first vs last"),
    ]


def e7(r: pd.DataFrame) -> list[Row]:
    ev = trend(r, "precision", EVAL2)
    low = [s.mean for v, s in ev if v <= 0.05]
    others = [s.mean for p in ("StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est")
              for _, s in trend(r, "precision", p)]
    return [
        level("E7", "EvalStop precision at sigma 0.01", 1.0,
              stat(r, "precision", policy=EVAL2, value=0.01), 0.05, True),
        level("E7", "EvalStop precision at sigma 0.12", 0.81,
              stat(r, "precision", policy=EVAL2, value=0.12), 0.05, True),
        check("E7", "EvalStop precision >= 91% for sigma <= 0.05 (issue: >= 90%)", ">= 91%",
              show_trend([(v, s) for v, s in ev if v <= 0.05]), bool(low) and min(low) >= 0.9,
              "lowest mean over sigma <= 0.05"),
        check("E7", "EvalStop precision falls as sigma rises", "100% -> 81%", show_trend(ev),
              ev[-1][1].mean < ev[0][1].mean, "first vs last sigma"),
        check("E7", "StopAt and LossPlateau flat at ~52-57% precision", "52-57%",
              f"{min(others):.1%} .. {max(others):.1%}",
              min(others) >= 0.47 and max(others) <= 0.62, "range of means, ±5 points"),
    ]


def e8(r: pd.DataFrame) -> list[Row]:
    ev = trend(r, "precision", EVAL2)
    sa = trend(r, "precision", "StopAt-0.65+SRTF-Est")
    off = max(abs(s.mean - v) for v, s in sa)
    return [
        check("E8", "EvalStop precision >= 89% at every base rate (issue: >= 85%)", ">= 89%",
              show_trend(ev), min(s.mean for _, s in ev) >= 0.89, "lowest mean"),
        check("E8", "StopAt-0.65 precision tracks the base rate", "= base rate",
              show_trend(sa), off <= 0.05, f"largest gap {off:.1%} (tolerance 5 points)"),
        level("E8", "StopAt-0.65 precision at a 20% base rate", 0.20,
              stat(r, "precision", policy="StopAt-0.65+SRTF-Est", value=0.2), 0.05, True),
        level("E8", "StopAt-0.65 FPR-all at a 20% base rate", 0.77,
              stat(r, "fpr_all", policy="StopAt-0.65+SRTF-Est", value=0.2), 0.05, True),
        level("E8", "StopAt-0.65 FPR (healthy RLHF) at a 20% base rate", 0.77,
              stat(r, "fpr", policy="StopAt-0.65+SRTF-Est", value=0.2), 0.05, True, FPR_NOTE),
    ]


CLAIMS: dict[str, Callable[[pd.DataFrame], list[Row]]] = {
    "e1": e1, "e2": e2, "e3": e3, "e4": e4, "e5": e5, "e6": e6, "e7": e7, "e8": e8}
