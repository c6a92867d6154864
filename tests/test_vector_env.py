"""The vector env and its batch cores: Gymnasium's vector API, and the single env's episodes.

Gymnasium has no vector env checker, so the invariants are written here: spaces and dtypes,
next-step autoreset exactly as SyncVectorEnv over single envs, per-env seeding, info masks; and
every core (ReferenceBatch; CompiledBatch once its module exists) row for row against single envs,
bit for bit.
"""

from __future__ import annotations

import gymnasium as gym
import numpy as np
import pytest
from gymnasium.vector import AutoresetMode
from gymnasium.vector.utils import batch_space

import evalstop_gym  # noqa: F401  (registers the env and its vector entry point)
from evalstop_gym.env import EvalStopClusterEnv
from evalstop_gym.env.batch_core import BatchCore, EpisodeSeeds, ReferenceBatch
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.env.vector import EvalStopClusterVectorEnv, select_core

ENV_ID = "EvalStopCluster-v0"
SMALL = {"workload.n_jobs": 12}   # about 50 decisions an episode: autoresets within a test
TWO_KINDS = [{"name": "fast", "count": 16, "speed": 1.5},
             {"name": "slow", "count": 16, "speed": 0.75}]
CASES = [("e2", "SRTF-Est", SMALL), ("e2", "FIFO", SMALL), ("e3", "LossAware", SMALL),
         ("defaults", "EvalSched", {"workload.n_jobs": 10, "cluster.gpus": 8}),
         ("e2", "SJF-Est", {**SMALL, "cluster.gpus": 32, "cluster.kinds": TWO_KINDS})]
CORES = [ReferenceBatch, CompiledBatch]


def vector(n=3, **kwargs):
    return gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point",
                        **{**SMALL, **kwargs})


def sync(n=3, **kwargs):
    return gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="sync", **{**SMALL, **kwargs})


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def assert_same_infos(mine, theirs):
    """Every key the vector env gives equals SyncVectorEnv's (masks included)."""
    for key, value in mine.items():
        if isinstance(value, dict):
            assert_same_infos(value, theirs[key])
        else:
            np.testing.assert_array_equal(value, theirs[key], err_msg=key)
    assert {k for k in theirs if k.lstrip("_") in {"metrics", "reward_terms"}} \
        <= set(mine)


def run_side_by_side(a, b, steps, seed, rng):
    """Step both vector envs with the same random actions; return the episodes that ended."""
    obs_a, info_a = a.reset(seed=seed)
    obs_b, info_b = b.reset(seed=seed)
    ended = 0
    for _ in range(steps):
        for key in obs_a:
            same_bits(obs_a[key], obs_b[key])
        assert_same_infos(info_a, info_b)
        actions = rng.integers(0, 2, a.num_envs)
        obs_a, rew_a, term_a, trunc_a, info_a = a.step(actions)
        obs_b, rew_b, term_b, trunc_b, info_b = b.step(actions)
        same_bits(rew_a, rew_b)
        same_bits(term_a, term_b)
        same_bits(trunc_a, trunc_b)
        ended += int(term_a.sum())
    return ended


def test_make_vec_returns_the_vector_env_with_gymnasium_spaces():
    venv = vector(4)
    single = gym.make(ENV_ID, **SMALL)
    assert isinstance(venv, EvalStopClusterVectorEnv) and venv.num_envs == 4
    assert venv.metadata["autoreset_mode"] == AutoresetMode.NEXT_STEP
    assert venv.single_observation_space == single.observation_space
    assert venv.single_action_space == gym.spaces.Discrete(2)
    assert venv.observation_space == batch_space(single.observation_space, 4)
    assert venv.action_space == gym.spaces.MultiDiscrete([2] * 4)
    obs, _ = venv.reset(seed=1)
    assert obs in venv.observation_space
    for _ in range(60):
        obs, reward, term, trunc, _ = venv.step(venv.action_space.sample())
        assert obs in venv.observation_space
        assert reward.dtype == np.float64 and reward.shape == (4,)
        assert term.dtype == trunc.dtype == np.bool_ and not trunc.any()
    assert venv.action_masks().shape == (4, 2) and venv.action_masks().all()
    venv.close()
    assert venv.closed


