"""`evalstop-bench calibrate`: a tiny search writes its outputs, resumes, and refuses a mix-up."""

from __future__ import annotations

from pathlib import Path

import optuna
import pandas as pd
import pytest
import yaml

from evalstop_gym.benchmarks.cli import main
from evalstop_gym.benchmarks.sweep.calibrate import CONSTANTS, TARGETS, Search, misfit

TINY = ["--seeds", "1", "2", "--n-jobs", "30", "--validation-seeds", "1"]


def study_trials(out: Path) -> list:
    study = optuna.load_study(study_name="e2-fit", storage=f"sqlite:///{out / 'study.sqlite'}")
    return [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]


def test_tiny_calibration_writes_its_outputs_and_resumes(tmp_path: Path) -> None:
    out = tmp_path / "cal"
    assert main(["calibrate", "--out", str(out), "--trials", "2", *TINY]) == 0
    first = study_trials(out)
    defaults = Search([1], None).defaults()
    assert len(first) == 2 and first[0].params == pytest.approx(defaults)
    sens = pd.read_csv(out / "sensitivity.csv")
    assert list(sens["constant"]) == [c.name for c in CONSTANTS]
    best = yaml.safe_load((out / "best.yaml").read_text())
    assert best["misfit"] <= best["misfit_at_defaults"] + 1e-9   # the defaults are trial 0
    text = (out / "calibration.md").read_text()
    assert "Validation (not fitted)" in text and "E3: At 10% RLHF" in text
    # a second run with more trials runs only the missing one, on the same stored study
    assert main(["calibrate", "--out", str(out), "--trials", "3", *TINY]) == 0
    again = study_trials(out)
    assert len(again) == 3 and [t.params for t in again[:2]] == [t.params for t in first]


def test_resuming_with_other_seeds_is_refused(tmp_path: Path, capsys) -> None:
    out = tmp_path / "cal"
    args = ["calibrate", "--out", str(out), "--trials", "1", "--constants", "sigma"]
    assert main([*args, *TINY]) == 0
    assert main([*args, "--seeds", "3", "--n-jobs", "30", "--validation-seeds", "1"]) == 2
    assert "other settings" in capsys.readouterr().err


def test_misfit_is_zero_on_the_papers_figures_and_grows_with_a_miss() -> None:
    paper = {t.name: t.paper for t in TARGETS}
    bounds = {"evalstop_precision": 0.98, "evalstop_recall": 0.99, "evalstop_fpr_all": 0.01}
    assert misfit({**paper, **bounds}) == 0.0
    one_tol = {**paper, **bounds, "srtf_jct": 1124 + 112.4}
    assert misfit(one_tol) == pytest.approx(1.0)
    assert misfit({**paper, **bounds, "evalstop_precision": 0.90}) == pytest.approx(1.0)


@pytest.mark.parametrize("argv", [
    [],
    ["--trials", "5", *TINY, "--sampler-seed", "7", "--constants", "sigma", "tau"],
])
def test_the_printed_command_reproduces_the_search(argv: list[str]) -> None:
    """calibration.md (and REPRODUCTION.md) print command(): parsed again, it must give the
    same search (seeds, sampler seed, validation seeds, size, constants, trials)."""
    import argparse

    from evalstop_gym.benchmarks.sweep import calibrate

    parser = argparse.ArgumentParser()
    calibrate.add_arguments(parser)
    args = parser.parse_args(argv)
    printed = calibrate.command(args)
    assert any(p.startswith("--seeds ") for p in printed)
    again = parser.parse_args(" ".join(printed).split())
    assert vars(again) == vars(args)


def test_targets_and_bounds_are_read_from_the_claims_table() -> None:
    """E2's figures are typed once (paper_claims.E2_FIGURES): calibrate fits the same values and
    tolerances the claims judge."""
    from evalstop_gym.benchmarks.analysis.paper_claims import E2_FIGURES
    from evalstop_gym.benchmarks.sweep.calibrate import BOUNDS

    for t in TARGETS:
        assert (t.paper, t.tol) == E2_FIGURES[t.name][:2] and E2_FIGURES[t.name].sense == 0
    for name, value, sign, scale in BOUNDS:
        assert E2_FIGURES[name] == (value, scale, sign)
    assert {t.name for t in TARGETS} | {b[0] for b in BOUNDS} <= set(E2_FIGURES)
