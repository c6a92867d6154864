"""Statistics on hand-computed examples."""

from __future__ import annotations

import math

import pandas as pd
import pytest
from scipy import stats as st

from evalstop_gym.benchmarks.analysis.stats import (
    compare,
    improvement,
    mean_ci,
    reference_of,
    summarize,
    welch_p,
)


def test_mean_ci_on_three_values():
    """[1, 2, 3]: mean 2, sd 1, half-width t(0.975, 2) / sqrt(3) = 4.302653 / 1.732051."""
    mean, half, n = mean_ci([1.0, 2.0, 3.0])
    assert (mean, n) == (2.0, 3)
    assert half == pytest.approx(2.484138, abs=1e-6)


def test_mean_ci_ignores_nan_and_single_value_has_no_interval():
    assert mean_ci([math.nan, 4.0])[0] == 4.0
    assert math.isnan(mean_ci([4.0])[1])
    assert mean_ci([])[2] == 0


def test_welch_p_by_hand():
    """[1,2,3] vs [4,5,6]: t = -3 / sqrt(2/3) = -3.674, Welch df = 4, two-sided p = 0.0213."""
    assert welch_p([1, 2, 3], [4, 5, 6]) == pytest.approx(0.021312, abs=1e-5)
    assert math.isnan(welch_p([1, 1], [1, 1]))  # no spread at all: undefined, not 0 or 1


def test_improvement_sign_convention():
    """JCT 90 vs 100 is +10% (better); wasted 0.15 vs 0.20 is -25% (less waste)."""
    assert improvement("jct", 90.0, 100.0) == pytest.approx(10.0)
    assert improvement("ttfuc", 110.0, 100.0) == pytest.approx(-10.0)
    assert improvement("wasted_frac", 0.15, 0.20) == pytest.approx(-25.0)
    assert math.isnan(improvement("jct", 1.0, 0.0))


def _runs() -> pd.DataFrame:
    rows = []
    for value in (0.1, 0.2):
        for det, jcts in (("none", (100.0, 110.0, 120.0)), ("EvalStop-2", (80.0, 90.0, 100.0))):
            for seed, jct in zip((1, 2, 3), jcts, strict=True):
                policy = "SRTF-Est" if det == "none" else f"{det}+SRTF-Est"
                rows.append({"experiment": "x", "cell": f"{policy}__s={value}", "label": "",
                             "policy": policy, "base": "SRTF-Est", "detector": det,
                             "param": "s", "value": value, "seed": seed,
                             "jct": jct * (1 + value), "wasted_frac": 0.2 if det == "none"
                             else 0.1})
    return pd.DataFrame(rows)


def test_reference_matched_at_the_same_sweep_value():
    cells = _runs().drop_duplicates("cell")
    refs = reference_of(cells, {"detector": "none"}, match_value=True)
    assert refs["EvalStop-2+SRTF-Est__s=0.2"] == "SRTF-Est__s=0.2"
    fixed = reference_of(cells, {"detector": "none", "value": 0.1}, match_value=True)
    assert fixed["EvalStop-2+SRTF-Est__s=0.2"] == "SRTF-Est__s=0.1"


def test_compare_and_summarize_by_hand():
    """Means 110*1.1 vs 90*1.1: +18.18% JCT; wasted 0.1 vs 0.2: -50%."""
    comp = compare(_runs(), {"detector": "none"}, match_value=True)
    row = comp[(comp.cell == "EvalStop-2+SRTF-Est__s=0.1") & (comp.metric == "jct")].iloc[0]
    assert row["delta_pct"] == pytest.approx(100 * 20 / 110)
    # seeds 1-3 pair up, and each is 22 minutes faster: a constant difference has no p
    assert row["test"] == "paired t" and math.isnan(row["p_value"])
    assert row["diff_mean"] == pytest.approx(-22.0) and row["diff_ci95"] == pytest.approx(0.0)
    unseeded = compare(_runs().drop(columns="seed"), {"detector": "none"}, match_value=True)
    welch = unseeded[(unseeded.cell == row["cell"]) & (unseeded.metric == "jct")].iloc[0]
    assert welch["test"] == "Welch"
    assert welch["p_value"] == pytest.approx(welch_p([88, 99, 110], [110, 121, 132]))
    wasted = comp[(comp.cell == "EvalStop-2+SRTF-Est__s=0.1") & (comp.metric == "wasted_frac")]
    assert wasted["delta_pct"].iloc[0] == pytest.approx(-50.0)
    summ = summarize(_runs())
    jct = summ[(summ.cell == "SRTF-Est__s=0.1") & (summ.metric == "jct")].iloc[0]
    assert jct["mean"] == pytest.approx(121.0) and jct["n"] == 3
    assert jct["ci95"] == pytest.approx(2.484138 * 11, abs=1e-4)


