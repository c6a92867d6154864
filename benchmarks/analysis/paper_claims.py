"""The paper's stated figures (and the checks on E2 and the matrix), one function per experiment.

Each function takes that experiment's runs DataFrame and returns report rows; tolerances are the
"rough size" the reproduction aims for: 10% of a time, 5 points of a percentage.
"""

from __future__ import annotations

from typing import NamedTuple

import pandas as pd

from evalstop_gym.config import SimConfig
from evalstop_gym.experiment import load_experiment

from .claims import (
    EVAL2,
    SRTF,
    Row,
    as_fit,
    bound,
    check,
    delta,
    fmt,
    level,
    p_against,
    ratio,
    show_trend,
    stat,
    trend,
)

# Every FPR figure is judged once, as FP / all non-hacking jobs (`fpr_all`): the paper's own
# numbers rule the healthy-RLHF definition out (E1 StopAt 9.7%, E2 LossPlateau 24.7%, E8 StopAt
# 77% are all far below what stopping every RLHF job gives over healthy RLHF jobs, 100%).


# The E2 figures `evalstop-bench calibrate` fitted the adopted constants to (eval minutes, the RLHF
# loss residual, the DPO plateau) are fits wherever those constants move them (its elasticities).
EVAL_COST = "job_types.*.eval_minutes (evalstop-bench calibrate)"


class Figure(NamedTuple):
    """A stated E2 figure: the paper's value and the claim's tolerance (same units). A bound
    (`sense` +1 for ">=", -1 for "<=") holds or not; its `tol` is the miss calibrate's hinge
    counts as one tolerance unit."""

    paper: float
    tol: float
    sense: int = 0

    def holds(self, v: float) -> bool:
        return v >= self.paper if self.sense > 0 else v <= self.paper


# E2's stated figures, typed once: e2() judges them, `evalstop-bench calibrate` fits them.
E2_FIGURES: dict[str, Figure] = {
    "srtf_jct": Figure(1124, 112.4),
    "srtf_wasted": Figure(0.345, 0.05),
    "evalstop_precision": Figure(0.95, 0.05, +1),
    "evalstop_recall": Figure(0.95, 0.05, +1),
    "evalstop_fpr_all": Figure(0.03, 0.03, -1),
    "evalstop_jct_gain": Figure(9.4, 5),
    "evalstop_wasted_change": Figure(-21.8, 5),
    "evalstop_stopped": Figure(93, 14),
    "evalstop_jct": Figure(1018, 101.8),
    "evalstop_wasted": Figure(0.269, 0.05),
    "stopat_precision": Figure(0.57, 0.05),
    "stopat_fpr_all": Figure(0.645, 0.05),
    "lossplateau_recall": Figure(0.383, 0.05),
    "lossplateau_recall_max": Figure(0.6, 0.05, -1),
    "lossplateau_fpr_all": Figure(0.247, 0.05),
    "evalsched_jct_ratio": Figure(2.2, 0.22),
}


def healthy_fpr(r: pd.DataFrame, **sel: object) -> str:
    """The FPR over healthy RLHF jobs (`fpr`), shown beside the judged one."""
    return f"FP / healthy RLHF (`fpr`): {fmt(stat(r, 'fpr', **sel), True)}"


def waste_ceiling(config: SimConfig) -> tuple[str, float]:
    """The wasted fraction the stated curves allow with no stopping at all, and its arithmetic:
    hacking share of RLHF x the mean share of a hacking run past its peak x RLHF's share of
    training GPU-minutes (mix x mean duration x mean GPUs per type), read from `config`."""
    wl, jt = config.workload, config.job_types
    load = {t: getattr(wl.mix, t) * getattr(jt, t).duration_estimate * sum(getattr(jt, t).gpus)
            / 2 for t in ("lora", "dpo", "rlhf")}
    rlhf = load["rlhf"] / sum(load.values())
    past = 1.0 - sum(config.curves.rlhf_hacking.peak_progress) / 2
    top = wl.hacking_fraction * past * rlhf
    return (f"{wl.hacking_fraction:g} hacking x {past:.2f} of a run past the peak x {rlhf:.2f} "
            f"of GPU time in RLHF = {top:.1%} at most (the paper's variant write-up, §5.3, "
            "quoted in docs/paper-figures.md: no-EvalStop waste 20.3%)"), top


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
        level("E1", "StopAt-0.65 FPR (FP / non-hacking)", 0.097,
              stat(r, "fpr_all", policy="StopAt-0.65+SRTF-Est"), 0.05, True,
              healthy_fpr(r, policy="StopAt-0.65+SRTF-Est")),
        level("E1", "EvalStop-2 FPR (FP / non-hacking)", 0.0, stat(r, "fpr_all", policy=EVAL2),
              0.03, True, healthy_fpr(r, policy=EVAL2)),
    ]


