"""The SB3 adapter over the vector env: DummyVecEnv's conventions and episodes, PPO and
MaskablePPO training on it, composition with MaskedVecNormalize."""

from __future__ import annotations

import numpy as np
import pytest

pytest.importorskip("stable_baselines3")
from sb3_contrib import MaskablePPO  # noqa: E402
from sb3_contrib.common.maskable.utils import get_action_masks, is_masking_supported  # noqa: E402
from stable_baselines3 import PPO  # noqa: E402
from stable_baselines3.common.env_util import make_vec_env  # noqa: E402
from stable_baselines3.common.monitor import Monitor  # noqa: E402

import evalstop_gym  # noqa: E402,F401  (registers the env)
from evalstop_gym.env.sb3 import (  # noqa: E402
    EpisodeMetricsCallback,
    MaskedVecNormalize,
    VectorEnvAdapter,
)

SMALL = {"workload.n_jobs": 12}
ENGINES = ["python", "auto", "native"]


def same_bits(a, b):
    a, b = np.asarray(a), np.asarray(b)
    assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes()


def same_obs(a, b):
    assert a.keys() == b.keys()
    for key in a:
        same_bits(a[key], b[key])


def step_both(mine, theirs, actions):
    """Step both VecEnvs alike; their observations, rewards and dones must be equal bits."""
    obs_a, rew_a, done_a, infos_a = mine.step(actions)
    obs_b, rew_b, done_b, infos_b = theirs.step(actions)
    same_obs(obs_a, obs_b)
    same_bits(rew_a, rew_b)
    same_bits(done_a, done_b)
    return done_a, infos_a, infos_b


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("config,base", [("e2", "SRTF-Est"), ("e3", "FIFO")])
def test_the_adapter_gives_dummy_vec_envs_episodes(engine, config, base):
    kwargs = {"config": config, "base_scheduler": base, **SMALL}
    mine = VectorEnvAdapter.make(3, seed=21, engine=engine, **kwargs)
    theirs = make_vec_env("EvalStopCluster-v0", n_envs=3, seed=21, env_kwargs=kwargs)
    same_obs(mine.reset(), theirs.reset())
    rng, ended = np.random.default_rng(4), 0
    for _ in range(150):
        actions = rng.integers(0, 2, 3)
        done_a, infos_a, infos_b = step_both(mine, theirs, actions)
        for info_a, info_b in zip(infos_a, infos_b, strict=True):
            for key, value in info_a.items():
                if key == "terminal_observation":
                    same_obs(value, info_b[key])
                elif key == "metrics":
                    assert value == pytest.approx(info_b[key], rel=0, abs=0, nan_ok=True)
                else:
                    np.testing.assert_array_equal(value, info_b[key], err_msg=key)
            assert {"metrics", "terminal_observation", "job_id"} & info_b.keys() <= info_a.keys()
        ended += int(done_a.sum())
    assert ended >= 3
    assert [info.get("job_id") for info in mine.reset_infos] == \
        [info.get("job_id") for info in theirs.reset_infos]


def test_vec_env_api_invariants():
    adapter = VectorEnvAdapter.make(4, seed=0, **SMALL)
    assert adapter.seed(5) == [5, 6, 7, 8]
    obs = adapter.reset()
    assert adapter.observation_space.keys() == obs.keys()
    for i in range(4):
        assert {k: v[i] for k, v in obs.items()} in adapter.observation_space
    obs, rewards, dones, infos = adapter.step(np.array([0, 1, 0, 1]))
    assert rewards.dtype == np.float32 and dones.dtype == np.bool_ and len(infos) == 4
    assert all(info["TimeLimit.truncated"] is False for info in infos)
    assert is_masking_supported(adapter)
    assert get_action_masks(adapter).shape == (4, 2) and adapter.action_masks().all()
    assert adapter.get_attr("render_mode") == [None] * 4
    assert adapter.get_attr("config", indices=[1, 2]) == [adapter.venv.config] * 2
    assert adapter.env_method("job_id", indices=0) == [adapter.core.job_id(0)]
    assert adapter.env_is_wrapped(Monitor) == [False] * 4
    adapter.set_attr("note", "x")
    assert adapter.get_attr("note") == ["x"] * 4
    with pytest.raises(ValueError, match="indices=.*set 'note' for all of them"):
        adapter.set_attr("note", "y", indices=[0])
    with pytest.raises(AttributeError):
        adapter.get_attr("no_such_attribute")
    with pytest.raises(ValueError, match="actions: expected 4 values"):
        adapter.step(np.array([0, 2, 0, 0]))
    adapter.close()


class EndedEpisodes(EpisodeMetricsCallback):
    """EpisodeMetricsCallback, counting the episodes whose metrics it logged."""

    def _on_training_start(self) -> None:
        self.ended = 0

    def _on_step(self) -> bool:
        self.ended += sum(1 for done, info in zip(self.locals["dones"], self.locals["infos"],
                                                  strict=True) if done and "metrics" in info)
        return super()._on_step()


def test_ppo_learns_on_the_adapter_and_logs_episode_metrics():
    adapter = VectorEnvAdapter.make(8, seed=10_000, **SMALL)
    model = PPO("MultiInputPolicy", adapter, n_steps=32, batch_size=64, n_epochs=1,
                seed=0, device="cpu")
    callback = EndedEpisodes()
    model.learn(512, callback=callback)
    assert model.num_timesteps == 512 and callback.ended >= 8