def _stat(mean: float):
    from evalstop_gym.benchmarks.analysis.claims import Stat

    return Stat(mean, 0.0, 5, [mean] * 5)


def test_ratio_verdict_needs_the_size_for_reproduced():
    """A stated 2.2x: 2.1x is reproduced, 1.5x only the same direction, 0.9x not at all."""
    from evalstop_gym.benchmarks.analysis.claims import NOT, REPRO, SAME, Stat, ratio

    def verdict(cell):
        return ratio("E", "c", 2.2, cell, _stat(1.0), 0.22).verdict

    assert verdict(_stat(2.1)) == REPRO
    assert verdict(_stat(1.5)) == SAME
    assert verdict(_stat(0.9)) == NOT
    assert verdict(Stat(math.nan, math.nan, 0, [])) == NOT


def test_delta_of_the_wrong_sign_is_never_reproduced():
    """JCT 110 vs 100 is slower; wasted 0.25 vs 0.20 is more waste: both fail."""
    from evalstop_gym.benchmarks.analysis.claims import NOT, REPRO, delta

    assert delta("E", "c", "jct", _stat(110.0), _stat(100.0), None, 0, +1).verdict == NOT
    assert delta("E", "c", "wasted_frac", _stat(0.25), _stat(0.2), -21.8, 5, -1).verdict == NOT
    assert delta("E", "c", "jct", _stat(90.0), _stat(100.0), 9.4, 5, +1).verdict == REPRO


def test_a_change_that_is_not_significant_is_only_the_same_direction():
    """+3% JCT over seeds that scatter by 20%: the right sign and size, but not established."""
    from evalstop_gym.benchmarks.analysis.claims import REPRO, SAME, Stat, delta

    noisy_ref = Stat(100.0, 0.0, 5, [80.0, 90.0, 100.0, 110.0, 120.0])
    noisy_cell = Stat(97.0, 0.0, 5, [77.0, 87.0, 97.0, 107.0, 117.0])
    row = delta("E", "c", "jct", noisy_cell, noisy_ref, 3.0, 5, +1)
    assert row.verdict == SAME and "not significant" in row.why
    tight_ref = Stat(100.0, 0.0, 5, [99.0, 99.5, 100.0, 100.5, 101.0])
    tight_cell = Stat(97.0, 0.0, 5, [96.0, 96.5, 97.0, 97.5, 98.0])
    assert delta("E", "c", "jct", tight_cell, tight_ref, 3.0, 5, +1).verdict == REPRO


def test_paired_p_sees_a_small_steady_gain_that_welch_misses():
    """Seeds differ a lot from each other but each cell is 2% faster on every seed: paired
    differences are tiny and steady (significant), the pooled spread hides them (Welch)."""
    from evalstop_gym.benchmarks.analysis.stats import paired_p, welch_p

    ref = {s: 1000.0 + 300.0 * ((s * 7) % 5) for s in range(10)}
    cell = {s: v * 0.98 + (0.5 if s % 2 else -0.5) for s, v in ref.items()}
    assert paired_p(cell, ref) < 0.001
    assert welch_p(list(cell.values()), list(ref.values())) > 0.5
    assert math.isnan(paired_p({1: 1.0}, {1: 2.0}))                      # one shared seed
    assert math.isnan(paired_p({1: 1.0, 2: 2.0}, {1: 2.0, 2: 3.0}))     # constant difference
    only_shared = paired_p({1: 1.0, 2: 5.0, 3: 2.0}, {2: 4.0, 3: 2.5, 4: 9.0})  # seeds 2 and 3
    assert only_shared == pytest.approx(st.ttest_rel([5.0, 2.0], [4.0, 2.5]).pvalue)


