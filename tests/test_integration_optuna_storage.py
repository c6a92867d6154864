"""EvalStopPruner's Optuna arguments, its user_attrs, and decisions rebuilt from the storage."""

from __future__ import annotations

import runpy
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

optuna = pytest.importorskip("optuna")
from optuna.trial import TrialState  # noqa: E402
from sweep_gate import finish, start  # noqa: E402

from evalstop_gym.integrations.optuna import EvalStopPruner, asked_at  # noqa: E402

ROOT = Path(__file__).parents[1]
EXAMPLE = runpy.run_path(str(ROOT / "examples" / "optuna_study.py"))
XS = (0.1, 0.6, 0.2, 0.7, 0.3, 0.8, 0.4, 0.9)


def outcome(study) -> dict[float, tuple[str, int, dict]]:
    return {t.params["x"]: (t.state.name, t.last_step, t.user_attrs) for t in study.trials}


def test_n_warmup_steps_and_interval_steps_delay_the_prune():
    plain = outcome(EXAMPLE["main"](EvalStopPruner("EvalStop-2", max_steps=20)))
    late = outcome(EXAMPLE["main"](EvalStopPruner("EvalStop-2", max_steps=20,
                                                  n_warmup_steps=12)))
    spaced = outcome(EXAMPLE["main"](EvalStopPruner("EvalStop-2", max_steps=20,
                                                    interval_steps=7)))
    for x in XS:
        if x >= 0.5:
            assert plain[x][0] == late[x][0] == spaced[x][0] == "COMPLETE"
            continue
        assert plain[x][1] == 10
        assert late[x][:2] == ("PRUNED", 12)       # not asked before step 12
        assert spaced[x][:2] == ("PRUNED", 14)     # asked at steps 1, 7, 14


def test_n_startup_trials_waits_for_completed_trials():
    xs = (0.1, 0.9, 0.2)
    result = outcome(EXAMPLE["main"](EvalStopPruner("EvalStop-2", max_steps=20,
                                                    n_startup_trials=1), xs))
    assert result[0.1][:2] == ("COMPLETE", 20)     # no trial has completed yet
    assert result[0.2][:2] == ("PRUNED", 10)


def test_asked_at_follows_optunas_interval_rule():
    asked = [s for s, prev in zip(range(1, 21), [None, *range(1, 20)], strict=True)
             if asked_at(s, prev, 3, 5)]
    assert asked == [3, 8, 13, 18]
    assert asked_at(9, 2, 3, 5)                    # the first report in the 8-12 interval


def test_a_pruned_trial_records_its_best_step_and_value():
    study = EXAMPLE["main"](EvalStopPruner("EvalStop-2", max_steps=20))
    for t in study.trials:
        if t.state == TrialState.PRUNED:
            best = max(t.intermediate_values, key=t.intermediate_values.get)
            assert t.user_attrs["evalstop_best_step"] == best == 8
            assert t.user_attrs["evalstop_best_value"] == t.intermediate_values[best]
            assert t.user_attrs["evalstop_stop_step"] == t.last_step
            assert t.value == t.intermediate_values[t.last_step]   # Optuna's: the last value
        else:
            assert not t.user_attrs


class Forgetful(EvalStopPruner):
    """Drops its cache before every call: what a fresh worker process sees."""

    def prune(self, study, trial):
        self._studies.clear()
        return super().prune(study, trial)


@pytest.mark.parametrize("name", ["EvalStop-2", "MedianPruner-50-2"])
def test_the_cache_is_only_an_optimisation(name):
    xs = (0.9, 0.8, 0.55, 0.3, 0.95, 0.1)
    cached = outcome(EXAMPLE["main"](EvalStopPruner(name, max_steps=20, interval_steps=2), xs))
    fresh = outcome(EXAMPLE["main"](Forgetful(name, max_steps=20, interval_steps=2), xs))
    assert cached == fresh
    assert any(state == "PRUNED" for state, _, _ in cached.values())


