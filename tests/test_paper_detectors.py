"""Each paper detector's rule on hand-made eval and loss sequences."""

from __future__ import annotations

import pytest

from evalstop_gym.policies import (
    EvalStop,
    LossPlateau,
    PolicyNameError,
    StopAt,
    make_detector,
    parse_policy,
)
from evalstop_gym.policies.eval_stop import decline_count
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

CLUSTER = ClusterView(now=0.0, total_gpus=8, free_gpus=0, n_waiting=0, n_running=1)


def view(scores=(), losses=(), job_type="rlhf", progress=0.5):
    return SchedulerJobView(
        job_id=0, tenant=0, job_type=job_type, gpus=4, arrival_time=0.0, state="running",
        progress=progress, loss=losses[-1] if losses else 1.0,
        eval_progress=tuple(0.15 * (i + 1) for i in range(len(scores))),
        eval_scores=tuple(scores), loss_history=tuple(losses), duration_estimate=210.0,
        attained_minutes=0.0, n_preemptions=0)


@pytest.mark.parametrize("scores, expected", [
    ((), 0), ((0.5,), 0), ((0.5, 0.4), 1), ((0.5, 0.4, 0.3), 2), ((0.5, 0.4, 0.45), 0),
    ((0.3, 0.5, 0.4, 0.3, 0.2), 3), ((0.5, 0.5), 0),  # a tie is not a decline
])
def test_decline_count(scores, expected):
    assert decline_count(scores) == expected


def test_decline_below_best_variant():
    # 0.55 < 0.6 (previous) but not below the best (0.7) before it? It is below 0.7: counts.
    assert decline_count((0.7, 0.6, 0.55), below_best=True) == 2
    # a recovery above the previous but below the best resets the plain count only
    assert decline_count((0.7, 0.5, 0.6, 0.55), below_best=True) == 1
    assert decline_count((0.4, 0.7, 0.5, 0.6, 0.55)) == 1


def test_evalstop_k2_for_rlhf_k3_for_dpo_lora_unmonitored():
    det = EvalStop(k_rlhf=2)
    two_drops = (0.3, 0.6, 0.5, 0.4)
    assert det.decide(view(two_drops), CLUSTER).stop
    assert not det.decide(view(two_drops[:-1]), CLUSTER).stop
    assert not det.decide(view(two_drops, job_type="dpo"), CLUSTER).stop
    assert det.decide(view((*two_drops, 0.3), job_type="dpo"), CLUSTER).stop
    assert not det.decide(view((0.9, 0.5, 0.2, 0.1), job_type="lora"), CLUSTER).stop
    assert "2 consecutive" in det.decide(view(two_drops), CLUSTER).reason


def test_evalstop_noisy_rise_does_not_trigger():
    rising = (0.30, 0.36, 0.35, 0.41, 0.47, 0.46, 0.52)  # single dips only
    det = EvalStop(k_rlhf=2)
    assert not any(det.decide(view(rising[:i]), CLUSTER).stop for i in range(1, 8))


def test_evalstop_rejects_k_below_one():
    with pytest.raises(ValueError, match="k must be >= 1"):
        EvalStop(k_rlhf=0)
    with pytest.raises(PolicyNameError, match="EvalStop-0"):
        make_detector("EvalStop-0")


def test_stop_at_stops_rlhf_at_its_milestone_only():
    det = StopAt(0.65)
    assert det.milestones == (0.65,)
    assert not det.decide(view(progress=0.6), CLUSTER).stop
    assert det.decide(view(progress=0.65), CLUSTER).stop
    assert not det.decide(view(progress=0.9, job_type="dpo"), CLUSTER).stop


def test_loss_plateau_window_and_threshold():
    det = LossPlateau(threshold=0.02, window=3)
    assert not det.decide(view(losses=(2.0, 1.0)), CLUSTER).stop          # too few checks
    assert not det.decide(view(losses=(2.0, 1.5, 1.0)), CLUSTER).stop     # 50% better
    assert det.decide(view(losses=(2.0, 1.0, 0.995, 0.99)), CLUSTER).stop  # 1% over 3 checks
    assert not det.decide(view(losses=(1.0, 0.995, 0.97)), CLUSTER).stop  # exactly 3%


def test_registry_names_and_composition():
    assert parse_policy("EvalStop-2+SRTF-Est").name == "EvalStop-2+SRTF-Est"
    assert parse_policy("SRTF-Est").name == "SRTF-Est"
    assert make_detector("StopAt-0.5").name == "StopAt-0.5"
    assert make_detector("LossPlateau-0.001-5").window == 5
    assert make_detector("EvalStop-2-best").variant == "best"
    composed = EvalStop(2) + parse_policy("FIFO")
    assert composed.name == "EvalStop-2+FIFO"
    with pytest.raises(PolicyNameError, match="known"):
        parse_policy("EvalStop-2+Nope")
    with pytest.raises(PolicyNameError, match="known prefixes"):
        make_detector("Magic-3")