@pytest.mark.parametrize("config,base,overrides", CASES)
@pytest.mark.parametrize("engine", ["auto", "python"])
def test_the_vector_env_gives_sync_vector_envs_episodes(config, base, overrides, engine):
    """Next-step autoreset, unseeded autoresets and infos exactly as SyncVectorEnv over single
    envs with the same seeds and actions."""
    kwargs = {"config": config, "base_scheduler": base, **overrides}
    a, b = vector(3, engine=engine, **kwargs), sync(3, **kwargs)
    ended = run_side_by_side(a, b, 150, seed=7, rng=np.random.default_rng(0))
    assert ended >= 3   # autoresets happened


def test_kwargs_pass_through_make_vec():
    venv = vector(2, config="e3", base_scheduler="FIFO", monitored=("rlhf",),
                  milestones=(0.5,), engine="python", **{"noise.sigma": 0.01})
    single = venv.core.envs[1]
    assert venv.config.workload.n_jobs == 12 and venv.config.noise.sigma == 0.01
    assert single.base.name == "FIFO" and single.monitored == ("rlhf",)
    assert single.milestones == (0.5,)
    assert venv.single_observation_space == gym.make(
        ENV_ID, config="e3", milestones=(0.5,), **SMALL).observation_space


def test_an_ended_env_is_reset_on_the_next_step_with_its_action_ignored():
    runs = []
    for late_action in (0, 1):
        venv = vector(1)
        venv.reset(seed=3)
        term, steps = np.zeros(1, bool), 0
        while not term[0]:
            _, reward, term, _, info = venv.step([0])
            steps += 1
        assert info["_metrics"].all() and not info["_job_id"].any()
        obs, reward, term, trunc, info = venv.step([late_action])
        assert reward[0] == 0.0 and not term[0] and not trunc[0]
        assert info["_job_id"].all() and "metrics" not in info
        runs.append((steps, obs, venv.step([0])[:3]))
    single = gym.make(ENV_ID, **SMALL)
    single.reset(seed=3)
    assert sum(1 for _ in iter(lambda: single.step(0)[2], True)) + 1 == runs[0][0]
    for key in runs[0][1]:
        same_bits(runs[0][1][key], runs[1][1][key])
    same_bits(runs[0][2][1], runs[1][2][1])


def test_env_i_replays_a_single_env_seeded_alike_through_autoresets():
    venv = vector(2)
    venv.reset(seed=[11, 40])
    single = EvalStopClusterEnv(**SMALL)
    obs_s, _ = single.reset(seed=40)
    rng = np.random.default_rng(1)
    for _ in range(130):   # two and a half episodes of env 1
        action = int(rng.integers(0, 2))
        obs, reward, term, _, _ = venv.step(np.array([0, action]))
        obs_s, reward_s, term_s, _, _ = single.step(action)
        for key in obs:
            same_bits(obs[key][1], obs_s[key])
        assert reward[1] == reward_s and term[1] == term_s
        if term_s:
            obs_s, _ = single.reset()
            obs, reward, term, _, _ = venv.step(np.array([0, 1]))
            for key in obs:
                same_bits(obs[key][1], obs_s[key])
            assert reward[1] == 0.0 and not term[1]


def test_seeding_reproduces_and_differs():
    def trajectory(seed):
        venv = vector(2)
        obs, _ = venv.reset(seed=seed)
        rewards = [venv.step(np.ones(2, int))[1] for _ in range(80)]
        return np.concatenate(rewards)
    same_bits(trajectory(5), trajectory(5))
    assert not np.array_equal(trajectory(5), trajectory(6))
    unseeded = vector(2)
    unseeded.reset()
    assert unseeded.step(np.zeros(2, int))[1].shape == (2,)


