"""RunMonitor's contract: direction, best checkpoint, resume, bad input, groups, history windows."""

from __future__ import annotations

import math

import numpy as np
import pytest

from evalstop_gym.online import History, MonitorGroup, RunMonitor

U_SHAPED_LOSS = [1.0, 0.8, 0.6, 0.5, 0.55, 0.62, 0.7, 0.8]


def feed(monitor: RunMonitor, values, start: int = 1):
    decision = None
    for i, v in enumerate(values, start):
        decision = monitor.update(i * 10, v)
        if decision.stop:
            break
    return decision


def test_min_mode_stops_after_the_minimum_and_reports_it_in_metric_units():
    decision = feed(RunMonitor("EvalStop-2", mode="min", max_steps=100), U_SHAPED_LOSS)
    assert decision.stop and decision.step == 60
    assert decision.best_step == 40 and decision.best_value == 0.5
    assert decision.progress == pytest.approx(0.6)
    # the same values read as higher-is-better would stop on the first two (wrong) declines
    assert feed(RunMonitor("EvalStop-2", mode="max"), U_SHAPED_LOSS).step == 30


def test_stop_is_latched_and_the_kept_checkpoint_is_the_best_before_the_stop():
    monitor = RunMonitor("EvalStop-2", max_steps=100)
    feed(monitor, [0.1, 0.5, 0.4, 0.3])
    later = monitor.update(50, 0.9)
    assert later.stop and later.reason == monitor.reason and later.best_step == 20


def test_progress_is_unknown_without_max_steps_and_step_based_rules_say_so():
    monitor = RunMonitor("StopAt-0.5", max_steps=None)
    decision = monitor.update(10, 0.5)
    assert math.isnan(decision.progress) and not decision.stop
    assert "max_steps is unknown" in monitor.cannot_act()
    assert "loss" in RunMonitor("LossPlateau").cannot_act()
    assert "does not monitor lora" in RunMonitor("EvalStop-2", job_type="lora").cannot_act()
    assert RunMonitor("EvalStop-2").cannot_act() == ""


def test_resume_rebuilds_the_detector_state_without_resetting_patience():
    first = RunMonitor("Patience-3", max_steps=100)
    feed(first, [0.5, 0.6, 0.55, 0.56])               # two evals without improvement so far
    resumed = RunMonitor("Patience-3", max_steps=100)
    resumed.load_state_dict(first.state_dict())
    assert resumed.decision() == first.decision()
    assert resumed.update(50, 0.57).stop               # the third: patience was not reset
    with pytest.raises(ValueError, match="detector='Patience-3' does not match"):
        RunMonitor("Patience-2").load_state_dict(first.state_dict())


@pytest.mark.parametrize("call, message", [
    (lambda m: m.update(10, float("nan")), r"value=nan: NaN and infinities"),
    (lambda m: m.update(10, float("inf")), r"value=inf"),
    (lambda m: m.update(10, True), r"value=True: expected a finite number"),
    (lambda m: m.update(10, "0.5"), r"value='0.5'"),
    (lambda m: m.update(10, 0.5, loss=float("nan")), r"loss=nan"),
    (lambda m: (m.update(10, 0.5), m.update(10, 0.6)), r"step=10: steps must be >= 0 and "
                                                       r"increase \(previous eval at step 10\)"),
    (lambda m: m.update(-1, 0.5), r"step=-1"),
    (lambda m: m.update(500, 0.5), r"step=500: past max_steps=100"),
])
def test_bad_input_is_named(call, message):
    with pytest.raises(ValueError, match=message):
        call(RunMonitor("EvalStop-2", max_steps=100))


