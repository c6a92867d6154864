"""EvalStopScheduler in a real local Ray Tune run (2 CPUs): declining trials stopped."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.tune")

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "ray_tune_search.py"))


@pytest.fixture(scope="module")
def local_ray():
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    yield
    ray.shutdown()


def test_scheduler_stops_declining_trials_and_lets_rising_ones_finish(local_ray, tmp_path):
    results, scheduler = EXAMPLE["main"](str(tmp_path), detector="EvalStop-2")
    assert not results.errors
    iterations = {r.config["x"]: r.metrics["training_iteration"] for r in results}
    assert iterations == {0.2: 10, 0.4: 10, 0.7: 20, 0.9: 20}    # peak at 8, two declines
    assert len(scheduler.stopped) == 2
    assert all("2 consecutive eval declines" in why for why in scheduler.stopped.values())
    assert len(scheduler._ended) == 4                               # every end was reported


def test_a_result_past_max_t_stops_the_trial_as_complete_without_raising():
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    scheduler = EvalStopScheduler(metric="score", mode="max", time_attr="time_total_s", max_t=60)
    trial = Trial("__fake", stub=True)
    scheduler.on_trial_add(None, trial)
    for t, score in [(20.1, 0.5), (41.3, 0.6)]:
        assert scheduler.on_trial_result(None, trial, {"time_total_s": t, "score": score}) == \
            TrialScheduler.CONTINUE
    result = {"time_total_s": 62.7, "score": 0.7}            # used to raise: past max_steps
    assert scheduler.on_trial_result(None, trial, result) == TrialScheduler.STOP
    assert trial.trial_id in scheduler._ended and trial.trial_id not in scheduler.stopped
    assert scheduler.monitors[trial.trial_id].steps == [20.1, 41.3]   # not judged
    scheduler.on_trial_complete(None, trial, result)                  # reported once only


def test_time_total_s_past_max_t_in_a_real_run(local_ray, tmp_path):
    from ray import tune

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    def trainable_by_time(config: dict) -> None:     # local: pickled by value for the workers
        import time

        for step in range(1, 200):
            time.sleep(0.02)
            tune.report({"score": step / 200})

    scheduler = EvalStopScheduler(detector="EvalStop-2", time_attr="time_total_s", max_t=0.3)
    tuner = tune.Tuner(trainable_by_time, param_space={"x": tune.grid_search([1, 2])},
                       tune_config=tune.TuneConfig(metric="score", mode="max",
                                                   scheduler=scheduler),
                       run_config=tune.RunConfig(storage_path=str(tmp_path), verbose=0))
    results = tuner.fit()
    assert not results.errors
    assert all(r.metrics["training_iteration"] < 199 for r in results)     # stopped at max_t
    assert all(r.metrics["time_total_s"] >= 0.3 for r in results)
    assert not scheduler.stopped and len(scheduler._ended) == 2


def test_a_second_fit_starts_afresh(local_ray, tmp_path):
    """A reused scheduler used to refuse the second fit's TuneConfig metric, and would carry
    the first fit's trials and peers over."""
    _, scheduler = EXAMPLE["main"](str(tmp_path / "a"), detector="EvalStop-2")
    results, again = EXAMPLE["main"](str(tmp_path / "b"), scheduler=scheduler)
    assert again is scheduler and not results.errors
    iterations = {r.config["x"]: r.metrics["training_iteration"] for r in results}
    assert iterations == {0.2: 10, 0.4: 10, 0.7: 20, 0.9: 20}
    assert len(scheduler.stopped) == 2 and len(scheduler._ended) == len(scheduler.monitors) == 4


def test_a_result_without_time_attr_names_the_keys_it_has():
    from ray.tune.experiment import Trial

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    scheduler = EvalStopScheduler(metric="score", mode="max", time_attr="step")
    trial = Trial("__fake", stub=True)
    scheduler.on_trial_add(None, trial)
    with pytest.raises(ValueError, match=r"time_attr='step' is not in trial .*'s result \(its "
                                         r"keys: score, training_iteration\)"):
        scheduler.on_trial_result(None, trial, {"training_iteration": 1, "score": 0.5})


@pytest.mark.parametrize("kwargs, message", [
    ({"max_t": "12"}, "max_t='12': expected a finite number"),
    ({"max_t": 0}, "max_t=0: expected a number > 0"),
    ({"metric": 5}, "metric=5: expected the name of a reported result key"),
    ({"time_attr": ""}, "time_attr='': expected the name"),
    ({"mode": "up"}, "mode='up'"),
    ({"detector": "Nope-1"}, "detector 'Nope-1' is unknown"),
    ({"detector": "StopAt-0.5"}, "max_t=None: StopAt-0.5 reads progress"),
])
def test_bad_or_inert_arguments_are_refused_at_construction(kwargs, message):
    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    with pytest.raises(ValueError, match=message):
        EvalStopScheduler(**kwargs)