def test_reset_mask_resets_only_the_masked_envs():
    venv = vector(2)
    obs, _ = venv.reset(seed=0)
    for _ in range(5):
        stepped, *_ = venv.step(np.zeros(2, int))
    obs, info = venv.reset(seed=[None, 1], options={"reset_mask": np.array([False, True])})
    fresh = gym.make(ENV_ID, **SMALL).reset(seed=1)[0]
    for key in obs:
        same_bits(obs[key][0], stepped[key][0])
        same_bits(obs[key][1], fresh[key])
    theirs = sync(2)   # infos from the reset envs only, as SyncVectorEnv gives them
    theirs.reset(seed=0)
    for _ in range(5):
        theirs.step(np.zeros(2, int))
    assert_same_infos(info, theirs.reset(seed=[None, 1],
                                         options={"reset_mask": np.array([False, True])})[1])
    assert info["_action_mask"].tolist() == [False, True]


def test_infos_are_plain_arrays_with_masks():
    """The information boundary, batched: infos hold numbers only (no view, job or hidden
    label), every key beside its `_key` mask; metrics appear exactly where an episode ended."""
    venv = vector(3)
    _, info = venv.reset(seed=2)
    seen_end = False
    for _ in range(120):
        _, _, term, _, info = venv.step(np.ones(3, int))
        stack = [info]
        while stack:
            node = stack.pop()
            for key, value in node.items():
                if isinstance(value, dict):
                    stack.append(value)
                    continue
                assert isinstance(value, np.ndarray) and value.dtype != object, key
                if not key.startswith("_"):
                    assert node[f"_{key}"].shape == (3,)
        same_bits(info["_job_id"], ~term)
        if term.any():
            seen_end = True
            same_bits(info["_metrics"], term)
            same_bits(info["_reward_terms"], term)
            assert set(info["metrics"]) >= {"jct", "recall", "fpr", "wasted_frac"}
    assert seen_end


@pytest.mark.parametrize("core", CORES)
@pytest.mark.parametrize("config,base,overrides", CASES[:3])
def test_every_core_row_is_the_single_env_bit_for_bit(core, config, base, overrides):
    """The contract: reset, step, metrics, reward terms and job ids per row (item 2)."""
    if core is not ReferenceBatch and "cluster.kinds" in overrides:
        pytest.skip("the compiled core runs homogeneous clusters")
    n, rng = 4, np.random.default_rng(3)
    batch: BatchCore = core(n, config, base, **overrides)
    singles = [EvalStopClusterEnv(config, base, **overrides) for _ in range(n)]
    seeds = [0, 1, 17, 123]
    batch.reset(range(n), seeds)
    rows = [env.reset(seed=s) for env, s in zip(singles, seeds, strict=True)]
    done = np.zeros(n, bool)
    while not done.all():
        for i, (obs, info) in enumerate(rows):
            if done[i]:
                continue
            for key in obs:
                same_bits(batch.obs[key][i], obs[key])
            assert batch.job_id(i) == info.get("job_id", -1)
        actions = rng.integers(0, 2, n)
        batch.step(actions)
        for i, env in enumerate(singles):
            if done[i]:
                assert batch.reward[i] == 0.0 and batch.terminated[i]
                continue
            obs, reward, term, _, info = env.step(int(actions[i]))
            rows[i] = (obs, info)
            same_bits(batch.reward[i], np.float64(reward))
            assert batch.terminated[i] == term
            if term:
                done[i] = True
                for key in obs:
                    same_bits(batch.obs[key][i], obs[key])
                assert batch.metrics(i) == pytest.approx(info["metrics"], rel=0, abs=0,
                                                         nan_ok=True)
                assert batch.reward_terms(i) == info["reward_terms"]
                assert batch.job_id(i) == -1


@pytest.mark.parametrize("kwargs,match", [
    ({"control": "both"}, "control='both': choose one of stop, full"),
    ({"max_jobs": 0}, r"max_jobs=0: expected a whole number in \[1, 4096\]"),
    ({"engine": "fast"}, "engine='fast'"),
    ({"num_envs": 0}, r"num_envs=0: expected a whole number in \[1, 4096\]"),
    ({"num_envs": 5000}, "num_envs=5000"),
    ({"base_scheduler": "Nope"}, "Nope"),
    ({"monitored": "rlhf"}, "monitored="),
    ({"engine": "native", "cluster.gpus": 32, "cluster.kinds": TWO_KINDS}, "cluster.kinds"),
    ({"render_mode": "ansi"}, "render_mode="),
])
def test_bad_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as error:
        EvalStopClusterVectorEnv(**{"num_envs": 2, **SMALL, **kwargs})
    assert "\n" not in str(error.value)


