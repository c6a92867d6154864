"""Each metric on a hand-computed example."""

from __future__ import annotations

import math

import pytest

from evalstop_gym.config import MetricsConfig
from evalstop_gym.metrics import aggregate, jain_index, ttfuc
from evalstop_gym.sim.jobs import Observation


def rec(job_id, job_type, hacking, stopped, jct, used, after_peak, planned, saved, tenant=0,
        end_progress=1.0):
    return {"end_progress": end_progress, "job_id": job_id, "tenant": tenant,
            "job_type": job_type, "gpus": 1,
            "arrival": 0.0, "end_time": jct, "jct": jct, "ttfuc": math.nan,
            "stopped": stopped, "is_hacking": hacking, "gpu_minutes": used,
            "gpu_minutes_after_peak": after_peak, "planned_gpu_minutes": planned,
            "saved_gpu_minutes": saved, "oracle_true_score": 0.8,
            "delivered_true_score": 0.7}


def test_aggregate_hand_example():
    records = [
        rec(0, "rlhf", True, True, 100.0, 80.0, 10.0, 100.0, 20.0, end_progress=0.9),  # TP
        rec(1, "rlhf", True, False, 200.0, 100.0, 40.0, 100.0, 0.0, tenant=1),  # FN
        rec(2, "rlhf", False, True, 50.0, 60.0, 0.0, 100.0, 40.0, tenant=0),    # FP (healthy)
        rec(3, "rlhf", False, False, 150.0, 100.0, 0.0, 100.0, 0.0, tenant=1),  # TN (healthy)
        rec(4, "lora", False, False, 100.0, 10.0, 0.0, 10.0, 0.0, tenant=0),    # TN (lora)
    ]
    m = aggregate(records, total_gpus=4)
    assert m["jct"] == pytest.approx(120.0)
    assert m["precision"] == pytest.approx(0.5)
    assert m["recall"] == pytest.approx(0.5)
    assert m["recall_early"] == pytest.approx(0.5)  # the TP was stopped with compute left
    assert m["fpr"] == pytest.approx(0.5)          # 1 of 2 healthy RLHF stopped
    assert m["fpr_all"] == pytest.approx(1 / 3)    # 1 of 3 non-hacking jobs
    assert m["f1"] == pytest.approx(0.5)
    assert m["n_stopped"] == 2
    assert m["wasted_frac"] == pytest.approx(50.0 / 350.0)
    assert m["saved_frac"] == pytest.approx(60.0 / 410.0)
    assert m["makespan"] == pytest.approx(200.0)
    assert m["utilization"] == pytest.approx(350.0 / (4 * 200.0))
    assert m["quality_regret"] == pytest.approx(0.1)


def test_precision_is_undefined_without_stops():
    m = aggregate([rec(0, "rlhf", True, False, 1.0, 1.0, 0.0, 1.0, 0.0)], total_gpus=1)
    assert math.isnan(m["precision"]) and m["recall"] == 0.0 and math.isnan(m["fpr"])


def test_jain_index():
    assert jain_index([1, 1, 1, 1]) == pytest.approx(1.0)
    assert jain_index([1, 0, 0, 0]) == pytest.approx(0.25)
    assert jain_index([1, 2]) == pytest.approx(9 / 10)


class _FakeJob:
    def __init__(self, arrival, scores):
        self.arrival = arrival
        self.observations = [Observation(0.1 * i, arrival + 10.0 * (i + 1), 1.0, s)
                             for i, s in enumerate(scores)]


def test_ttfuc_threshold_and_improvement():
    cfg = MetricsConfig(tau=0.5, min_improvement=0.01)
    assert ttfuc(_FakeJob(5.0, [0.3, 0.6]), cfg) == pytest.approx(20.0)
    # 0.503 crosses tau but beats the previous best (0.5) by under 1%: not yet useful
    assert ttfuc(_FakeJob(0.0, [0.5, 0.503, 0.52]), cfg) == pytest.approx(30.0)
    assert ttfuc(_FakeJob(0.0, [0.6, 0.605, 0.7]), cfg) == pytest.approx(10.0)
    assert math.isnan(ttfuc(_FakeJob(0.0, [0.2, 0.3]), cfg))