def e2(r: pd.DataFrame) -> list[Row]:
    s = {m: {p: stat(r, m, policy=p) for p in r["policy"].unique()}
         for m in ("jct", "wasted_frac", "precision", "recall", "fpr_all", "n_stopped", "jain")}
    sa5, sa65, lp = "StopAt-0.5+SRTF-Est", "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est"
    config = load_experiment("e2").config
    rate = config.workload.hacking_fraction
    ceiling, _ = waste_ceiling(config)
    jain_e, jain_s = s["jain"][EVAL2], s["jain"][SRTF]
    jain_test, jain_p = p_against(jain_e, jain_s)
    fast = sorted(s["jct"], key=lambda p: s["jct"][p].mean)[:2]
    f = E2_FIGURES
    pr, rc, fp, lpr = (f["evalstop_precision"], f["evalstop_recall"], f["evalstop_fpr_all"],
                       f["lossplateau_recall_max"])
    return [
        as_fit(level("E2", "SRTF-Est mean JCT (min)", f["srtf_jct"].paper, s["jct"][SRTF],
                     f["srtf_jct"].tol),
               "workload.arrival_rate_per_min, with " + EVAL_COST),
        level("E2", "SRTF-Est wasted compute", f["srtf_wasted"].paper, s["wasted_frac"][SRTF],
              f["srtf_wasted"].tol, True, f"the stated curves allow {ceiling}"),
        bound("E2", f"EvalStop-2 precision >= {pr.paper:.0%} (paper 98.3%)",
              f">= {pr.paper:.0%}", s["precision"][EVAL2], pr.holds, True),
        bound("E2", f"EvalStop-2 recall >= {rc.paper:.0%} (paper 99%)", f">= {rc.paper:.0%}",
              s["recall"][EVAL2], rc.holds, True),
        bound("E2", f"EvalStop-2 FPR <= {fp.paper:.0%} (paper 1.5%; FP / non-hacking)",
              f"<= {fp.paper:.0%}", s["fpr_all"][EVAL2], fp.holds, True,
              healthy_fpr(r, policy=EVAL2)),
        as_fit(delta("E2", "EvalStop-2 JCT improvement vs SRTF-Est", "jct", s["jct"][EVAL2],
                     s["jct"][SRTF], f["evalstop_jct_gain"].paper,
                     f["evalstop_jct_gain"].tol, +1), EVAL_COST),
        delta("E2", "EvalStop-2 wasted change vs SRTF-Est", "wasted_frac",
              s["wasted_frac"][EVAL2], s["wasted_frac"][SRTF], f["evalstop_wasted_change"].paper,
              f["evalstop_wasted_change"].tol, -1),
        level("E2", "EvalStop-2 jobs stopped", f["evalstop_stopped"].paper,
              s["n_stopped"][EVAL2], f["evalstop_stopped"].tol),
        as_fit(level("E2", "EvalStop-2 mean JCT (min)", f["evalstop_jct"].paper,
                     s["jct"][EVAL2], f["evalstop_jct"].tol), EVAL_COST),
        level("E2", "EvalStop-2 wasted compute", f["evalstop_wasted"].paper,
              s["wasted_frac"][EVAL2], f["evalstop_wasted"].tol, True,
              f"above what no stopping at all allows: {ceiling}"),
        check("E2", "StopAt-0.5/0.65 have the best JCT", "best two", ", ".join(fast),
              set(fast) == {sa5, sa65}, "ordering of cell means"),
        level("E2", "StopAt-0.65 precision", f["stopat_precision"].paper, s["precision"][sa65],
              f["stopat_precision"].tol, True),
        bound("E2", "StopAt-0.65 precision within 5 points of the base rate",
              f"{rate:.0%} ± 5", s["precision"][sa65], lambda v: abs(v - rate) <= 0.05, True,
              f"configured hacking fraction {rate:.0%}"),
        level("E2", "StopAt-0.65 FPR (FP / non-hacking)", f["stopat_fpr_all"].paper,
              s["fpr_all"][sa65], f["stopat_fpr_all"].tol, True, healthy_fpr(r, policy=sa65)),
        as_fit(level("E2", "LossPlateau recall", f["lossplateau_recall"].paper, s["recall"][lp],
                     f["lossplateau_recall"].tol, True),
               "job_types.rlhf.loss.residual"),
        bound("E2", f"LossPlateau recall <= {lpr.paper:.0%}", f"<= {lpr.paper:.0%}",
              s["recall"][lp], lpr.holds, True),
        as_fit(level("E2", "LossPlateau FPR (FP / non-hacking)", f["lossplateau_fpr_all"].paper,
                     s["fpr_all"][lp], f["lossplateau_fpr_all"].tol, True,
                     healthy_fpr(r, policy=lp)),
               "job_types.rlhf.loss.residual, job_types.dpo.loss.plateau_progress"),
        check("E2", "Jain's index with EvalStop within noise of SRTF-Est", "p > 0.05",
              f"{fmt(jain_e)} vs {fmt(jain_s)} ({jain_test} = {jain_p:.3g})",
              min(jain_e.n, jain_s.n) > 1 and not jain_p <= 0.05,
              f"{jain_test.split()[0]} t-test on Jain's index (p undefined only when the "
              "difference does not vary)"),
        eval_sched_ratio(s["jct"]),
    ]


