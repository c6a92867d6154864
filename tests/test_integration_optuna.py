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
    result = outcome(EXAMPLE["main"](detector="EvalStop-2"))
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
    live = {n for state in pruner._studies.values() for n in state.monitors}
    assert live <= {39}                                # only the last trial's (used to be 40)


def test_one_pruner_for_two_studies_keeps_them_apart():
    """Study 2's trial 1 used to inherit study 1's trial-1 monitor and be pruned at once."""
    pruner = EvalStopPruner("EvalStop-2", max_steps=20)
    first = outcome(EXAMPLE["main"](pruner))
    second = outcome(EXAMPLE["main"](pruner))
    assert second == first
    assert all(last == (10 if x < 0.5 else 20) for x, (_, last) in second.items())
    assert len(pruner._studies) == 2


def test_a_cross_trial_detector_learns_only_from_its_own_study():
    pruner = EvalStopPruner("MedianPruner-50-2", max_steps=20)
    EXAMPLE["main"](pruner, (0.9, 0.8, 0.95))           # strong peers in study 1
    result = outcome(EXAMPLE["main"](pruner, (0.55,)))  # study 2 has none: nothing to compare
    assert result[0.55] == ("COMPLETE", 20)


@pytest.mark.parametrize("kwargs, message", [
    ({"detector": "StopAt-0.5"}, "max_steps=None: StopAt-0.5 reads progress"),
    ({"detector": "MedianPruner"}, "max_steps=None: MedianPruner reads progress"),
    ({"max_steps": "20"}, "max_steps='20'"),
    ({"max_steps": 0}, "max_steps=0: expected a number > 0"),
    ({"detector": "Nope-1"}, "detector 'Nope-1' is unknown"),
    ({"job_type": 3}, "job_type=3"),
])
def test_bad_or_inert_arguments_are_refused_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopPruner(**kwargs)
    EvalStopPruner("DeclineTest-0.05")       # reads progress but falls back without it: allowed


def test_the_default_detector_is_the_one_default():
    import inspect

    from evalstop_gym.online import DEFAULT_DETECTOR

    assert inspect.signature(EvalStopPruner).parameters["detector"].default == DEFAULT_DETECTOR
    assert EvalStopPruner().detector == DEFAULT_DETECTOR
    assert inspect.signature(EXAMPLE["main"]).parameters["detector"].default == DEFAULT_DETECTOR
