"""The claims checker judges the quantity each paper figure is about, once, and names its fits."""

from __future__ import annotations

import pandas as pd
import pytest

from evalstop_gym.benchmarks.analysis.claims import FIT, NOT, REPRO, Stat, as_fit, level
from evalstop_gym.benchmarks.analysis.paper_claims import e6, e8, waste_ceiling
from evalstop_gym.config import SimConfig

EVAL2, SRTF = "EvalStop-2+SRTF-Est", "SRTF-Est"


def runs(cells: dict[tuple[str, float], dict[str, float]], seeds: int = 3) -> pd.DataFrame:
    """A runs frame: `seeds` identical rows per (policy, sweep value) with the given metrics."""
    rows = [{"policy": p, "label": p, "value": v, **m, "seed": s}
            for (p, v), m in cells.items() for s in range(seeds)]
    return pd.DataFrame(rows)


def by_claim(rows) -> dict[str, str]:
    return {r.claim: r.verdict for r in rows}


def test_e6_savings_are_judged_on_saved_compute_not_jct() -> None:
    """Large JCT gains with nothing saved fail "saves 24%"; 24% saved passes whatever the JCT."""
    cells = {}
    for v in (0.05, 0.15, 0.3):
        cells[(SRTF, v)] = {"jct": 1124.0, "saved_frac": 0.0}
        cells[(EVAL2, v)] = {"jct": 850.0, "saved_frac": 0.0}
    verdicts = by_claim(e6(runs(cells)))
    assert verdicts["5% interval: EvalStop saves 24% of planned compute"] == NOT
    assert verdicts["30% interval: EvalStop saves < 1% of planned compute"] == REPRO
    cells[(EVAL2, 0.05)] = {"jct": 1124.0, "saved_frac": 0.24}
    cells[(EVAL2, 0.3)] = {"jct": 1124.0, "saved_frac": 0.02}
    verdicts = by_claim(e6(runs(cells)))
    assert verdicts["5% interval: EvalStop saves 24% of planned compute"] == REPRO
    assert verdicts["30% interval: EvalStop saves < 1% of planned compute"] == NOT
    assert verdicts["Savings shrink as the interval grows"] == REPRO


def test_each_fpr_figure_is_judged_once_on_fp_over_non_hacking() -> None:
    """E8's 77% is one row, judged on fpr_all, with the healthy-RLHF FPR (`fpr`) shown beside."""
    sa = "StopAt-0.65+SRTF-Est"
    cells = {(p, v): {"precision": v, "fpr": 1.0, "fpr_all": 0.77}
             for p in (EVAL2, sa) for v in (0.2, 0.8)}
    rows = [r for r in e8(runs(cells)) if "FPR" in r.claim]
    assert len(rows) == 1
    assert rows[0].verdict == REPRO and "100.0" in rows[0].why
    cells[(sa, 0.2)] = {"precision": 0.2, "fpr": 0.77, "fpr_all": 0.5}
    assert [r for r in e8(runs(cells)) if "FPR" in r.claim][0].verdict == NOT


def test_a_calibration_target_is_a_fit_and_a_miss_stays_a_miss() -> None:
    held = level("E2", "SRTF-Est mean JCT", 1124, Stat(1116.0, 80.0, 5, []), 112.4)
    missed = level("E2", "SRTF-Est mean JCT", 1124, Stat(1500.0, 80.0, 5, []), 112.4)
    assert as_fit(held, "arrival rate").verdict == FIT
    assert as_fit(missed, "arrival rate").verdict == NOT
    assert "arrival rate" in as_fit(held, "arrival rate").why


def test_waste_ceiling_is_read_from_the_config() -> None:
    """0.6 hacking x 0.35 past the peak x RLHF's ~97% of GPU time, and it moves with the config."""
    text, top = waste_ceiling(SimConfig())
    assert top == pytest.approx(0.6 * 0.35 * 1008 / (1008 + 22.5 + 5.25))
    assert "0.35" in text and "0.97" in text
    _, half = waste_ceiling(SimConfig().with_overrides({"workload.hacking_fraction": 0.3}))
    assert half == pytest.approx(top / 2)
