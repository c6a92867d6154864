"""Tables and verdicts name the test behind their p, and use the paired one where seeds pair."""

from __future__ import annotations

import math
from pathlib import Path

import pandas as pd
from scipy import stats as st

from evalstop_gym.benchmarks.analysis.claims import REPRO, SAME, Stat, delta
from evalstop_gym.benchmarks.analysis.tables import experiment_markdown, fmt_p, table_frame

REF = {"base": "SRTF-Est", "detector": "none"}
# Seeds whose workloads differ a lot, and a cell 5% faster on each (a steady paired gain that
# the spread between seeds hides from Welch's test).
WORKLOAD = {42: 900.0, 123: 1300.0, 456: 1000.0, 789: 1450.0, 1024: 1100.0}
FASTER = {s: v * 0.95 + (4.0 if i % 2 else -3.0) for i, (s, v) in enumerate(WORKLOAD.items())}


def e2_like(cell_seeds: dict[int, float] = FASTER) -> pd.DataFrame:
    rows = []
    for det, jcts in (("none", WORKLOAD), ("EvalStop-2", cell_seeds)):
        policy = "SRTF-Est" if det == "none" else f"{det}+SRTF-Est"
        rows += [{"experiment": "e2", "cell": policy, "label": "", "policy": policy,
                  "base": "SRTF-Est", "detector": det, "seed": s, "jct": v, "ttfuc": v,
                  "wasted_frac": 0.3, "saved_frac": 0.0, "recall": 0.9,
                  "precision": math.nan if det == "none" else 0.9,   # no stops: undefined
                  "fpr": 0.5, "fpr_all": 0.1, "jain": 0.99, "n_stopped": 3.0}
                 for s, v in jcts.items()]
    return pd.DataFrame(rows)


def test_table_p_column_is_the_paired_p_and_the_note_says_so():
    runs = e2_like()
    frame = table_frame(runs, REF, False).set_index("cell")
    paired = st.ttest_rel(list(FASTER.values()), list(WORKLOAD.values())).pvalue
    welch = st.ttest_ind(list(FASTER.values()), list(WORKLOAD.values()), equal_var=False).pvalue
    assert fmt_p(paired) != fmt_p(welch)
    assert frame.loc["EvalStop-2+SRTF-Est", "p(jct)"] == fmt_p(paired)
    md = experiment_markdown("E2", runs, REF, False)
    assert "paired t-test over the seeds each cell shares with its reference" in md
    assert "Welch" not in md


def test_table_note_names_welch_where_seeds_do_not_pair():
    other = {s + 1: v for s, v in FASTER.items()}
    runs = e2_like(other)
    md = experiment_markdown("E2", runs, REF, False)
    assert "Welch's t-test" in md and "paired" not in md
    welch = st.ttest_ind(list(other.values()), list(WORKLOAD.values()), equal_var=False).pvalue
    assert table_frame(runs, REF, False).set_index("cell").loc[
        "EvalStop-2+SRTF-Est", "p(jct)"] == fmt_p(welch)


def _stat(values: dict[int, float]) -> Stat:
    vals = list(values.values())
    return Stat(sum(vals) / len(vals), 0.0, len(vals), vals, tuple(values))


def test_a_stated_change_is_judged_on_the_paired_p():
    """The same +5% gain: significant over paired seeds (reproduced), not over unknown seeds
    (Welch: only the same direction), and the row names the test."""
    cell, ref = _stat(FASTER), _stat(WORKLOAD)
    row = delta("E2", "c", "jct", cell, ref, 5.0, 3, +1)
    assert row.verdict == REPRO and "paired p" in row.ours
    unpaired = delta("E2", "c", "jct", cell._replace(seeds=()), ref, 5.0, 3, +1)
    assert unpaired.verdict == SAME and "not significant" in unpaired.why
    assert "Welch p" in unpaired.ours


def test_reproduction_header_states_the_paired_rule(tmp_path: Path):
    from evalstop_gym.benchmarks.report.reproduction import render

    text = render({}, tmp_path, 0.0, 0.0, "evalstop-bench report")
    assert "paired t-test on per-seed differences" in text
    assert "Welch's t-test only where a cell shares fewer than two seeds" in text


def test_jain_check_uses_the_paired_test():
    from evalstop_gym.benchmarks.analysis.paper_claims import e2

    runs = e2_like()
    assert not math.isnan(runs["jain"].iloc[0])
    rows = {r.claim: r for r in e2(_with_e2_cells(runs))}
    jain = rows["Jain's index with EvalStop within noise of SRTF-Est"]
    assert "paired p" in jain.ours and jain.why.startswith("paired t-test")


