"""which_detector: the quick run's table structure, the recommendation rule, and the BEYOND.md
markers round-tripping; the Bayes oracle reads the config, not labels."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from evalstop_gym.benchmarks import sections
from evalstop_gym.benchmarks.detectors import which_detector as wd
from evalstop_gym.benchmarks.detectors import which_study as study
from evalstop_gym.benchmarks.detectors import which_summary as ws
from evalstop_gym.benchmarks.detectors.oracle import BayesOracle
from evalstop_gym.benchmarks.detectors.trend_cost import trend_cost
from evalstop_gym.policies import DETECTORS, ComposedPolicy, PolicyNameError, SRTFEst, make_detector
from evalstop_gym.simulate import resolve_config, simulate

# public-run columns that pass the safety rule and tie, so simulated recall decides
SAFE = {"design_recall": 0.5, "design_false_stops": 0.0, "fpr": 0.0}


@pytest.fixture(scope="module")
def quick(tmp_path_factory):
    out = tmp_path_factory.mktemp("which")
    beyond = out / "BEYOND.md"
    beyond.write_text("# Beyond\n\nbefore\n")
    wd.main(["--quick", "--seeds", "1", "--detectors", "TrendTest-0.05", "--out", str(out),
             "--beyond", str(beyond)])
    return out, beyond


def test_the_quick_run_renders_one_table_per_density(quick) -> None:
    out, _ = quick
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary.density) == set(wd.DENSITIES)
    assert set(summary.detector) == {"TrendTest-0.05", study.ORACLE}
    section = (out / "which_detector.md").read_text()
    assert section.startswith(wd.START + "\n## Which detector?")
    assert section.count("| detector | recall | early |") == len(wd.DENSITIES)
    assert section.count("| TrendTest-0.05 |") == 2 * len(wd.DENSITIES)   # and the public table
    assert "**Default** (`DEFAULT_DETECTOR`" in section
    oracle = summary[summary.detector == study.ORACLE]
    assert (oracle.share_of_oracle.dropna() == 1.0).all()


def test_the_section_round_trips_between_the_markers(quick) -> None:
    out, beyond = quick
    section = (out / "which_detector.md").read_text()
    text = beyond.read_text()
    assert text.startswith("# Beyond\n\nbefore\n") and text.endswith(section)
    again = sections.replace(text + "\nafter\n", sections.WHICH_DETECTOR, section)
    assert again == text + "\nafter\n"
    other = sections.replace(again, sections.WHICH_DETECTOR, f"{wd.START}\nnew\n{wd.END}\n")
    assert other == "# Beyond\n\nbefore\n\n" + f"{wd.START}\nnew\n{wd.END}\n" + "\nafter\n"


def test_the_recommendation_needs_safety_at_every_density() -> None:
    rows = []
    for density in wd.DENSITIES:
        rows += [{"density": density, "detector": "A", "recall": 0.9, "ar1_fpr": 0.01,
                  "corpus_false_stops": 0.05 if density == "15%" else 0.0, **SAFE},
                 {"density": density, "detector": "B", "recall": 0.7, "ar1_fpr": 0.01,
                  "corpus_false_stops": 0.0, **SAFE}]
    name, why = ws.recommend(pd.DataFrame(rows))
    assert name == "B" and "70.0%" in why


def test_the_oracle_is_not_a_detector_a_user_can_pick() -> None:
    assert not any("oracle" in name.lower() for name in DETECTORS)
    with pytest.raises(PolicyNameError):
        make_detector("Oracle")
    with pytest.raises(ValueError, match="threshold must be in"):
        BayesOracle(resolve_config("e2"), threshold=1.0)


def test_bad_options_fail_in_one_line_before_any_run(capsys) -> None:
    with pytest.raises(SystemExit):
        wd.main(["--n-jobs", "0"])
    assert "--n-jobs 0: expected a whole number >= 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        wd.main(["--detectors", "NoSuch-1"])
    assert "NoSuch" in capsys.readouterr().err
    with pytest.raises(SystemExit):   # the document the section goes into must exist
        wd.main(["--beyond", "no/such/BEYOND.md"])
    assert "--beyond no/such/BEYOND.md: no such file" in capsys.readouterr().err


def test_regenerating_beyond_keeps_the_which_detector_section(tmp_path):
    """write_beyond re-renders BEYOND.md from the sweeps; the section this command wrote stays."""
    from evalstop_gym.benchmarks.detectors.which_detector import END, START

    old = tmp_path / "BEYOND.md"
    section = f"{START}\n## Which detector?\n\nmeasured rows\n{END}\n"
    old.write_text("# Beyond\n\nold tables\n\n" + section)
    new = sections.carried_over("# Beyond\n\nnew tables\n", old)
    assert new == "# Beyond\n\nnew tables\n\n" + section
    assert sections.carried_over("# Beyond\n", tmp_path / "absent.md") == "# Beyond\n"


def test_trend_cost_reports_calibration_and_per_eval_cost() -> None:
    """--trend-cost's table: one row per size, the calibration from cold and the live updates."""
    cost = trend_cost((40,))
    assert list(cost.evals) == [40]
    assert (cost[["calibration_s", "calibration_peak_mb", "us_per_eval", "monitor_peak_mb"]]
            > 0).all(axis=None)


