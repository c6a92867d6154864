"""EvalStopPruner in real Optuna studies: declining trials pruned, rising ones complete."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402

from evalstop_gym.integrations.optuna import EvalStopPruner  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "optuna_study.py"))


def outcome(study) -> dict[float, tuple[str, int]]:
    return {t.params["x"]: (t.state.name, t.last_step) for t in study.trials}


def test_declining_trials_are_pruned_and_rising_ones_complete():
    result = outcome(EXAMPLE["main"]())
    for x, (state, last) in result.items():
        assert state == ("PRUNED" if x < 0.5 else "COMPLETE"), x
        assert last == (10 if x < 0.5 else 20)       # peak at step 8, two declines, pruned


def test_minimize_direction_is_read_from_the_study():
    study = optuna.create_study(direction="minimize", pruner=EvalStopPruner("EvalStop-2"))
    losses = [1.0, 0.7, 0.5, 0.6, 0.7, 0.8]

    def objective(trial):
        for step, loss in enumerate(losses, 1):
            trial.report(loss, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return losses[-1]
    study.optimize(objective, n_trials=1)
    assert study.trials[0].state == TrialState.PRUNED and study.trials[0].last_step == 5


def test_composes_with_patient_pruner():
    bare = outcome(EXAMPLE["main"](EvalStopPruner("EvalStop-1", max_steps=20)))
    patient = outcome(EXAMPLE["main"](optuna.pruners.PatientPruner(
        EvalStopPruner("EvalStop-1", max_steps=20), patience=3)))
    for x in bare:
        assert bare[x][0] == patient[x][0] == ("PRUNED" if x < 0.5 else "COMPLETE")
        if x < 0.5:
            assert bare[x][1] == 9 and patient[x][1] == 12    # 3 reports without a new best


def test_cross_trial_detector_learns_from_the_studys_completed_trials():
    xs = (0.9, 0.8, 0.55, 0.95)     # rising trials; 0.55 stays below its completed peers
    result = outcome(EXAMPLE["main"](EvalStopPruner("MedianPruner-50-2", max_steps=20), xs))
    assert result[0.9][0] == result[0.8][0] == "COMPLETE"    # no peers yet: nothing to compare
    assert result[0.55] == ("PRUNED", 6)                     # first report past 30% warm-up
    assert result[0.95][0] == "COMPLETE"                     # above its peers: kept


def test_a_report_past_max_steps_is_skipped_not_a_failed_trial(caplog):
    pruner = EvalStopPruner("EvalStop-2", max_steps=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)

    def objective(trial):
        for step in range(1, 16):                  # five reports past max_steps=10
            trial.report(step / 15, step)
            if trial.should_prune():
                raise optuna.TrialPruned()
        return 1.0
    with caplog.at_level("WARNING"):
        study.optimize(objective, n_trials=1)
    assert study.trials[0].state == TrialState.COMPLETE             # used to be FAIL
    assert sum("past max_steps=10; skipped" in r.getMessage() for r in caplog.records
               if r.levelname == "WARNING") == 1


@pytest.mark.parametrize("name", ["EvalStop-2", "MedianPruner-50-2"])
def test_finished_trials_monitors_are_dropped(name):
    pruner = EvalStopPruner(name, max_steps=10)
    study = optuna.create_study(direction="maximize", pruner=pruner)

    def objective(trial):
        for step in range(1, 11):
            trial.report(step / 10 * (1 + trial.number % 3), step)
            if trial.should_prune():
                raise optuna.TrialPruned()
            if trial.number % 7 == 3 and step == 2:
                raise RuntimeError("a failed trial")   # FAIL: never learnt from, still dropped
        return 1.0
    study.optimize(objective, n_trials=40, catch=(RuntimeError,))
    assert len(study.trials) == 40
    assert set(pruner._monitors) <= {39}               # only the last trial's (used to be 40)