def test_offer_skips_what_no_detector_can_judge_and_warns_once_per_kind(caplog):
    monitor = RunMonitor("EvalStop-2", max_steps=100)
    with caplog.at_level("DEBUG", logger="evalstop_gym.online"):
        assert monitor.offer(10, 0.5, loss=1.0).n_evals == 1
        assert monitor.offer(10, 0.6) is None                  # a second evaluate at step 10
        assert monitor.offer(20, float("nan")) is None
        assert monitor.offer(20, float("inf")) is None
        assert monitor.offer(500, 0.6) is None                 # past max_steps
        assert monitor.offer(20, 0.6, loss=float("nan")).n_evals == 2    # loss dropped
        assert monitor.offer(30, 0.55, decide=False).n_evals == 3        # recorded only
        assert monitor.offer(40, 0.5).stop                     # two declines: judged at 40
    assert monitor.steps == [10, 20, 30, 40]
    assert monitor.state_dict()["losses"] == [1.0, None, None, None]
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert len(warned) == 4                                    # step, value, max_steps, loss
    assert any("step=10 is not after the previous eval's step 10" in m for m in warned)
    assert any("value=nan at step 20 is not finite; skipped" in m for m in warned)
    assert any("step=500 is past max_steps=100; skipped" in m for m in warned)
    assert any("loss=nan at step 20 is not finite; the eval is kept" in m for m in warned)
    assert any("value=inf" in r.getMessage() for r in caplog.records if r.levelname == "DEBUG")
    for call, message in [(lambda: monitor.offer(50, "0.5"), "value='0.5'"),
                          (lambda: monitor.offer(True, 0.5), "step=True")]:
        with pytest.raises(ValueError, match=message):   # wrong types are errors, not skips
            call()
    with pytest.raises(ValueError, match="step=-1"):
        RunMonitor("EvalStop-2").offer(-1, 0.5)


@pytest.mark.parametrize("kwargs, message", [
    ({"mode": "maximise"}, "mode='maximise'"), ({"max_steps": 0}, "max_steps=0"),
    ({"job_type": "sft"}, "job_type='sft'"), ({"detector": "none"}, "not 'none'"),
    ({"detector": 5}, "detector=5"),
])
def test_bad_options_are_named(kwargs, message):
    with pytest.raises((ValueError, TypeError), match=message):
        RunMonitor(**kwargs)


def test_group_pools_only_its_own_runs_and_learns_only_from_ended_ones():
    rising = [0.1 + 0.1 * i for i in range(8)]
    group, other = MonitorGroup("MedianPruner-50-2"), MonitorGroup("MedianPruner-50-2")
    for _ in range(2):
        monitor = group.monitor(max_steps=80)
        assert not feed(monitor, rising).stop
        group.end_run(monitor)
    weak = [v - 0.3 for v in rising]
    assert feed(group.monitor(max_steps=80), weak).stop
    assert not feed(other.monitor(max_steps=80), weak).stop   # the other group has no peers
    unended = other.monitor(max_steps=80)
    feed(unended, rising)
    assert not feed(other.monitor(max_steps=80), weak).stop   # a run not ended teaches nothing
    with pytest.raises(ValueError, match="not made by this group"):
        group.end_run(unended)
    first = other.monitor(max_steps=80)
    other.end_run(first)
    with pytest.raises(ValueError, match="already reported"):
        other.end_run(first)


def test_history_windows_are_stable_tuple_like_and_fold_each_item_once():
    history = History(capacity=2)
    for x in (0.5, 0.25, 1.0):
        history.append(x)
    window = history.window()
    for x in range(100):                  # growth reallocates; the old window is unchanged
        history.append(float(x))
    assert window == (0.5, 0.25, 1.0) and len(window) == 3
    assert window[-1] == 1.0 and window[:2] == (0.5, 0.25) and list(window) == [0.5, 0.25, 1.0]
    assert np.asarray(window).tolist() == [0.5, 0.25, 1.0] and bool(window)
    with pytest.raises(IndexError):
        window[3]
    calls = []

    def count(state, x):
        calls.append(x)
        return state + x
    assert history.window().fold("sum", (), count, 0.0) == sum(history.window())
    history.append(2.0)
    assert history.window().fold("sum", (), count, 0.0) == sum(history.window())
    assert len(calls) == len(history)     # the second fold resumed where the first stopped
    assert window.fold("sum", (), count, 0.0) == 1.75   # an older window folds afresh