def eval_sched_ratio(jct: dict) -> Row:
    """EvalSched's JCT against SRTF-Est, judged on the paper's form (demoted jobs keep their GPUs
    and get a share of time); the strict-priority form, when run, is shown beside it."""
    fig = E2_FIGURES["evalsched_jct_ratio"]
    row = as_fit(ratio("E2", "EvalSched JCT / SRTF-Est JCT (time-sliced)", fig.paper,
                       jct["EvalSched"], jct[SRTF], fig.tol), "cluster.time_slice_share")
    strict = jct.get("EvalSched-Strict")
    if strict is None or not strict.n or not jct[SRTF].mean:
        return row
    return row._replace(why=f"{row.why}; strict priority (EvalSched-Strict): "
                            f"{strict.mean / jct[SRTF].mean:.2f}x")


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
        rows.append(bound("E4", f"{cell}: FPR < 3% (FP / non-hacking)", "< 3%",
                          stat(r, "fpr_all", label=cell), lambda v: v < 0.03, True,
                          healthy_fpr(r, label=cell)))
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
              f"{fmt(k(1, 'fpr_all'), True)} vs {fmt(k(2, 'fpr_all'), True)}",
              k(1, "n_stopped").mean > k(2, "n_stopped").mean
              and k(1, "fpr_all").mean > k(2, "fpr_all").mean,
              "cell means; FPR as FP / non-hacking"),
        check("E5", "k >= 4 stops <= 2 jobs", "<= 2", f"k=4: {fmt(k(4, 'n_stopped'))}, "
              f"k=5: {fmt(k(5, 'n_stopped'))}", all(k(n, "n_stopped").mean <= 2 for n in (4, 5)),
              "mean jobs stopped, each k"),
    ]


def e6(r: pd.DataFrame) -> list[Row]:
    # "Saves" is saved compute (the paper: "saves 24% of planned compute"): GPU-minutes avoided
    # by stopping / planned GPU-minutes, of EvalStop-2 at each interval.
    saved = trend(r, "saved_frac", EVAL2)
    return [
        level("E6", "5% interval: EvalStop saves 24% of planned compute", 0.24,
              stat(r, "saved_frac", policy=EVAL2, value=0.05), 0.05, True),
        level("E6", "5% interval: EvalStop mean JCT (min)", 867,
              stat(r, "jct", policy=EVAL2, value=0.05), 86.7),
        level("E6", "30% interval: EvalStop mean JCT (min)", 1123,
              stat(r, "jct", policy=EVAL2, value=0.3), 112.3),
        bound("E6", "30% interval: EvalStop saves < 1% of planned compute", "< 1%",
              stat(r, "saved_frac", policy=EVAL2, value=0.3), lambda v: v < 0.01, True),
        check("E6", "Savings shrink as the interval grows", "shrinks", show_trend(saved),
              bool(saved) and saved[0][1].mean > saved[-1][1].mean,
              "saved compute of EvalStop-2, first vs last interval"),
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
        level("E8", "StopAt-0.65 FPR (FP / non-hacking) at a 20% base rate", 0.77,
              stat(r, "fpr_all", policy="StopAt-0.65+SRTF-Est", value=0.2), 0.05, True,
              healthy_fpr(r, policy="StopAt-0.65+SRTF-Est", value=0.2)),
    ]