def test_seed_power_section_reports_both_tests_per_cell():
    import pandas as pd

    from evalstop_gym.benchmarks.analysis.seed_power import seed_power, seed_power_section

    rows = []
    for seed in range(8):
        base = 1000.0 + 200.0 * (seed % 3)
        rows.append({"policy": "SRTF-Est", "seed": seed, "jct": base, "wasted_frac": 0.2})
        rows.append({"policy": "EvalStop-2+SRTF-Est", "seed": seed,
                     "jct": base * 0.95 + seed % 2, "wasted_frac": 0.16 + 0.001 * seed})
    runs = pd.DataFrame(rows)
    power = seed_power(runs).set_index("metric")
    assert power.loc["JCT", "delta_pct"] > 4.5 and power.loc["JCT", "paired_p"] < 0.001
    assert power.loc["wasted", "delta_pct"] < 0
    text = seed_power_section(runs)
    assert "| EvalStop-2+SRTF-Est |" in text and "over 8 seeds" in text and "paired p" in text


def _paired_runs(ref_jct: dict[int, float], cell_jct: dict[int, float]) -> pd.DataFrame:
    """E2-like runs: SRTF-Est alone and EvalStop-2 over it, one row per seed each."""
    rows = []
    for det, jcts in (("none", ref_jct), ("EvalStop-2", cell_jct)):
        policy = "SRTF-Est" if det == "none" else f"{det}+SRTF-Est"
        rows += [{"experiment": "e2", "cell": policy, "label": "", "policy": policy,
                  "base": "SRTF-Est", "detector": det, "seed": s, "jct": v}
                 for s, v in jcts.items()]
    return pd.DataFrame(rows)


# Five seeds whose workloads differ a lot (the shared per-seed offset), and a cell that is
# 5% faster on every one of them, give or take a little.
WORKLOAD = {42: 900.0, 123: 1300.0, 456: 1000.0, 789: 1450.0, 1024: 1100.0}
FASTER = {s: v * 0.95 + (4.0 if i % 2 else -3.0) for i, (s, v) in enumerate(WORKLOAD.items())}


def _jct_row(runs: pd.DataFrame) -> pd.Series:
    comp = compare(runs, {"base": "SRTF-Est", "detector": "none"})
    return comp[(comp.cell == "EvalStop-2+SRTF-Est") & (comp.metric == "jct")].iloc[0]


def test_shared_seeds_are_compared_paired_where_welch_sees_nothing():
    """The E2 case of issue 21 (Welch 0.21, paired 0.0003): the workload offset each seed shares
    hides a steady gain from Welch's test, and the per-seed differences reveal it."""
    row = _jct_row(_paired_runs(WORKLOAD, FASTER))
    cell, ref = list(FASTER.values()), list(WORKLOAD.values())
    assert welch_p(cell, ref) > 0.2
    assert row["test"] == "paired t" and row["n_pairs"] == 5
    assert row["p_value"] < 0.01
    assert row["p_value"] == pytest.approx(st.ttest_rel(cell, ref).pvalue)
    diffs = [c - r for c, r in zip(cell, ref, strict=True)]
    assert row["diff_mean"] == pytest.approx(sum(diffs) / 5)
    assert row["diff_ci95"] == pytest.approx(mean_ci(diffs)[1])
    assert row["p_wilcoxon"] == pytest.approx(st.wilcoxon(cell, ref).pvalue)


def test_wilcoxon_matches_scipy_and_is_nan_where_undefined():
    """Ties and a zero difference (scipy then permutes exhaustively) give scipy's own p; one
    pair, or no difference at all, is undefined rather than p = 1."""
    from evalstop_gym.benchmarks.analysis.stats import wilcoxon_p

    a = {1: 5.0, 2: 7.0, 3: 6.0, 4: 9.0, 5: 4.0, 6: 8.0}
    b = {1: 4.0, 2: 5.0, 3: 6.0, 4: 7.0, 5: 5.0, 6: 6.0}
    assert wilcoxon_p(a, b) == pytest.approx(st.wilcoxon(list(a.values()),
                                                         list(b.values())).pvalue)
    assert math.isnan(wilcoxon_p({1: 1.0}, {1: 2.0}))
    assert math.isnan(wilcoxon_p({1: 1.0, 2: 2.0}, {1: 1.0, 2: 2.0}))