@pytest.mark.parametrize("actions", [[0, 2], [0], [[0, 1]], [0.5, 1.0]])
def test_bad_actions_are_refused_before_any_env_moves(actions):
    venv = vector(2)
    obs, _ = venv.reset(seed=0)
    with pytest.raises(ValueError, match="actions: expected 2 values") as error:
        venv.step(np.array(actions))
    assert "\n" not in str(error.value)
    for key, rows in venv.core.obs.items():
        same_bits(rows, obs[key])


@pytest.mark.parametrize("seed", [[1], [1, -2], -1, "3", [1.5, 2]])
def test_bad_seeds_are_one_line_errors(seed):
    with pytest.raises(ValueError, match="seed: expected None"):
        vector(2).reset(seed=seed)


def test_step_before_reset_is_an_error():
    with pytest.raises(RuntimeError, match="reset"):
        vector(2).step(np.zeros(2, int))


def test_engine_selection():
    cfg = vector(1).config
    assert select_core("python", cfg, "SRTF-Est") is ReferenceBatch
    het = cfg.with_overrides({"cluster.gpus": 32, "cluster.kinds": TWO_KINDS})
    assert select_core("auto", het, "SRTF-Est") is ReferenceBatch
    assert select_core("auto", cfg, "SRTF-Est") is CompiledBatch
    assert select_core("native", cfg, "SRTF-Est") is CompiledBatch
    with pytest.raises(ValueError, match="engine='native' cannot run this: heterogeneous"):
        select_core("native", het, "SRTF-Est")


def test_unseeded_draws_follow_the_single_envs_generator():
    seeds = EpisodeSeeds(2)
    first = seeds.draw([0, 1], [5, 6])
    later = seeds.draw([0, 1], [None, None])
    env = EvalStopClusterEnv(**SMALL)
    env.reset(seed=5)
    env.reset()
    assert first == [5, 6] and later[0] == env._seed


def test_gymnasiums_vector_wrappers_compose():
    """RecordEpisodeStatistics reads the autoreset mode: its episode return is the rewards' sum."""
    from gymnasium.wrappers.vector import RecordEpisodeStatistics

    venv = RecordEpisodeStatistics(vector(2))
    venv.reset(seed=0)
    totals, checked = np.zeros(2), 0
    for _ in range(120):
        _, reward, term, _, info = venv.step(np.zeros(2, int))
        totals += reward
        for i in np.flatnonzero(term):
            assert info["episode"]["r"][i] == pytest.approx(totals[i])
            totals[i], checked = 0.0, checked + 1
    assert checked >= 2


@pytest.mark.parametrize("options", [5, "abc", ["reset_mask"], {"reset_mask": None, "x": 1},
                                     {"seed": 3}])
def test_reset_options_other_than_a_dict_of_reset_mask_are_one_line(options):
    env = EvalStopClusterVectorEnv(**{"num_envs": 2, **SMALL})
    with pytest.raises(ValueError, match=r"^options=.*: expected None or a dict whose one key is "
                                         r"'reset_mask' \(a bool array of shape \(2,\)\)$"):
        env.reset(options=options)
    mask = {"reset_mask": np.array([True, False])}
    with pytest.raises(ValueError, match=r"^options\['reset_mask'\]: the first reset\(\) resets "
                                         r"every env"):
        env.reset(options=mask)
    env.reset(seed=1)
    env.reset(options=mask)   # the allowed form, once every env has an episode


def test_step_and_reset_after_close_are_refused():
    env = EvalStopClusterVectorEnv(**{"num_envs": 2, **SMALL})
    env.reset(seed=0)
    env.close()
    for call in (lambda: env.step(np.zeros(2, dtype=np.int64)), lambda: env.reset(seed=0)):
        with pytest.raises(RuntimeError, match=r"\(\) after close\(\): the env is closed"):
            call()
