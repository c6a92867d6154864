"""A MonitorGroup's run reported ended takes no more evals, and the group's default detector."""

from __future__ import annotations

import inspect

import pytest

from evalstop_gym.online import DEFAULT_DETECTOR, MonitorGroup, RunMonitor


def test_the_group_default_is_the_default_detector():
    assert inspect.signature(MonitorGroup).parameters["detector"].default == DEFAULT_DETECTOR
    assert MonitorGroup().detector.name == RunMonitor().detector.name


@pytest.mark.parametrize("call", ["update", "offer", "record"])
def test_an_eval_after_end_run_is_a_one_line_error(call):
    group = MonitorGroup("MedianPruner", mode="max")
    monitor = group.monitor(max_steps=10)
    monitor.update(1, 0.5)
    group.end_run(monitor)
    with pytest.raises(ValueError, match=r"^update: run 0 was reported ended \(MonitorGroup"
                                         r"\.end_run\), so it takes no more evals") as err:
        getattr(monitor, call)(2, 0.6)
    assert "\n" not in str(err.value)
    assert monitor.steps == [1]                       # nothing recorded
    fresh = group.monitor(max_steps=10)               # the group itself goes on
    assert fresh.update(1, 0.5).n_evals == 1


def test_a_lone_peer_judged_detector_says_why_it_cannot_act():
    monitor = RunMonitor("MedianPruner", max_steps=10, grouped=True)
    monitor.update(1, 0.5)
    assert "too few have ended" in monitor.cannot_act()
    assert RunMonitor(max_steps=10).cannot_act() == ""