def test_a_detector_whose_budget_rests_on_peers_is_never_the_default() -> None:
    rows = []
    for density in wd.DENSITIES:
        rows += [{"density": density, "detector": "PeerPrior-0.05", "recall": 0.8,
                  "ar1_fpr": 0.01, "corpus_false_stops": 0.0, **SAFE},
                 {"density": density, "detector": "TrendTest-0.05", "recall": 0.7,
                  "ar1_fpr": 0.01, "corpus_false_stops": 0.0, **SAFE}]
    summary = pd.DataFrame(rows)
    assert ws.recommend(summary)[0] == "PeerPrior-0.05"
    assert ws.recommend(summary, alone=True)[0] == "TrendTest-0.05"
    default, _, grouped = ws.recommendation_lines(summary)
    assert "`TrendTest-0.05`" in default and "`PeerPrior-0.05`" in grouped


def test_the_default_detector_is_the_one_beyond_md_recommends() -> None:
    """BEYOND.md's generated section names the default; online.DEFAULT_DETECTOR follows it."""
    from evalstop_gym.online import DEFAULT_DETECTOR

    text = (Path(__file__).parents[1] / "BEYOND.md").read_text(encoding="utf-8")
    section = text[text.index(wd.START):text.index(wd.END)]
    line = next(x for x in section.splitlines() if x.startswith("**Default"))
    assert f"`{DEFAULT_DETECTOR}`" in line


def test_the_oracle_at_a_matched_fpr_keeps_within_it_and_takes_all_it_allows() -> None:
    from evalstop_gym.benchmarks.detectors.oracle import recall_at_fpr

    rng = np.random.default_rng(0)
    healthy, hacking = rng.uniform(0, 0.9, 200), rng.uniform(0.5, 1.0, 100)
    for fpr in (0.0, 0.01, 0.05, 0.5):
        threshold, recall = recall_at_fpr(healthy, hacking, fpr)
        assert np.mean(healthy > threshold) <= fpr
        assert recall == np.mean(hacking > threshold)
        # one healthy peak fewer above the threshold would be the next lower one: past the FPR
        lower = np.sort(healthy)[::-1][int(np.floor(fpr * len(healthy))) + 1]
        assert np.mean(healthy > lower) > fpr
    assert recall_at_fpr(healthy, hacking, 1.0)[1] == 1.0


def test_a_recording_oracle_never_stops_and_keeps_each_jobs_peak() -> None:
    config = resolve_config("e2", {"workload.n_jobs": 30})
    oracle = BayesOracle(config, threshold=None)
    result = simulate(config, ComposedPolicy(oracle, SRTFEst()), 1)
    assert result.metrics["n_stopped"] == 0
    rlhf = [r for r in result.records if r["job_type"] == "rlhf"]
    assert {r["job_id"] for r in rlhf} == set(oracle.peaks)
    assert all(0.0 <= early <= peak <= 1.0 for peak, early in oracle.peaks.values())