def test_the_default_detector_is_the_one_default():
    import inspect

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler
    from evalstop_gym.online import DEFAULT_DETECTOR

    assert inspect.signature(EvalStopScheduler).parameters["detector"].default == DEFAULT_DETECTOR
    assert EvalStopScheduler().detector == DEFAULT_DETECTOR
    assert inspect.signature(EXAMPLE["main"]).parameters["detector"].default == DEFAULT_DETECTOR


def test_stopper_beside_asha_stops_the_declining_trials(local_ray, tmp_path):
    results, stopper = EXAMPLE["main_with_asha"](str(tmp_path), detector="EvalStop-2")
    assert not results.errors
    iterations = {r.config["x"]: r.metrics["training_iteration"] for r in results}
    assert iterations[0.2] == iterations[0.4] == 10                 # peak at 8, two declines
    assert all(iterations[x] > 10 for x in (0.7, 0.9))              # rising: not the stopper's
    assert len(stopper.stopped) == 2
    assert all("2 consecutive eval declines" in why for why in stopper.stopped.values())


def rising(top: float, done_at: int = 10) -> list[dict]:
    return [{"training_iteration": i, "score": top * i / done_at, "done": i == done_at}
            for i in range(1, done_at + 1)]


def test_stopper_learns_from_the_trials_that_ended():
    from evalstop_gym.integrations.ray_tune import EvalStopStopper

    stopper = EvalStopStopper("score", "max", detector="MedianPruner-50-1", max_t=20)
    assert not any(stopper("a", r) for r in rising(1.0))      # no peer: runs to its end
    assert stopper.judge.ended == {"a"}
    low = [stopper("b", r) for r in rising(0.5)]
    assert low.index(True) == 5           # first result past MedianPruner's 30% warm-up
    assert "b" in stopper.stopped and not stopper.stop_all()


def test_grace_period_keeps_the_detector_quiet_until_it_is_reached():
    from evalstop_gym.integrations.ray_tune import EvalStopStopper

    falling = [{"training_iteration": i, "score": 1.0 - i / 20} for i in range(1, 20)]
    for grace, stop_at in ((0, 3), (8, 8)):
        stopper = EvalStopStopper("score", "max", detector="EvalStop-2", grace_period=grace)
        stops = [stopper("t", r) for r in falling]
        assert stops.index(True) + 1 == stop_at


def test_stopper_reads_a_nested_metric_by_its_flat_name():
    from evalstop_gym.integrations.ray_tune import EvalStopStopper

    stopper = EvalStopStopper("val/acc", "max", detector="EvalStop-1")
    assert not stopper("t", {"training_iteration": 1, "val": {"acc": 0.5}})
    assert stopper("t", {"training_iteration": 2, "val": {"acc": 0.4}})


def test_scheduler_save_and_restore_carry_its_trials(tmp_path):
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import TrialScheduler

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    def fresh():
        return EvalStopScheduler(metric="score", mode="max", detector="EvalStop-2", max_t=20)
    scheduler, trial = fresh(), Trial("__fake", stub=True)
    scheduler.on_trial_add(None, trial)
    scores = [0.1, 0.3, 0.5, 0.4, 0.3]
    for i, score in enumerate(scores[:4], 1):
        scheduler.on_trial_result(None, trial, {"training_iteration": i, "score": score})
    scheduler.save(str(tmp_path / "s.pkl"))
    restored = fresh()
    restored.restore(str(tmp_path / "s.pkl"))
    assert restored.monitors[trial.trial_id].steps == [1, 2, 3, 4]
    assert restored.on_trial_result(None, trial, {"training_iteration": 5, "score": 0.3}) == \
        TrialScheduler.STOP                                  # the patience carried over
    assert trial.trial_id in restored.stopped and not scheduler.stopped


def test_each_stop_is_a_warning_on_rays_logger(library_log):
    from evalstop_gym.integrations.ray_tune import EvalStopStopper

    stopper = EvalStopStopper("score", "max", detector="EvalStop-2", verbose=True)
    caplog = library_log("ray.tune.evalstop")
    for i, score in enumerate([0.5, 0.4, 0.3], 1):
        stopper("t", {"training_iteration": i, "score": score})
    [record] = [r for r in caplog.records if "stop trial t at training_iteration=3" in
                r.getMessage()]
    assert record.name.startswith("ray.") and record.levelname == "WARNING"
    going = [r for r in caplog.records if "trial t continues" in r.getMessage()]
    assert len(going) == 2 and {r.levelname for r in going} == {"INFO"}


@pytest.mark.parametrize("kwargs, message", [
    ({"grace_period": -1}, "grace_period=-1: expected a finite number >= 0"),
    ({"verbose": "yes"}, "verbose='yes': expected True or False"),
    ({"metric": None}, "metric=None: expected the name of a reported result key"),
    ({"mode": "up"}, "mode='up'"),
    ({"detector": "StopAt-0.5"}, "max_t=None: StopAt-0.5 reads progress"),
])
def test_stopper_arguments_are_checked_at_construction(kwargs, message):
    from evalstop_gym.integrations.ray_tune import EvalStopStopper

    with pytest.raises(ValueError, match=message):
        EvalStopStopper(**{"metric": "score", **kwargs})
