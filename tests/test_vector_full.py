"""The vector env in control="full" against SyncVectorEnv over single full-control envs, bit for
bit: observations, rewards, terminations, action masks and end-of-episode infos, over configs x
base schedulers x seeds, with actions drawn through each env's mask (and some drawn without it,
which the single env ignores where invalid), autoresets and mid-episode resets by reset_mask.
Plus Gymnasium's space checks, MaskablePPO's masks, and bad actions refused in one line.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.utils.env_checker import (
    check_action_space,
    check_observation_space,
    data_shares_objects,
)
from gymnasium.vector.utils import batch_space

import evalstop_gym  # noqa: F401  (registers the env and its vector entry point)
from evalstop_gym.env.compiled_full import CompiledFullBatch
from evalstop_gym.env.full_batch import check_full_actions
from evalstop_gym.env.vector import EvalStopClusterVectorEnv

ENV_ID = "EvalStopCluster-v0"
SMALL = {"workload.n_jobs": 12}
# each reaches another path: the default table, a table too small for the queue (rows cut),
# small clusters that queue and preempt, a base that reorders its queue by evals
CASES = [("e2", "SRTF-Est", {**SMALL, "max_jobs": 64}),
         ("e2", "FIFO", {**SMALL, "max_jobs": 4}),
         ("e3", "LossAware", {**SMALL, "max_jobs": 8, "cluster.gpus": 16}),
         ("defaults", "EvalSched", {"workload.n_jobs": 10, "cluster.gpus": 8, "max_jobs": 6}),
         ("e2", "SJF-Est", {**SMALL, "max_jobs": 10, "cluster.gpus": 16,
                            "cluster.preemption_overhead_min": 7.0})]
SEEDS = [3, 40]


def make(mode: str, n: int, config: str = "e2", base: str = "SRTF-Est", **kwargs):
    return gym.make_vec(ENV_ID, num_envs=n, vectorization_mode=mode, config=config,
                        base_scheduler=base, control="full", **{**SMALL, **kwargs})


def masked_actions(space: gym.spaces.MultiDiscrete, masks, rng, p_unmasked: float):
    """A row per env drawn within its mask, or (with p_unmasked) anywhere in the space; the
    space's own generator seeded from `rng`, so a run is reproducible."""
    space.seed(int(rng.integers(2**31)))
    rows = [space.sample() if rng.random() < p_unmasked else space.sample(mask=m) for m in masks]
    return np.stack(rows).astype(np.int64)


def components(flat: np.ndarray, space: gym.spaces.MultiDiscrete) -> tuple[np.ndarray, ...]:
    """A flat mask (MaskablePPO's form) split per component (Gymnasium's `sample` form)."""
    return tuple(np.split(flat.astype(np.int8), np.cumsum(space.nvec)[:-1]))