def test_an_interrupted_study_resumes_with_the_same_rows(quick, tmp_path, monkeypatch) -> None:
    """Ctrl-C after four simulated runs: those four are saved, the command exits 130; the same
    command again runs only the rest and writes the rows an uninterrupted study wrote."""
    from evalstop_gym.benchmarks.sweep import runner

    reference, _ = quick
    real, calls = runner.run_one, []

    def interrupted(spec):
        if len(calls) == 4:
            raise KeyboardInterrupt
        calls.append((spec.experiment, spec.seed))
        return real(spec)

    argv = ["--quick", "--seeds", "1", "--detectors", "TrendTest-0.05", "--out", str(tmp_path)]
    monkeypatch.setattr(runner, "run_one", interrupted)
    assert wd.main(argv) == 130
    assert len(list((tmp_path / "runs").glob("*/runs/*.json"))) == 4
    assert not (tmp_path / "simulated.csv").exists()
    resumed = []
    monkeypatch.setattr(runner, "run_one",
                        lambda spec: resumed.append((spec.experiment, spec.seed)) or real(spec))
    assert wd.main(argv) == 0
    assert len(resumed) == len(study.NOISES) * len(study.DENSITIES) - 4
    assert not set(resumed) & set(calls)
    for name in ("simulated.csv", "oracle_jobs.csv", "summary.csv"):
        assert (tmp_path / name).read_bytes() == (reference / name).read_bytes(), name


def test_the_quick_run_judges_public_runs_and_draws_them(quick) -> None:
    out, beyond = quick
    summary = pd.read_csv(out / "summary.csv")
    row = summary[summary.detector == "TrendTest-0.05"]
    assert set(study.PUBLIC_COLUMNS) <= set(summary.columns)
    assert row[["design_recall", "design_false_stops"]].notna().any(axis=None)
    section = (out / "which_detector.md").read_text()
    assert "### Real public runs" in section and section.count("| TrendTest-0.05 | ") >= 8
    assert (beyond.parent / "figures" / "beyond_public.png").stat().st_size > 0


def test_the_default_is_named_by_real_runs_within_every_budget() -> None:
    """A detector that stops public healthy runs, or breaks the simulator's FPR, is never the
    default, however high its recall; of the safe ones the best on public declines wins."""
    rows = []
    for density in wd.DENSITIES:
        base = {"density": density, "ar1_fpr": 0.01, "corpus_false_stops": 0.0, "fpr": 0.0,
                "design_false_stops": 0.0}
        rows += [{**base, "detector": "Loud-1", "recall": 0.99, "design_recall": 0.99,
                  "design_false_stops": 0.04 if density == "native" else 0.0},
                 {**base, "detector": "Noisy-1", "recall": 0.95, "design_recall": 0.95,
                  "fpr": 0.02},
                 {**base, "detector": "Real-1", "recall": 0.6, "design_recall": 0.8},
                 {**base, "detector": "Sim-1", "recall": 0.9, "design_recall": 0.5}]
    name, why = ws.recommend(pd.DataFrame(rows), alone=True)
    assert name == "Real-1" and "80.0%" in why


def test_the_default_is_held_to_its_targets_met_or_missed_by_number() -> None:
    """Each target is reported with the measured number and met or missed: a recall just under
    its target is missed, false stops at the budget are met."""
    rows = [{"density": d, "detector": "Real-1", "test_recall": target - 0.01 * (d == "15%"),
             "test_false_stops": study.MAX_PUBLIC_FALSE_STOPS, "recall": study.E2_RECALL_PROMISE}
            for d, target in study.RECALL_TARGETS.items()]
    text = " ".join(ws.target_lines(pd.DataFrame(rows), "Real-1"))
    assert "test recall at 15% >= 50.0%: 49.0% (missed)" in text
    assert "test recall at native >= 70.0%: 70.0% (met)" in text
    assert text.count("(met)") == 8 and text.count("(missed)") == 1
    assert ws.target_lines(pd.DataFrame(rows).drop(columns="test_recall"), "Real-1") == []
