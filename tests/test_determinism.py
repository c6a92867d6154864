"""Same seed, same results, bit for bit; different seeds, different workloads."""

from __future__ import annotations

import numpy as np

from evalstop_gym.policies import parse_policy
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import simulate


def test_same_seed_same_run_bit_for_bit(small_config):
    for spec in ("EvalStop-2+SRTF-Est", "LossAware", "StopAt-0.65+FIFO"):
        a = simulate(small_config, parse_policy(spec), seed=11)
        b = simulate(small_config, parse_policy(spec), seed=11)
        assert a.records == b.records
        assert repr(a.metrics) == repr(b.metrics)
        assert a.events == b.events


def test_different_seeds_differ(small_config):
    a = simulate(small_config, parse_policy("SRTF-Est"), seed=1)
    b = simulate(small_config, parse_policy("SRTF-Est"), seed=2)
    assert a.metrics["jct"] != b.metrics["jct"]


def test_noise_level_leaves_the_jobs_alone(small_config):
    """Common random numbers: a sweep over sigma sees the same arrivals, sizes and curves."""
    quiet = generate_workload(small_config.with_overrides({"noise.sigma": 0.01}), 5)
    loud = generate_workload(small_config.with_overrides({"noise.sigma": 0.1}), 5)
    for a, b in zip(quiet, loud, strict=True):
        assert (a.arrival, a.gpus, a.duration, a.is_hacking) == (b.arrival, b.gpus, b.duration,
                                                                  b.is_hacking)
        np.testing.assert_array_equal(a.eval_true, b.eval_true)
        inside = (b.eval_observed > 0) & (b.eval_observed < 1)  # not clipped to the score range
        np.testing.assert_allclose((a.eval_observed - a.eval_true)[inside] * 10,
                                   (b.eval_observed - b.eval_true)[inside])


def test_no_global_random_state_is_used(small_config):
    np.random.seed(0)
    a = simulate(small_config, parse_policy("EvalStop-2+SRTF-Est"), seed=3)
    np.random.seed(12345)
    np.random.random(100)
    b = simulate(small_config, parse_policy("EvalStop-2+SRTF-Est"), seed=3)
    assert a.records == b.records
