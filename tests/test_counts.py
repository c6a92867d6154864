"""workload.counts: exact realises the paper's counts; evals.cost: per_gpu scales eval time."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.config import ConfigError, SimConfig
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim.workload import exact_counts, generate_workload
from evalstop_gym.simulate import simulate

E2_EXACT = {"workload.counts": "exact"}
E1_MIX = {"workload.mix": {"lora": 0.5, "dpo": 0.3, "rlhf": 0.2}}


def tally(config: SimConfig, seed: int) -> tuple[Counter, int]:
    jobs = generate_workload(config, seed)
    return Counter(j.job_type for j in jobs), sum(j.is_hacking for j in jobs)


@pytest.mark.parametrize("seed", range(20))
def test_exact_counts_realise_the_papers_e2_numbers_for_every_seed(seed: int) -> None:
    """160 RLHF / 20 DPO / 20 LoRA and 96 hacking jobs on E2, whatever the seed."""
    types, hacking = tally(SimConfig().with_overrides(E2_EXACT), seed)
    assert types == {"rlhf": 160, "dpo": 20, "lora": 20}
    assert hacking == 96


@pytest.mark.parametrize("seed", (1, 2, 3))
def test_exact_counts_on_another_mix(seed: int) -> None:
    """E1's 50/30/20 mix: 100/60/40 jobs, 24 of the 40 RLHF jobs hacking."""
    types, hacking = tally(SimConfig().with_overrides({**E2_EXACT, **E1_MIX}), seed)
    assert types == {"lora": 100, "dpo": 60, "rlhf": 40}
    assert hacking == 24


def test_exact_order_is_shuffled_by_the_seed() -> None:
    config = SimConfig().with_overrides(E2_EXACT)
    order = {s: [j.job_type for j in generate_workload(config, s)] for s in (1, 2)}
    assert order[1] != order[2]
    assert order[1] == [j.job_type for j in generate_workload(config, 1)]


def test_independent_draws_stay_the_default() -> None:
    """The default draws each job on its own: the realised mix moves with the seed."""
    mixes = {tally(SimConfig(), s)[0]["rlhf"] for s in range(8)}
    assert len(mixes) > 1


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 500), st.lists(st.floats(0.0, 1.0), min_size=1, max_size=5)
       .filter(lambda s: sum(s) > 1e-6))
def test_largest_remainder_adds_up_and_stays_within_one(n: int, shares: list[float]) -> None:
    counts = exact_counts(n, shares)
    assert sum(counts) == n
    for c, s in zip(counts, shares, strict=True):
        assert abs(c - n * s / sum(shares)) < 1.0 + 1e-9


def test_per_gpu_eval_cost_scales_with_gpus_around_the_type_figure() -> None:
    config = SimConfig().with_overrides({"evals.cost": "per_gpu"})
    for job in generate_workload(config, 7):
        profile = getattr(config.job_types, job.job_type)
        mean_gpus = sum(profile.gpus) / 2
        assert job.eval_minutes == pytest.approx(profile.eval_minutes * job.gpus / mean_gpus)
    per_type = {getattr(SimConfig().job_types, t).eval_minutes for t in ("lora", "dpo", "rlhf")}
    assert {j.eval_minutes for j in generate_workload(SimConfig(), 7)} == per_type


def test_bad_options_name_the_field() -> None:
    with pytest.raises(ConfigError, match="workload.counts"):
        SimConfig().with_overrides({"workload.counts": "fixed"})
    with pytest.raises(ConfigError, match="evals.cost"):
        SimConfig().with_overrides({"evals.cost": "per_model"})


@pytest.mark.parametrize("options", [E2_EXACT, {"evals.cost": "per_gpu"},
                                     {**E2_EXACT, "evals.cost": "per_gpu"}])
@pytest.mark.parametrize("policy", ("SRTF-Est", "EvalStop-2+SRTF-Est", "LossPlateau+SJF-Est"))
def test_engines_agree_on_both_options(options: dict, policy: str) -> None:
    """The compiled and reference engines give the same job records on either option."""
    config = SimConfig().with_overrides({**options, "workload.n_jobs": 80,
                                         "cluster.gpus": 32})
    native = simulate(config, parse_policy(policy), 5, engine="native")
    python = simulate(config, parse_policy(policy), 5, engine="python")
    assert native.records == python.records
    assert native.metrics == python.metrics