def trained_maskable_ppo(**kwargs):
    """MaskablePPO after 256 steps on 4 clusters behind MaskedVecNormalize."""
    venv = MaskedVecNormalize(VectorEnvAdapter.make(4, seed=10_000, **kwargs))
    model = MaskablePPO("MultiInputPolicy", venv, n_steps=32, batch_size=64, n_epochs=1,
                        seed=0, device="cpu")
    model.learn(256)
    assert model.num_timesteps == 256
    return venv, model


def test_maskable_ppo_learns_through_masked_vec_normalize():
    venv, model = trained_maskable_ppo(**SMALL)
    obs = venv.reset()
    actions, _ = model.predict(obs, action_masks=get_action_masks(venv), deterministic=True)
    assert actions.shape == (4,)


def test_the_adapter_stepped_before_reset_says_so_in_one_line():
    adapter = VectorEnvAdapter.make(2, seed=0, **SMALL)
    with pytest.raises(RuntimeError, match=r"^VectorEnvAdapter: call reset\(\) before step\(\)"):
        adapter.step(np.zeros(2, dtype=np.int64))
    adapter.reset()
    adapter.step(np.zeros(2, dtype=np.int64))


@pytest.mark.parametrize("seed", [-1, "x", 1.5, True])
def test_the_adapters_seed_is_none_or_a_whole_number(seed):
    message = rf"^seed={seed!r}: expected None or a whole number >= 0 \(env i's next reset"
    with pytest.raises(ValueError, match=message):
        VectorEnvAdapter.make(2, seed=seed, **SMALL)
    adapter = VectorEnvAdapter.make(2, seed=None, **SMALL)
    with pytest.raises(ValueError, match=message):
        adapter.seed(seed)


def test_the_adapter_takes_one_action_per_env_and_none_after_close():
    """(num_envs,) or (num_envs, 1) actions; a (2, 2) array for 4 envs is refused, not
    reshaped; a step after close() is refused."""
    adapter = VectorEnvAdapter.make(4, seed=0, **SMALL)
    adapter.reset()
    adapter.step(np.zeros((4, 1), dtype=np.int64))
    with pytest.raises(ValueError, match=r"^actions: expected 4 values, each 0 \(continue\) or "
                                         r"1 \(stop\); got shape \(2, 2\)"):
        adapter.step(np.zeros((2, 2), dtype=np.int64))
    adapter.close()
    with pytest.raises(RuntimeError, match=r"^step\(\) after close\(\): the env is closed"):
        adapter.step(np.zeros(4, dtype=np.int64))


FULL = {**SMALL, "control": "full", "max_jobs": 8}


def flat_to_components(flat, space):
    return tuple(np.split(flat.astype(np.int8), np.cumsum(space.nvec)[:-1]))


@pytest.mark.parametrize("config,base", [("e2", "SRTF-Est"), ("e3", "FIFO")])
def test_the_full_control_adapter_gives_dummy_vec_envs_episodes_and_masks(config, base):
    """control="full": observations, rewards, dones, infos (the single env's mask tuples) and
    MaskablePPO's stacked masks as DummyVecEnv over single full-control envs."""
    kwargs = {"config": config, "base_scheduler": base, **FULL}
    mine = VectorEnvAdapter.make(3, seed=21, **kwargs)
    theirs = make_vec_env("EvalStopCluster-v0", n_envs=3, seed=21, env_kwargs=kwargs)
    same_obs(mine.reset(), theirs.reset())
    space, rng, ended = mine.action_space, np.random.default_rng(4), 0
    for _ in range(150):
        masks = get_action_masks(mine)
        same_bits(masks, get_action_masks(theirs))
        space.seed(int(rng.integers(2**31)))
        actions = np.stack([space.sample(mask=flat_to_components(m, space)) for m in masks])
        done_a, infos_a, infos_b = step_both(mine, theirs, actions)
        for info_a, info_b in zip(infos_a, infos_b, strict=True):
            assert len(info_a["action_mask"]) == len(info_b["action_mask"]) == 9
            for part_a, part_b in zip(info_a["action_mask"], info_b["action_mask"], strict=True):
                same_bits(part_a, part_b)
            if "terminal_observation" in info_b:
                same_obs(info_a["terminal_observation"], info_b["terminal_observation"])
                assert info_a["metrics"] == pytest.approx(info_b["metrics"], rel=0, abs=0,
                                                          nan_ok=True)
            assert "job_id" not in info_a
        ended += int(done_a.sum())
    assert ended >= 3


def test_maskable_ppo_acts_within_the_full_control_masks():
    venv, model = trained_maskable_ppo(**FULL)
    obs, forbidden = venv.reset(), 0
    for _ in range(50):
        masks = get_action_masks(venv)
        assert masks.shape == (4, 3 * 8 + 1) and not masks.all()   # some options forbidden
        actions, _ = model.predict(obs, action_masks=masks)
        chosen = [np.concatenate([2 * np.arange(8) + a[:8], [16 + a[8]]]) for a in actions]
        forbidden += sum(int((~m[c]).sum()) for m, c in zip(masks, chosen, strict=True))
        obs, *_ = venv.step(actions)
    assert forbidden == 0


def test_the_full_control_adapter_refuses_bad_rows_in_one_line():
    adapter = VectorEnvAdapter.make(2, seed=0, **FULL)
    adapter.reset()
    with pytest.raises(ValueError, match=r"^actions: expected integers of shape \(2, 9\)"):
        adapter.step(np.zeros(2, dtype=np.int64))
    with pytest.raises(ValueError, match=r"^actions\[0, 8\]=9: the pick"):
        adapter.step(np.array([[0] * 8 + [9], [0] * 9]))
