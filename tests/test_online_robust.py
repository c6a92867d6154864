"""RunMonitor and MonitorGroup cannot be silently wrong: atomic resume, one-line errors for bad
input, refusals and warnings for configurations that would never act, incremental detectors that
decide as the recomputed definition, and one default detector."""

from __future__ import annotations

import dataclasses
import inspect
import logging

import numpy as np
import pytest

from evalstop_gym.online import DEFAULT_DETECTOR, RUN_CLUSTER, MonitorGroup, RunMonitor
from evalstop_gym.policies import make_detector
from evalstop_gym.policies.bocpd import MAX_RUN, posterior

RISE_THEN_FALL = [0.1, 0.3, 0.5, 0.6, 0.65, 0.62]


def fed(values=RISE_THEN_FALL, name: str = "Patience-3") -> RunMonitor:
    monitor = RunMonitor(name, max_steps=100)
    for i, v in enumerate(values, 1):
        monitor.update(10 * i, v)
    return monitor


@pytest.mark.parametrize("corrupt, message", [
    (lambda s: s["values"].__setitem__(4, "x"), r"eval 4 of state.*value='x'"),
    (lambda s: s["steps"].__setitem__(3, 5), r"eval 3 of state.*step=5"),
    (lambda s: s.pop("losses"), r"state\['losses'\] is missing"),
    (lambda s: s.__setitem__("steps", 7), r"state\['steps'\]=7: expected a list"),
    (lambda s: s["values"].pop(), r"hold 6, 5, 6 entries"),
    (lambda s: s.__setitem__("max_steps", "12"), r"state\['max_steps'\]: max_steps='12'"),
    (lambda s: s.__setitem__("mode", "min"), r"mode='min' does not match"),
])
def test_a_failed_load_leaves_the_monitor_as_it_was(corrupt, message):
    """Half a history (4 of 6 evals) is never left behind: the load is all or nothing."""
    state = fed().state_dict()
    corrupt(state)
    live = RunMonitor("Patience-3")
    live.update(1, 0.2)
    before = repr((live.state_dict(), live.decision(), live.max_steps))   # repr: NaN progress
    with pytest.raises(ValueError, match=message) as caught:
        live.load_state_dict(state)
    assert "\n" not in str(caught.value)
    assert repr((live.state_dict(), live.decision(), live.max_steps)) == before
    assert live.update(2, 0.3).n_evals == 2          # and it carries on


def test_a_good_load_replaces_the_history_and_a_non_dict_is_refused():
    source = fed()
    live = RunMonitor("Patience-3")
    live.update(1, 0.9)
    live.load_state_dict(source.state_dict())
    assert live.state_dict() == source.state_dict() and live.max_steps == 100
    with pytest.raises(ValueError, match="state=None: expected the dict"):
        live.load_state_dict(None)  # type: ignore[arg-type]


@pytest.mark.parametrize("call, message", [
    (lambda m: m.update(10**400, 0.5), r"step=1000.*too large for a float"),
    (lambda m: m.update(10, 10**400), r"value=1000.*too large for a float"),
    (lambda m: m.update(10, 0.5, loss=-(10**400)), r"loss=-1000.*too large"),
    (lambda m: m.offer(10, 10**400), r"value=1000.*too large"),
])
def test_numbers_beyond_float_range_are_named_in_one_line(call, message):
    monitor = RunMonitor("EvalStop-2")
    with pytest.raises(ValueError, match=message) as caught:
        call(monitor)
    assert len(str(caught.value)) < 200 and not monitor.steps


class SaysNothing:
    name = "SaysNothing"

    def decide(self, view, cluster):
        return None


def test_a_detector_that_returns_no_decision_is_named():
    monitor = RunMonitor(SaysNothing())
    with pytest.raises(TypeError, match=r"detector 'SaysNothing': decide\(\) returned None; "
                                        r"expected a StopDecision"):
        monitor.update(1, 0.5)
    assert monitor.steps == [1]                      # the eval is kept, not lost


def test_a_group_refuses_a_run_of_the_other_direction():
    group = MonitorGroup("MedianPruner", mode="max")
    assert group.monitor(mode="max").mode == "max"
    with pytest.raises(ValueError, match=r"mode='min': this group's runs are 'max'"):
        group.monitor(mode="min")


def test_a_peer_detector_alone_warns_that_it_never_stops(caplog):
    with caplog.at_level(logging.WARNING, logger="evalstop_gym.online"):
        RunMonitor("MedianPruner", max_steps=10)
        MonitorGroup("MedianPruner").monitor(max_steps=10)
        RunMonitor("EvalStop-2")
    warned = [r.getMessage() for r in caplog.records]
    assert len(warned) == 1 and "MedianPruner" in warned[0] and "never stop" in warned[0]


@pytest.mark.parametrize("name", ["BOCPD-0.5", "CUSUM-0-3", "CUSUM-0.5-2"])
def test_incremental_detectors_decide_as_recomputed_from_scratch(name):
    """A live run's folded statistic gives the decisions the simulator's recomputation gives,
    past BOCPD's run-length truncation too."""
    rng = np.random.default_rng(3)
    n = MAX_RUN + 60
    p = np.arange(1, n + 1) / n
    values = 0.6 - 0.8 * (p - 0.7) ** 2 + 0.01 * rng.standard_normal(n)
    monitor, fresh = RunMonitor(name), make_detector(name)
    for i, v in enumerate(values):
        monitor.record(i + 1, float(v))
        live = monitor.detector.decide(monitor.view(), RUN_CLUSTER)
        if i % 40 == 39 or i == n - 1:
            view = monitor.view()
            as_tuple = dataclasses.replace(view, eval_scores=tuple(view.eval_scores))
            assert fresh.decide(as_tuple, RUN_CLUSTER) == live, i
    if name.startswith("BOCPD"):
        sigma = monitor.detector.noise_sigma(monitor.view().eval_scores)
        folded = posterior(monitor.view().eval_scores, sigma, 0.2, 10 * sigma)
        assert folded is not None
        recomputed = posterior(tuple(values), sigma, 0.2, 10 * sigma)
        assert recomputed is not None
        assert len(folded.log_r) == MAX_RUN
        np.testing.assert_array_equal(folded.log_r, recomputed.log_r)


def test_the_default_detector_is_a_registry_name_and_the_monitors_default():
    assert make_detector(DEFAULT_DETECTOR).name == DEFAULT_DETECTOR
    assert inspect.signature(RunMonitor).parameters["detector"].default == DEFAULT_DETECTOR
    assert RunMonitor().detector.name == DEFAULT_DETECTOR


def test_a_peer_detector_that_already_has_peers_does_not_warn(caplog):
    detector = make_detector("MedianPruner-50-1")
    peer = MonitorGroup(detector)
    run = peer.monitor(max_steps=10)
    for step in range(1, 11):
        run.update(step, step / 10)
    peer.end_run(run)
    with caplog.at_level(logging.WARNING, logger="evalstop_gym.online"):
        alone = RunMonitor(detector, max_steps=10)      # as replay does: peers fed outside
        assert alone.update(5, 0.1).stop                 # below its peer: it can act
    assert not caplog.records
