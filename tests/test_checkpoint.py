"""The kept checkpoint, written once (`sim/checkpoint.py`): the first best observed eval, read
alike by the job record, the reward, `RunMonitor` and the compiled batch (which compiles the same
function)."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.online import RunMonitor
from evalstop_gym.sim.checkpoint import best_eval, true_score_at
from evalstop_gym.sim.jit import njit

# few distinct values, so that ties are common
SCORES = st.lists(st.sampled_from([-1.0, 0.1, 0.2, 0.3, 0.5]), max_size=12)
POINTS = st.lists(st.sampled_from([0.1, 0.2, 0.25, 0.3, 0.5, 1.0]), min_size=1, max_size=8)


@given(SCORES)
def test_the_first_best_is_kept_and_a_later_tie_does_not_replace_it(scores: list[float]) -> None:
    best = best_eval(scores)
    if not scores:
        assert best == -1
        return
    assert scores[best] == max(scores)
    assert all(s < scores[best] for s in scores[:best])


@given(SCORES)
def test_a_history_folded_eval_by_eval_keeps_the_same_checkpoint(scores: list[float]) -> None:
    best = -1
    for i in range(len(scores)):
        best = best_eval(scores[:i + 1], i, best)
    assert best == best_eval(scores)


@given(SCORES.filter(bool))
@settings(max_examples=50)
def test_run_monitor_reports_the_same_checkpoint(scores: list[float]) -> None:
    monitor = RunMonitor()
    for k, value in enumerate(scores):
        monitor.record(10 * (k + 1), value)
    assert monitor.decision().best_step == 10 * (best_eval(scores) + 1)


@pytest.fixture(scope="module")
def compiled_best_eval():
    return njit(cache=False)(best_eval)


@given(scores=SCORES)
@settings(max_examples=50, deadline=None)
def test_the_compiled_rule_is_the_plain_one(compiled_best_eval, scores: list[float]) -> None:
    assert compiled_best_eval(np.array(scores, np.float64), 0, -1) == best_eval(scores)


@given(POINTS, st.sampled_from([0.0, 0.1, 0.2, 0.22, 0.275, 0.4, 0.75, 1.0]))
def test_the_true_score_is_the_nearest_eval_points_the_first_of_equals(
        points: list[float], progress: float) -> None:
    x = np.array(points)
    truth = np.arange(len(points), dtype=np.float64)
    assert true_score_at(x, truth, progress) == truth[np.argmin(np.abs(x - progress))]
