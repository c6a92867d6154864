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
    results, scheduler = EXAMPLE["main"](str(tmp_path))
    assert not results.errors
    iterations = {r.config["x"]: r.metrics["training_iteration"] for r in results}
    assert iterations == {0.2: 10, 0.4: 10, 0.7: 20, 0.9: 20}    # peak at 8, two declines
    assert len(scheduler.stopped) == 2
    assert all("2 consecutive eval declines" in why for why in scheduler.stopped.values())
    assert len(scheduler._ended) == 4                               # every end was reported
