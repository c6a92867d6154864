"""`CompiledFullBatch` against `ReferenceFullBatch` (N single full-control envs), bit for bit:
tables, rewards, terminations, action masks, metrics and reward totals, over configs x every
compiled base x seeds, with masked random actions (and some unmasked, which both ignore where
invalid), mid-episode resets of some envs and resets at episode ends. `test_vector_full.py` holds
the vector env on this core against SyncVectorEnv."""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest

from evalstop_gym.env.compiled_full import CompiledFullBatch
from evalstop_gym.env.full_batch import ReferenceFullBatch
from evalstop_gym.env.vector import EvalStopClusterVectorEnv

# the full default workload (a queue longer than the 64 rows), milestones, tables cut short,
# small clusters that queue and preempt, every compiled base's key
CASES = [("e2", "SRTF-Est", (), {}),
         ("e2", "LAS", (0.65,), {"workload.n_jobs": 30, "cluster.gpus": 16, "max_jobs": 12}),
         ("e3", "FIFO", (), {"workload.n_jobs": 25, "cluster.gpus": 16, "max_jobs": 5}),
         ("e2", "SJF-Est", (), {"workload.n_jobs": 20, "cluster.gpus": 8,
                                "cluster.preemption_overhead_min": 7.0}),
         ("e3", "LossAware", (), {"workload.n_jobs": 20, "cluster.gpus": 16, "max_jobs": 8}),
         ("defaults", "EvalSched", (), {"workload.n_jobs": 12, "cluster.gpus": 8, "max_jobs": 6}),
         ("defaults", "EvalSched-Strict", (), {"workload.n_jobs": 12, "cluster.gpus": 8})]
SEEDS = [5, 61]


def differences(ref: ReferenceFullBatch, core: CompiledFullBatch) -> list[str]:
    """What differs between the two cores now (bits, NaN-exact), by name."""
    out = [f"obs[{k!r}]" for k in ref.obs if ref.obs[k].tobytes() != core.obs[k].tobytes()]
    out += [name for name, a, b in (("reward", ref.reward, core.reward),
                                    ("terminated", ref.terminated, core.terminated),
                                    ("action_masks", ref.action_masks(), core.action_masks()))
            if a.tobytes() != b.tobytes()]
    for i in np.flatnonzero(ref.terminated).tolist():
        out += [f"{what}({i})" for what in ("metrics", "reward_terms")
                if getattr(ref, what)(i) != getattr(core, what)(i)]
    return out


def masked_rows(space: gym.spaces.MultiDiscrete, flat: np.ndarray, rng: np.random.Generator
                ) -> np.ndarray:
    rows = []
    for mask in flat.astype(np.int8):
        space.seed(int(rng.integers(2**31)))
        parts = tuple(np.split(mask, np.cumsum(space.nvec)[:-1]))
        rows.append(space.sample() if rng.random() < 0.1 else space.sample(mask=parts))
    return np.stack(rows).astype(np.int64)


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("config", "base", "milestones", "kwargs"), CASES)
def test_the_compiled_full_core_gives_the_single_envs_episodes(config, base, milestones, kwargs,
                                                               seed):
    n = 3
    ref = ReferenceFullBatch(n, config, base, milestones=milestones, **kwargs)
    core = CompiledFullBatch(n, config, base, milestones=milestones, **kwargs)
    rng = np.random.default_rng(seed)
    seeds = [int(s) for s in rng.integers(0, 1000, n)]
    for batch in (ref, core):
        batch.reset(range(n), seeds)
    seen = {"ended": 0, "stops": 0, "picks": 0}
    for t in range(2000):
        assert differences(ref, core) == [], f"{config}/{base}/seed {seed} step {t}"
        flat = ref.action_masks()
        if seen["ended"] >= 4:
            break
        ended = np.flatnonzero(ref.terminated).tolist()
        again = ended if ended or t != 49 else [int(rng.integers(n))]   # one mid-episode
        if again:
            fresh = [int(s) for s in rng.integers(0, 1000, len(again))]
            for batch in (ref, core):
                batch.reset(again, fresh)
            seen["ended"] += len(ended)
            continue
        actions = masked_rows(ref.single_action_space, flat, rng)
        m = core.max_jobs
        seen["stops"] += int((actions[:, :m] * flat[:, 1:2 * m:2]).sum())
        seen["picks"] += int((actions[:, m] > 0).sum())
        for batch in (ref, core):
            batch.step(actions)
    assert seen["ended"] >= 4 and seen["stops"] > 0 and seen["picks"] > 0, seen


