"""Each rule of `sim.rules` gives the same bits called plain (as the policies call it, on a view's
tuples) and compiled (as the compiled engine calls it, on slices of its arrays)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.policies import (
    FIFO,
    DeclineTest,
    EvalSched,
    EvalStop,
    LossAware,
    LossPlateau,
    Patience,
    SJFEst,
    SRTFEst,
    StopAt,
)
from evalstop_gym.policies.eval_sched import EvalSchedStrict
from evalstop_gym.sim import rules
from evalstop_gym.sim.protocols import capabilities
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

pytest.importorskip("numba")

# Scores from a small grid too, so ties (a decline needs a strict fall) come up often
SCORE = st.one_of(st.floats(-2.0, 2.0, allow_nan=False),
                  st.sampled_from([0.0, 0.25, 0.5, 0.75, 1.0]))
SCORES = st.lists(SCORE, max_size=14)
LOSSES = st.lists(st.one_of(st.floats(-1.0, 5.0, allow_nan=False), st.sampled_from([0.0, 1.0])),
                  max_size=10)
UNIT = st.floats(0.0, 1.0, allow_nan=False)
CLUSTER = ClusterView(now=0.0, total_gpus=8, free_gpus=0, n_waiting=0, n_running=1)
SETTINGS = settings(max_examples=150, deadline=None)


def bits(value: object) -> str:
    """Exact: repr tells every float apart (and -0.0 from 0.0), NaN equal to NaN."""
    if isinstance(value, tuple):
        return repr(tuple(bits(v) for v in value))
    return repr(float(value))


def arrays(*values: list[float]) -> list[np.ndarray]:
    return [np.asarray(v, dtype=np.float64) for v in values]


def view(scores: list[float], losses: list[float], progress: float, arrival: float = 3.0,
         eval_progress: tuple[float, ...] | None = None) -> SchedulerJobView:
    n = len(scores)
    return SchedulerJobView(
        job_id=0, tenant=0, job_type="rlhf", gpus=4, arrival_time=arrival, state="running",
        progress=progress, loss=1.0,
        eval_progress=eval_progress or tuple((i + 1) / (n + 1) for i in range(n)),
        eval_scores=tuple(scores), loss_history=tuple(losses), duration_estimate=120.0,
        attained_minutes=0.0, n_preemptions=0)


@SETTINGS
@given(code=st.sampled_from([rules.KEY_ARRIVAL, rules.KEY_DURATION_ESTIMATE,
                             rules.KEY_REMAINING_ESTIMATE, rules.KEY_EVAL_DEMOTE,
                             rules.KEY_LOSS_IMPROVEMENT, rules.KEY_EVAL_SLICE]),
       arrival=st.floats(0.0, 1e4), estimate=st.floats(0.0, 1e4), progress=UNIT,
       losses=LOSSES, scores=SCORES)
def test_priority_keys_agree_plain_and_compiled(code, arrival, estimate, progress, losses,
                                                scores):
    plain = rules.priority_key(code, arrival, estimate, progress, tuple(losses), tuple(scores))
    jitted = rules.compiled(rules.priority_key)(code, arrival, estimate, progress,
                                                *arrays(losses, scores))
    assert bits(plain) == bits(jitted)


@SETTINGS
@given(rule=st.sampled_from([rules.RULE_DECLINES, rules.RULE_PROGRESS, rules.RULE_LOSS_PLATEAU,
                             rules.RULE_PATIENCE]),
       k=st.integers(1, 5), best=st.booleans(), p=UNIT, threshold=st.floats(0.0, 0.5),
       window=st.integers(2, 6), progress=UNIT, scores=SCORES, losses=LOSSES)
def test_stop_rules_agree_plain_and_compiled(rule, k, best, p, threshold, window, progress,
                                             scores, losses):
    eval_progress = [(i + 1) / (len(scores) + 1) for i in range(len(scores))]
    args = (rule, k, best, p, threshold, window, progress)
    plain = rules.stop_value(*args, tuple(scores), tuple(eval_progress), tuple(losses))
    jitted = rules.compiled(rules.stop_value)(*args, *arrays(scores, eval_progress, losses))
    assert bits(plain) == bits(jitted)


@SETTINGS
@given(scores=st.lists(st.floats(0.0, 1.0, allow_nan=False), min_size=4, max_size=40),
       alpha=st.floats(0.001, 0.5), usable=st.booleans())
def test_decline_test_agrees_between_policy_and_engine(scores, alpha, usable):
    """DeclineTest needs log and lgamma, so both sides call it compiled: the policy through
    `decline_test.decline_evidence`, the engine through the compiled dispatch."""
    n = len(scores)
    eval_progress = [(i + 1) / n if usable else 1.0 for i in range(n)]
    engine = rules.compiled(rules.stop_value)(rules.RULE_DECLINE_TEST, 1, False, 0.0, alpha, 0,
                                              1.0, *arrays(scores, eval_progress, []))
    job = view(scores, [], 1.0, eval_progress=tuple(eval_progress))
    detector = DeclineTest(alpha)
    decision = detector.decide(job, CLUSTER)
    assert decision.stop == (not math.isnan(engine))
    if decision.stop:
        assert decision.reason == detector.reason("rlhf", engine)


@SETTINGS
@given(scores=SCORES, losses=LOSSES, progress=UNIT, arrival=st.floats(0.0, 1e4))
def test_the_policies_keys_are_the_rules_keys(scores, losses, progress, arrival):
    """Each paper scheduler's key, on a view, is `priority_key` of its declared code."""
    job = view(scores, losses, progress, arrival)
    for scheduler in (FIFO(), SJFEst(), SRTFEst(), LossAware(), EvalSched(), EvalSchedStrict()):
        code = capabilities(scheduler).native.key
        engine = rules.compiled(rules.priority_key)(
            code, arrival, job.duration_estimate, progress, *arrays(losses, scores))
        assert bits(scheduler.key(job)) == bits(engine), scheduler.name


@SETTINGS
@given(scores=SCORES, losses=LOSSES, progress=UNIT)
def test_the_detectors_decide_as_the_compiled_rule(scores, losses, progress):
    """Each paper detector with a compiled form stops a job exactly when the compiled dispatch,
    given its spec, reports a value, and quotes that value in its reason."""
    job = view(scores, losses, progress)
    eval_progress = list(job.eval_progress)
    for detector in (EvalStop(2), EvalStop(1, variant="best"), StopAt(0.4), LossPlateau(),
                     LossPlateau(0.001, 5), Patience(2), Patience(3, 0.05)):
        spec = capabilities(detector + SRTFEst()).native
        value = rules.compiled(rules.stop_value)(
            spec.rule, spec.monitored[2], spec.best_variant, spec.p, spec.threshold, spec.window,
            progress, *arrays(scores, eval_progress, losses))
        decision = detector.decide(job, CLUSTER)
        assert decision.stop == (not math.isnan(value)), detector.name
        if decision.stop:
            assert decision.reason == detector.reason("rlhf", value), detector.name


def test_decline_count_reads_trailing_declines():
    assert rules.decline_count((0.5, 0.7, 0.6, 0.55)) == 2
    assert rules.decline_count((0.7, 0.5, 0.6, 0.55), True) == 1
    assert rules.declines((0.5, 0.7, 0.6, 0.55), 2, False) == 2.0
    assert math.isnan(rules.declines((0.5, 0.7, 0.6, 0.65), 2, False))