WORKER = textwrap.dedent("""
    import sys, time
    import optuna
    from evalstop_gym.integrations.optuna import EvalStopPruner
    sys.path.insert(0, {examples!r})
    from optuna_study import curve, STEPS

    XS = {xs!r}

    def objective(trial):
        x = XS[trial.number]          # by number, not enqueued: two workers may race to pop
        for step in range(1, STEPS + 1):
            trial.report(curve(x, step), step)
            time.sleep(0.01)                    # let the two workers' trials interleave
            if trial.should_prune():
                raise optuna.TrialPruned()
        return curve(x, STEPS)

    optuna.logging.set_verbosity(optuna.logging.WARNING)
    storage = optuna.storages.RDBStorage(sys.argv[1],
                                         engine_kwargs={{"connect_args": {{"timeout": 120}}}})
    study = optuna.load_study(study_name="s", storage=storage,
                              pruner=EvalStopPruner("EvalStop-2", max_steps=STEPS,
                                                    n_warmup_steps=3, interval_steps=2))
    study.optimize(objective, n_trials=int(sys.argv[2]))
""")


def run_workers(tmp_path: Path, name: str, n_workers: int) -> dict:
    storage = f"sqlite:///{tmp_path / name}.db"
    optuna.create_study(study_name="s", storage=storage, direction="maximize")
    code = WORKER.format(examples=str(ROOT / "examples"), xs=XS)
    procs = [start([sys.executable, "-c", code, storage, str(len(XS) // n_workers)],
                   stderr=subprocess.PIPE, text=True) for _ in range(n_workers)]
    for i, proc in enumerate(procs):
        _, err = finish(proc, f"optuna worker {i} of {n_workers}")
        assert proc.returncode == 0, err
    trials = optuna.load_study(study_name="s", storage=storage).trials
    return {XS[t.number]: (t.state.name, t.last_step, t.user_attrs) for t in trials}


def test_two_worker_processes_on_one_sqlite_storage_prune_as_one(tmp_path):
    one = run_workers(tmp_path, "one", 1)
    two = run_workers(tmp_path, "two", 2)
    assert two == one
    assert sorted(x for x, (state, _, _) in one.items() if state == "PRUNED") == [0.1, 0.2,
                                                                                 0.3, 0.4]


@pytest.mark.parametrize("kwargs, message", [
    ({"n_startup_trials": -1}, "n_startup_trials=-1: expected an int >= 0"),
    ({"n_warmup_steps": 1.5}, "n_warmup_steps=1.5: expected an int >= 0"),
    ({"interval_steps": 0}, "interval_steps=0: expected an int >= 1"),
    ({"verbose": 1}, "verbose=1: expected True or False"),
])
def test_optuna_arguments_are_checked_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopPruner(**kwargs)


def test_the_prune_is_a_warning_and_verbose_logs_each_judgement(caplog):
    study = optuna.create_study(direction="maximize",
                                pruner=EvalStopPruner("EvalStop-2", max_steps=20, verbose=True))
    study.enqueue_trial({"x": 0.1})
    optuna.logging.enable_propagation()
    try:
        with caplog.at_level("INFO", logger="optuna"):
            study.optimize(EXAMPLE["objective"], n_trials=1)
    finally:
        optuna.logging.disable_propagation()
    lines = [r for r in caplog.records if "EvalStopPruner: prune trial 0 at step 10" in
             r.getMessage()]
    assert lines and lines[0].name.startswith("optuna.") and lines[0].levelname == "WARNING"
    assert len({(r.created, r.getMessage()) for r in lines}) == 1     # once per pruned trial
    going = [r for r in caplog.records if "EvalStopPruner: trial 0 continues" in r.getMessage()]
    assert going and {r.levelname for r in going} == {"INFO"}
    trial = study.trials[0]
    assert trial.state == optuna.trial.TrialState.PRUNED
    assert trial.user_attrs["evalstop_stop_step"] == 10      # the evidence, with the trial