def test_the_vector_env_runs_full_control_compiled_unless_told_python():
    kwargs = {"num_envs": 2, "control": "full", "workload.n_jobs": 12}
    assert isinstance(EvalStopClusterVectorEnv(**kwargs).core, CompiledFullBatch)
    assert isinstance(EvalStopClusterVectorEnv(engine="native", **kwargs).core, CompiledFullBatch)
    assert type(EvalStopClusterVectorEnv(engine="python", **kwargs).core) is ReferenceFullBatch


def test_a_finished_env_shows_an_empty_table_and_only_keeps():
    core = CompiledFullBatch(1, "e2", max_jobs=4, **{"workload.n_jobs": 6})
    core.reset([0], [2])
    while not core.terminated[0]:
        core.step(np.zeros((1, 5), np.int64))
    assert not core.obs["jobs"].any() and not core.obs["job_mask"].any()
    assert core.action_masks()[0].tolist() == [True, False] * 4 + [True] + [False] * 4


def test_heaps_that_run_out_of_room_grow_and_the_episode_goes_on_alike(monkeypatch):
    """A step that finds too little heap room (ROOM) grows the heaps and resumes, the action
    applied once: the same bits as the reference, from heaps cut to the least a reset leaves."""
    import evalstop_gym.env.compiled_batch as compiled_batch  # the growth loop both cores run

    grown = []
    original = compiled_batch.grown_heaps
    monkeypatch.setattr(compiled_batch, "grown_heaps",
                        lambda loop: (grown.append(loop.heap.shape), original(loop))[1])
    kwargs = {"workload.n_jobs": 40, "cluster.gpus": 8, "max_jobs": 16}
    ref, core = ReferenceFullBatch(2, "e2", **kwargs), CompiledFullBatch(2, "e2", **kwargs)
    for batch in (ref, core):
        batch.reset([0, 1], [1, 2])
    loop = core._arrays.loop
    core._arrays = core._arrays._replace(loop=loop._replace(
        heap=np.ascontiguousarray(loop.heap[:, :40 + 6])))   # room for 4 events past n + 1
    rng = np.random.default_rng(0)
    while not ref.terminated.all():
        picks = (rng.random((2, 17)) * ref.action_masks()[:, 32:]).argmax(axis=1)
        actions = np.column_stack([np.zeros((2, 16), np.int64), picks])
        for batch in (ref, core):
            batch.step(actions)
        assert differences(ref, core) == []
    assert grown, "the heaps never ran out of room: the test would prove nothing"


def test_action_masks_handed_out_keep_their_values_and_cannot_be_written():
    """`gym_mask`'s arrays (rows share two read-only arrays) equal the reference's, and those
    handed out at a decision still hold its values after later steps."""
    kwargs = {"workload.n_jobs": 20, "cluster.gpus": 8, "max_jobs": 8}
    ref, core = ReferenceFullBatch(2, "e2", **kwargs), CompiledFullBatch(2, "e2", **kwargs)
    for batch in (ref, core):
        batch.reset([0, 1], [3, 4])
    held, rng = [], np.random.default_rng(2)
    for _ in range(40):
        for i in range(2):
            mine, theirs = core.gym_mask(i), ref.gym_mask(i)
            assert [a.tobytes() for a in mine] == [a.tobytes() for a in theirs]
            held.append((mine, [a.copy() for a in theirs]))
        picks = (rng.random((2, 9)) * ref.action_masks()[:, 16:]).argmax(axis=1)
        actions = np.column_stack([np.zeros((2, 8), np.int64), picks])
        for batch in (ref, core):
            batch.step(actions)
    assert all([a.tobytes() for a in mine] == [a.tobytes() for a in then] for mine, then in held)
    with pytest.raises(ValueError, match="read-only"):
        core.gym_mask(0)[0][1] = 1