def test_cells_without_shared_seeds_fall_back_to_welch():
    """Other seeds (or one shared seed only) are not pairs: Welch's p, its interval, no pairs."""
    other = {s + 1: v for s, v in FASTER.items()}
    row = _jct_row(_paired_runs(WORKLOAD, other))
    cell, ref = list(other.values()), list(WORKLOAD.values())
    assert row["test"] == "Welch" and row["n_pairs"] == 0
    assert row["p_value"] == pytest.approx(welch_p(cell, ref))
    assert math.isnan(row["p_wilcoxon"])
    low, high = st.ttest_ind(cell, ref, equal_var=False).confidence_interval(0.95)
    assert row["diff_mean"] == pytest.approx((low + high) / 2)
    assert row["diff_ci95"] == pytest.approx((high - low) / 2)
    one = {42: FASTER[42], **{s + 1: v for s, v in FASTER.items() if s != 42}}
    assert _jct_row(_paired_runs(WORKLOAD, one))["test"] == "Welch"


def test_nan_values_drop_their_pair_only():
    """A seed whose metric is undefined (no job of that kind) leaves the other four paired."""
    gap = {**FASTER, 456: math.nan}
    row = _jct_row(_paired_runs(WORKLOAD, gap))
    kept = [s for s in WORKLOAD if s != 456]
    assert row["test"] == "paired t" and row["n_pairs"] == 4
    assert row["p_value"] == pytest.approx(
        st.ttest_rel([gap[s] for s in kept], [WORKLOAD[s] for s in kept]).pvalue)
    undefined = _jct_row(_paired_runs(WORKLOAD, dict.fromkeys(WORKLOAD, math.nan)))
    assert undefined["test"] == "paired t" and undefined["n_pairs"] == 0   # seeds decide
    assert math.isnan(undefined["p_value"]) and math.isnan(undefined["diff_mean"])
    ref = _paired_runs(WORKLOAD, FASTER)
    comp = compare(ref, {"base": "SRTF-Est", "detector": "none"})
    self_row = comp[(comp.cell == "SRTF-Est") & (comp.metric == "jct")].iloc[0]
    assert math.isnan(self_row["p_value"]) and math.isnan(self_row["p_wilcoxon"])
    assert self_row["diff_mean"] == 0


def test_summary_table_carries_the_test_columns():
    from evalstop_gym.benchmarks.analysis.stats import summary_table

    summ = summary_table(_paired_runs(WORKLOAD, FASTER),
                         {"reference": {"base": "SRTF-Est", "detector": "none"}}, False)
    row = summ[(summ.cell == "EvalStop-2+SRTF-Est") & (summ.metric == "jct")].iloc[0]
    assert row["test_vs_reference"] == "paired t" and row["n_pairs_vs_reference"] == 5
    assert row["p_value_vs_reference"] == pytest.approx(_jct_row(
        _paired_runs(WORKLOAD, FASTER))["p_value"])
    for col in ("p_wilcoxon", "diff_mean", "diff_ci95"):
        assert not math.isnan(row[f"{col}_vs_reference"])


def test_e4_compares_each_combination_with_its_own_base():
    """configs/e4.yaml's `{detector: none}`: FIFO+EvalStop-2 against FIFO, SJF-Est+EvalStop-2
    against SJF-Est, ..., as the paper's E4 has it, not every row against FIFO."""
    from evalstop_gym.experiment import load_experiment

    exp = load_experiment("e4")
    base_jct = {"FIFO": 2000.0, "SJF-Est": 1500.0, "SRTF-Est": 1200.0, "LossAware": 1300.0,
                "LAS": 1400.0}
    rows = [{"experiment": "e4", "cell": c.key, "label": c.label, "policy": c.policy,
             "base": c.base, "detector": c.detector, "param": "", "value": math.nan,
             "seed": s, "jct": base_jct[c.base] * (0.9 if c.detector != "none" else 1.0) + s}
            for c in exp.cells for s in exp.seeds]
    comp = compare(pd.DataFrame(rows), exp.reference, exp.is_sweep)
    jct = comp[comp.metric == "jct"].set_index("cell")
    mean_seed = sum(exp.seeds) / len(exp.seeds)
    for base, b in base_jct.items():
        assert jct.loc[f"{base}+EvalStop-2", "reference"] == base
        assert jct.loc[f"{base}+EvalStop-2", "delta_pct"] == pytest.approx(
            100 * 0.1 * b / (b + mean_seed))
        assert jct.loc[base, "reference"] == base
    named = compare(pd.DataFrame(rows), {"base": "SRTF-Est", "detector": "none"})
    assert set(named["reference"]) == {"SRTF-Est"}   # a reference naming its base is kept
