"""A Ray Tune stop reaches the user: the stopper's evidence in the trial's result (what Tune's
loggers record), and a scheduler whose metric no trial reports says so, once."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

ray = pytest.importorskip("ray")
pytest.importorskip("ray.tune")

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "ray_tune_search.py"))


@pytest.fixture
def ray_log(library_log):
    return library_log("ray.tune.evalstop")


def test_the_stoppers_evidence_is_in_each_trials_result(tmp_path):
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    try:
        results, stopper = EXAMPLE["main_with_asha"](str(tmp_path), detector="EvalStop-2")
    finally:
        ray.shutdown()
    assert not results.errors
    by_x = {r.config["x"]: r for r in results}
    declining = by_x[0.2]
    assert declining.metrics["training_iteration"] < 20
    assert declining.metrics["evalstop"]["stop"] == 1.0
    decision = stopper.decisions[declining.metrics["trial_id"]]
    assert declining.metrics["evalstop"]["best_step"] == decision.best_step
    assert by_x[0.9].metrics["evalstop"]["stop"] == 0.0
    history = declining.metrics_dataframe                 # progress.csv, as Tune's logger wrote it
    assert "evalstop/stop" in history.columns and history["evalstop/stop"].iloc[-1] == 1.0


def test_a_metric_no_trial_reports_is_warned_once(ray_log):
    from ray.tune.experiment import Trial

    from evalstop_gym.integrations.ray_tune import EvalStopScheduler

    scheduler = EvalStopScheduler(metric="accuracy", mode="max", detector="EvalStop-2")
    trials = [Trial("__fake", stub=True) for _ in range(2)]
    for trial in trials:
        scheduler.on_trial_add(None, trial)
        for i in range(1, 4):
            scheduler.on_trial_result(None, trial, {"training_iteration": i, "score": 0.5})
    warned = [r for r in ray_log.records if "metric='accuracy' is not in trial" in r.getMessage()]
    assert len({(r.created, r.getMessage()) for r in warned}) == 1
    assert "score" in warned[0].getMessage() and warned[0].levelname == "WARNING"
    assert not scheduler.decisions                         # nothing judged, and it was said
