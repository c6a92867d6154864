"""`CompiledBatch` (N stop-mode clusters in compiled code) against N `EvalStopClusterEnv`s, bit
for bit: every observation field's bytes, reward bits, terminated flags, final metrics and reward
terms, over configs, base schedulers, seeds and random action sequences, with the envs of one
batch at different seeds. Plus the information boundary: hidden truth never reaches a row.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.env.cluster_env import EvalStopClusterEnv
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.workloads import generate_workload

SMALL = {"workload.n_jobs": 60}
# (config, overrides, milestones): each reaches other paths of the loop, the observation and the
# reward (noise and dense evals; queueing, preemption and 7-minute restarts on a small cluster;
# milestone checks, which carry no eval)
CASES = {
    "e2": ("e2", {}, ()),
    "e2-noisy-dense": ("e2", {"noise.sigma": 0.05, "evals.interval": 0.05, **SMALL}, ()),
    "e2-16gpu-restart": ("e2", {"cluster.gpus": 16, "cluster.preemption_overhead_min": 7.0,
                                **SMALL}, ()),
    "e1-milestones": ("e1", SMALL, (0.3, 0.65)),
    "philly-trace": ("philly", {}, ()),     # a trace workload: sizes differ from seed to seed
}
GRID = [("e2", "SRTF-Est", 0.05), ("e2", "FIFO", 0.5), ("e2-noisy-dense", "SJF-Est", 0.05),
        ("e2-noisy-dense", "EvalSched", 0.5), ("e2-16gpu-restart", "SRTF-Est", 0.05),
        ("e2-16gpu-restart", "EvalSched", 0.05), ("e2-16gpu-restart", "LossAware", 0.5),
        ("e2-16gpu-restart", "LAS", 0.05),
        ("e1-milestones", "SRTF-Est", 0.05), ("e1-milestones", "FIFO", 0.5),
        ("philly-trace", "SRTF-Est", 0.1)]


def rows_equal(batch: CompiledBatch, i: int, obs: dict[str, np.ndarray], label: str) -> None:
    for key, value in obs.items():
        row = batch.obs[key][i]
        assert row.dtype == value.dtype and row.tobytes() == value.tobytes(), \
            f"{label}: obs[{key!r}] differs\n{value}\n{row}"


def run_pair(case: str, base: str, p_stop: float, seeds: list[int], rng_seed: int = 0
             ) -> dict[str, int]:
    """Step a batch and one single env per seed with the same random actions, comparing every
    row at every step; returns counts of what the run went through."""
    config, overrides, milestones = CASES[case]
    batch = CompiledBatch(len(seeds), config, base, milestones=milestones, **overrides)
    envs = [EvalStopClusterEnv(config, base, milestones=milestones, **overrides) for _ in seeds]
    batch.reset(range(len(seeds)), seeds)
    live = []
    for i, (env, seed) in enumerate(zip(envs, seeds, strict=True)):
        obs, info = env.reset(seed=seed)
        label = f"{case}/{base}/seed {seed}: reset"
        rows_equal(batch, i, obs, label)
        assert batch.job_id(i) == info.get("job_id", -1), label
        assert bool(batch.terminated[i]) == ("metrics" in info), label
        live.append(not batch.terminated[i])
    rng = np.random.default_rng(rng_seed)
    seen = {"steps": 0, "stops": 0, "preemptions": 0,
            "heap_rows": batch._arrays.loop.rheap.shape[1]}
    while any(live):
        stop = (rng.random(len(seeds)) < p_stop).astype(np.int64)
        batch.step(stop)
        seen["steps"] += 1
        for i, env in enumerate(envs):
            label = f"{case}/{base}/seed {seeds[i]}: step {seen['steps']}"
            if not live[i]:
                assert batch.terminated[i] and batch.reward[i] == 0.0, label
                continue
            obs, reward, terminated, _, info = env.step(int(stop[i]))
            seen["stops"] += int(stop[i])
            rows_equal(batch, i, obs, label)
            assert np.float64(reward).tobytes() == batch.reward[i].tobytes(), \
                f"{label}: reward {reward!r} != {batch.reward[i]!r}"
            assert bool(batch.terminated[i]) == terminated, label
            assert batch.job_id(i) == info.get("job_id", -1), label
            if terminated:
                live[i] = False
                assert batch.metrics(i) == info["metrics"], f"{label}: metrics"
                assert batch.reward_terms(i) == info["reward_terms"], f"{label}: reward terms"
                seen["preemptions"] += sum(j.n_preemptions for j in env._jobs)
    seen["heap_rows"] = batch._arrays.loop.rheap.shape[1] - seen["heap_rows"]
    return seen


@pytest.mark.parametrize(("case", "base", "p_stop"), GRID)
def test_batch_rows_equal_the_single_env_bit_for_bit(case: str, base: str,
                                                      p_stop: float) -> None:
    seeds = [11, 12, 13] if case == "e2" else [21, 22, 23, 24]
    seen = run_pair(case, base, p_stop, seeds, rng_seed=len(case) + int(100 * p_stop))
    assert seen["steps"] > 20 and seen["stops"] > 0


def test_the_grid_preempts_restarts_and_grows_its_heaps() -> None:
    """Equality on runs that never preempt, or never outgrow their heaps (a step paused and
    resumed for room), would prove little about those paths."""
    seen = run_pair("e2-16gpu-restart", "LossAware", 0.05, [21, 22, 23, 24])
    assert seen["preemptions"] > 0 and seen["heap_rows"] > 0


def test_a_reset_mid_episode_starts_afresh() -> None:
    """Envs reset at different times (one mid-episode, the others not) stay independent."""
    batch = CompiledBatch(2, "e2", **SMALL)
    batch.reset([0, 1], [1, 2])
    for _ in range(5):
        batch.step(np.zeros(2, np.int64))
    batch.reset([1], [3])
    env = EvalStopClusterEnv("e2", **SMALL)
    obs, _ = env.reset(seed=3)
    rows_equal(batch, 1, obs, "after reset")
    assert batch.reward[1] == 0.0


class LargerForSeed99(CompiledBatch):
    """Seed 99 brings a larger workload: every row grows while the other env is mid-episode."""

    def _workload(self, seed: int):  # type: ignore[no-untyped-def]
        if seed == 99:
            return generate_workload(self.config.with_overrides({"workload.n_jobs": 90}), seed)
        return super()._workload(seed)


def test_rows_growing_mid_episode_keep_the_other_envs_state() -> None:
    batch = LargerForSeed99(2, "e2", "SRTF-Est", **SMALL)
    env = EvalStopClusterEnv("e2", "SRTF-Est", **SMALL)
    batch.reset([0, 1], [4, 5])
    env.reset(seed=4)
    rng = np.random.default_rng(9)
    steps, terminated = 0, False
    while not terminated:
        stop = (rng.random(2) < 0.05).astype(np.int64)
        batch.step(stop)
        obs, reward, terminated, _, info = env.step(int(stop[0]))
        rows_equal(batch, 0, obs, f"step {steps}")
        assert np.float64(reward).tobytes() == batch.reward[0].tobytes()
        steps += 1
        if steps == 5:
            before = batch._caps
            batch.reset([1], [99])
            assert batch._caps[0] > before[0]
    assert batch.metrics(0) == info["metrics"]


# ---------------------------------------------------------------------------- information boundary


class ScrambledTruth(CompiledBatch):
    """Workloads whose hidden truth is moved: labels flipped, peaks and true scores moved."""

    def _workload(self, seed: int):  # type: ignore[no-untyped-def]
        jobs = generate_workload(self.config, seed)
        for job in jobs:
            job.is_hacking = not job.is_hacking
            job.peak_progress = 1.0 - job.peak_progress
            job.eval_true = job.eval_true[::-1].copy()
            job.curve_params = ()
            job.set_pace(job.eval_work)
        return jobs


def test_observations_come_from_views_only() -> None:
    """With the same actions, moving every hidden truth changes the rewards but no observation
    row (what the agent sees: scores, losses, progress, the clock, the queue)."""
    batches = [CompiledBatch(2, "e2", **SMALL), ScrambledTruth(2, "e2", **SMALL)]
    for batch in batches:
        batch.reset([0, 1], [7, 8])
    rng = np.random.default_rng(3)
    rewards_differ = False
    while not batches[0].terminated.all():
        for key in batches[0].obs:
            assert batches[0].obs[key].tobytes() == batches[1].obs[key].tobytes(), key
        stop = (rng.random(2) < 0.1).astype(np.int64)
        for batch in batches:
            batch.step(stop)
        rewards_differ |= batches[0].reward.tobytes() != batches[1].reward.tobytes()
    assert batches[1].terminated.all()
    assert rewards_differ, "the scrambled truth never reached the reward: the test proves nothing"


# ---------------------------------------------------------------------------- arguments


@pytest.mark.parametrize(("kwargs", "named"), [
    ({"num_envs": 0}, "num_envs"),
    ({"num_envs": 2, "base_scheduler": "Nope"}, "Nope"),
    ({"num_envs": 2, "monitored": ("gpt",)}, "monitored"),
    ({"num_envs": 2, "milestones": (1.5,)}, "milestones"),
    ({"num_envs": 2, "cluster.kinds": [{"name": "a", "count": 32, "speed": 1.0},
                                       {"name": "b", "count": 32, "speed": 0.5}]},
     "cluster.kinds"),
])
def test_bad_arguments_fail_in_one_line(kwargs: dict, named: str) -> None:
    with pytest.raises(Exception) as err:
        CompiledBatch(**kwargs)
    assert named in str(err.value) and "\n" not in str(err.value)


def test_bad_steps_and_resets_fail_before_any_work() -> None:
    batch = CompiledBatch(2, "e2", **SMALL)
    batch.reset([0, 1], [1, 2])
    before = {k: v.copy() for k, v in batch.obs.items()}
    for bad in (np.array([0, 2]), np.array([0.5, 0.0]), np.zeros(3, np.int64)):
        with pytest.raises(ValueError, match="stop"):
            batch.step(bad)
    for indices, seeds in (([2], [1]), ([0], [-1]), ([0, 1], [1])):
        with pytest.raises(ValueError, match="indices|seeds"):
            batch.reset(indices, seeds)
    for key, value in before.items():
        assert batch.obs[key].tobytes() == value.tobytes()