def _with_e2_cells(runs: pd.DataFrame) -> pd.DataFrame:
    """E2's other policies (their figures do not matter here), so e2() finds every cell."""
    base = runs[runs["policy"] == "SRTF-Est"]
    extra = [base.assign(policy=p, cell=p) for p in (
        "StopAt-0.5+SRTF-Est", "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est", "EvalSched")]
    jain = runs.assign(jain=[0.99 + 0.001 * (i % 3) for i in range(len(runs))])
    return pd.concat([jain, *extra], ignore_index=True)



SIGMAS = (0.01, 0.02, 0.03, 0.05, 0.08, 0.12)
LONG = "model:" + "runs/a_rather_long_folder_name/ppo_stop_seed20000_normalised" * 2


def sweep_like() -> pd.DataFrame:
    """E7's shape: three policies (one with a very long name) crossed with six noise levels."""
    rows = []
    for value in SIGMAS:
        for det in ("EvalStop-2", "StopAt-0.65", LONG):
            policy = f"{det}+SRTF-Est"
            rows += [{"experiment": "e7", "cell": f"{policy}__noise.sigma={value}", "label": "",
                      "policy": policy, "base": "SRTF-Est", "detector": det,
                      "param": "noise.sigma", "value": value, "seed": s,
                      "jct": 1000.0 + 10 * s + 100 * value, "ttfuc": 1.0, "wasted_frac": 0.1,
                      "saved_frac": 0.0, "precision": 0.8, "recall": 0.5, "fpr": 0.01,
                      "fpr_all": 0.01, "jain": 0.9, "n_stopped": 3.0} for s in (1, 2, 3)]
    return pd.DataFrame(rows)


def test_swept_value_is_a_column_never_cut():
    """Every row of both tables shows its sigma in full, beside a short row label."""
    from evalstop_gym.benchmarks.analysis.tables import terminal_table

    runs, ref = sweep_like(), {"detector": "EvalStop-2"}
    md = experiment_markdown("E7", runs, ref, True)
    header = md.splitlines()[4]
    assert header.startswith("| cell | noise.sigma | JCT (min)")
    lines = [line for line in md.splitlines() if line.startswith("| EvalStop-2")]
    assert [line.split(" | ")[1] for line in lines] == [repr(v) for v in SIGMAS]
    assert "__noise.sigma" not in md
    text = terminal_table(runs, ref, True)
    term = text.split("\n\n")[0].splitlines()
    assert term[0].split()[:3] == ["over", "SRTF-Est", "sigma"]   # the base all rows share
    assert max(map(len, text.splitlines())) <= 100
    rows = term[1:]
    assert len(rows) == 3 * len(SIGMAS)
    for i, value in enumerate(v for v in SIGMAS for _ in range(3)):
        assert f" {value!r} " in rows[i]
    assert [r.split()[0] for r in rows[:2]] == ["EvalStop-2", "StopAt-0.65"]
    long_rows = [r for r in rows if r.startswith("model:")]
    assert len(long_rows) == len(SIGMAS) and all("…" in r for r in long_rows)


def test_terminal_table_shows_both_fprs_labelled():
    """`fpr` (healthy RLHF) and the paper's (all non-hacking) side by side, with a legend;
    rows over different bases keep their full names under 'cell'."""
    from evalstop_gym.benchmarks.analysis.tables import terminal_table

    runs = e2_like()
    runs.loc[runs["detector"] == "EvalStop-2", ["fpr", "fpr_all"]] = [0.9, 0.4]
    other = runs[runs["detector"] == "none"].assign(base="FIFO", policy="FIFO", cell="FIFO")
    text = terminal_table(pd.concat([runs, other]), REF, False)
    table, legend = text.split("\n\n")
    head, *rows = table.splitlines()
    titles = head.split()
    assert titles[0] == "cell" and titles.index("FPR-all%") == titles.index("FPR%") + 1
    row = dict(zip(titles[1:], rows[1].split()[1:], strict=False))
    assert rows[1].startswith("EvalStop-2+SRTF-Est")
    assert (row["FPR%"], row["FPR-all%"]) == ("90.0±0.0", "40.0±0.0")
    assert "FPR: FP / healthy RLHF jobs" in legend and "FPR-all: FP / all non-hacking" in legend


def test_vs_names_the_reference_row_and_a_value_it_moved_to():
    """At the same sigma the reference is its label; a fixed reference shows its own sigma."""
    runs = sweep_like()
    same = table_frame(runs, {"detector": "EvalStop-2"}, True)
    assert set(same["vs"]) == {"EvalStop-2+SRTF-Est"}
    fixed = table_frame(runs, {"detector": "EvalStop-2", "value": 0.05}, True)
    at = fixed.set_index(["cell", "noise.sigma"])["vs"]
    assert at[("StopAt-0.65+SRTF-Est", "0.01")] == "EvalStop-2+SRTF-Est (noise.sigma=0.05)"
    assert at[("StopAt-0.65+SRTF-Est", "0.05")] == "EvalStop-2+SRTF-Est"