def same(a, b) -> bool:
    """Equal bits (a NaN equals itself), dtypes and shapes, through dicts, tuples and the
    object arrays SyncVectorEnv makes of tuples (Gymnasium's `data_equivalence`, NaN-exact)."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(same(a[k], b[k]) for k in a)
    if isinstance(a, (tuple, list)) or (isinstance(a, np.ndarray) and a.dtype == object):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b, strict=True))
    if isinstance(a, np.ndarray):
        return a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()
    return a is b or a == b


def assert_same(mine, theirs, what: str):
    assert same(mine, theirs), what


def assert_same_infos(mine: dict, theirs: dict, label: str):
    """Every key the vector env gives equals SyncVectorEnv's, masks and `_key` flags included;
    the end-of-episode keys appear exactly where SyncVectorEnv has them."""
    for key, value in mine.items():
        assert_same(value, theirs[key], f"{label}: info[{key!r}]")
    assert {k for k in theirs if k.lstrip("_") in {"metrics", "reward_terms"}} <= set(mine)


def run_pair(config: str, base: str, kwargs: dict, seed: int, steps: int = 160) -> dict:
    """The vector env and SyncVectorEnv stepped alike; a reset by mask every 37 steps."""
    n = 3
    mine, theirs = make("vector_entry_point", n, config, base, **kwargs), \
        make("sync", n, config, base, **kwargs)
    rng = np.random.default_rng(seed)
    obs_a, info_a = mine.reset(seed=seed)
    obs_b, info_b = theirs.reset(seed=seed)
    seen = {"ended": 0, "stops": 0, "picks": 0, "resets": 0}
    space = mine.single_action_space
    for t in range(steps):
        label = f"{config}/{base}/seed {seed} step {t}"
        assert_same(obs_a, obs_b, f"{label}: observations")
        assert_same_infos(info_a, info_b, label)
        flat = mine.action_masks()
        assert flat.shape == (n, int(space.nvec.sum())) and flat.dtype == np.bool_
        masks = [components(row, space) for row in flat]
        for i in np.flatnonzero(info_b["_action_mask"]):   # the envs that just reported
            assert_same(masks[i], info_b["action_mask"][i], f"{label}: action_masks()[{i}]")
        if t % 37 == 36:
            mask = rng.random(n) < 0.5
            mask[rng.integers(n)] = True
            reseed = [int(s) if m else None for s, m in zip(rng.integers(0, 1000, n), mask,
                                                            strict=True)]
            obs_a, info_a = mine.reset(seed=reseed, options={"reset_mask": mask})
            obs_b, info_b = theirs.reset(seed=reseed, options={"reset_mask": mask})
            seen["resets"] += int(mask.sum())
            continue
        actions = masked_actions(space, masks, rng, p_unmasked=0.1)
        rows = space.nvec.size - 1   # stop bits; flat holds (keep, stop) per row, then picks
        seen["stops"] += int((actions[:, :rows] * flat[:, 1:2 * rows:2]).sum())
        seen["picks"] += int((actions[:, -1] > 0).sum())
        obs_a, rew_a, term_a, trunc_a, info_a = mine.step(actions)
        obs_b, rew_b, term_b, trunc_b, info_b = theirs.step(actions)
        assert_same((rew_a, term_a, trunc_a), (rew_b, term_b, trunc_b), f"{label}: step")
        seen["ended"] += int(term_a.sum())
    mine.close()
    theirs.close()
    return seen


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize(("config", "base", "kwargs"), CASES)
def test_the_full_vector_env_gives_sync_vector_envs_episodes(config, base, kwargs, seed):
    seen = run_pair(config, base, kwargs, seed)
    assert seen["ended"] >= 3 and seen["resets"] >= 3   # autoresets and masked resets happened
    assert seen["picks"] > 0 and seen["stops"] > 0      # the agent's both parts were exercised


def test_spaces_are_the_single_envs_batched_and_pass_gymnasiums_checks():
    venv = make("vector_entry_point", 4, max_jobs=8)
    single = gym.make(ENV_ID, control="full", max_jobs=8, **SMALL)
    assert isinstance(venv, EvalStopClusterVectorEnv) and isinstance(venv.core, CompiledFullBatch)
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == single.action_space
    assert venv.observation_space == batch_space(single.observation_space, 4)
    assert venv.action_space == batch_space(single.action_space, 4)
    check_observation_space(venv.single_observation_space)
    check_action_space(venv.single_action_space)
    obs, info = venv.reset(seed=0)
    rng = np.random.default_rng(0)
    for _ in range(60):
        assert obs in venv.observation_space
        actions = masked_actions(venv.single_action_space, info["action_mask"], rng, 0.0)
        assert actions in venv.action_space
        new_obs, reward, term, trunc, info = venv.step(actions)
        assert not data_shares_objects(obs, new_obs), "a step's observation reuses the last one"
        assert reward.dtype == np.float64 and term.dtype == trunc.dtype == np.bool_
        assert info["_action_mask"].all() and "job_id" not in info
        obs = new_obs


def test_reset_with_a_seed_reproduces_the_run():
    """Gymnasium's reset-seed determinism, batched: the same seeds and actions, the same bits."""
    def run():
        venv, rng = make("vector_entry_point", 2, max_jobs=8), np.random.default_rng(5)
        obs, info = venv.reset(seed=9)
        out = [obs]
        for _ in range(80):
            *step, info = venv.step(masked_actions(venv.single_action_space,
                                                   info["action_mask"], rng, 0.2))
            out.append(tuple(step))
        return out
    assert same(run(), run())


@pytest.mark.parametrize(("actions", "match"), [
    (np.zeros((2, 8), np.int64), r"actions: expected integers of shape \(2, 9\)"),
    (np.zeros(9, np.int64), r"actions: expected integers of shape \(2, 9\)"),
    (np.zeros((2, 9)), r"got shape \(2, 9\) and dtype float64"),
    (np.array([[0] * 8 + [0], [0] * 3 + [2] + [0] * 5]),
     r"actions\[1, 3\]=2: a stop bit \(columns 0 to 7\) is 0 \(keep\) or 1"),
    (np.array([[0] * 8 + [9], [0] * 9]), r"actions\[0, 8\]=9: the pick \(last column\) is in "
                                         r"\[0, 8\]"),
    (np.array([[0] * 9, [0] * 8 + [-1]]), r"actions\[1, 8\]=-1"),
])
def test_bad_actions_are_one_line_errors_before_any_env_moves(actions, match):
    venv = make("vector_entry_point", 2, max_jobs=8)
    obs, _ = venv.reset(seed=0)
    with pytest.raises(ValueError, match=match) as error:
        venv.step(actions)
    assert "\n" not in str(error.value)
    for key, rows in venv.core.obs.items():
        assert rows.tobytes() == obs[key].tobytes()


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"engine": "native", "cluster.gpus": 32,
      "cluster.kinds": [{"name": "a", "count": 16, "speed": 1.5},
                        {"name": "b", "count": 16, "speed": 0.75}]},
     "engine='native' cannot run this: heterogeneous clusters"),
    ({"engine": "fast"}, "engine='fast'"),
    ({"max_jobs": 0}, r"max_jobs=0: expected a whole number in \[1, 4096\]"),
    ({"base_scheduler": "Nope"}, "Nope"),
    ({"cluster.gpus": 32, "cluster.kinds": [{"name": "a", "count": 16, "speed": 1.5},
                                            {"name": "b", "count": 16, "speed": 0.75}]},
     "homogeneous clusters only"),
])
def test_bad_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as error:
        EvalStopClusterVectorEnv(**{"num_envs": 2, "control": "full", **SMALL, **kwargs})
    assert "\n" not in str(error.value)


def test_check_full_actions_returns_int64_rows():
    rows = check_full_actions(np.array([[True, False, 2]]), 1, 2)
    assert rows.dtype == np.int64 and rows.tolist() == [[1, 0, 2]]
