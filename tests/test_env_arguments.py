"""The env's arguments are checked at construction and its actions at `step`: a bad value is one
ValueError naming it; what control="full" documents as ignored stays ignored."""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.config import ConfigError
from evalstop_gym.env import EvalStopClusterEnv

SMALL = {"workload.n_jobs": 20}


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"monitored": "rlhf"}, r"^monitored='rlhf': expected a sequence"),
    ({"monitored": ["bogus"]}, r"^monitored=\['bogus'\].*unknown"),
    ({"monitored": []}, r"^monitored=\[\]: expected one or more"),
    ({"monitored": 3}, r"^monitored=3: expected a sequence"),
    ({"milestones": [1.5]}, r"^milestones: 1.5 is not a progress point"),
    ({"milestones": [float("nan")]}, r"^milestones: nan"),
    ({"milestones": [0.0]}, r"^milestones: 0.0"),
    ({"milestones": [float("inf")]}, r"^milestones: inf"),
    ({"milestones": ["0.5"]}, r"^milestones: '0.5'"),
    ({"milestones": 0.5}, r"^milestones=0.5: expected a sequence"),
    ({"max_jobs": 2.5}, r"^max_jobs=2.5: expected a whole number"),
    ({"max_jobs": 0}, r"^max_jobs=0"),
    ({"max_jobs": True}, r"^max_jobs=True"),
    ({"max_jobs": 10**6}, r"^max_jobs=1000000"),
    ({"render_mode": "human"}, r"^render_mode='human'"),
])
def test_bad_env_arguments_are_one_line_errors(kwargs, match):
    with pytest.raises(ValueError, match=match) as err:
        EvalStopClusterEnv(**kwargs, **SMALL)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize(("kwargs", "match"), [
    ({"config": 5}, r"^config=5: expected an experiment"),
    ({"config": None}, r"^config=None: expected an experiment"),
    ({"overrides": [1]}, r"^overrides=\[1\]: expected a mapping"),
])
def test_bad_config_arguments_are_config_errors(kwargs, match):
    with pytest.raises(ConfigError, match=match):
        EvalStopClusterEnv(**kwargs)


def test_good_arguments_are_kept():
    env = EvalStopClusterEnv(monitored=["rlhf"], milestones=[0.65], **SMALL)
    assert env.monitored == ("rlhf",) and env.milestones == (0.65,)


@pytest.mark.parametrize("action", [1.7, "1", np.ones((2, 2), dtype=np.int64), 2, -1, 0.4,
                                    float("nan"), None, [], np.array([1.0]), np.array([0, 1])],
                         ids=repr)
def test_stop_mode_refuses_an_action_outside_its_space(action):
    """Each of these was once taken as stop or continue (or raised a raw error); the refused
    action leaves the episode where it was, so a valid action can follow."""
    env = EvalStopClusterEnv(**SMALL)
    env.reset(seed=1)
    before = env.unwrapped._request
    with pytest.raises(ValueError, match=r"control='stop' takes 0 \(continue\) or 1 \(stop\)"):
        env.step(action)
    assert env._request is before
    env.step(0)


@pytest.mark.parametrize("action", [0, 1, True, np.int64(1), np.array(0), np.array([1]),
                                    np.array([1], dtype=np.int8)], ids=repr)
def test_stop_mode_takes_every_form_of_a_valid_action(action):
    env = EvalStopClusterEnv(**SMALL)
    env.reset(seed=1)
    env.step(action)


def test_full_mode_ignores_invalid_parts_but_refuses_non_numbers():
    """Documented: stop bits on rows that are not running and picks beyond the table are
    ignored (no error, only running rows stop); a NaN or a string is an error."""
    env = EvalStopClusterEnv(control="full", max_jobs=8, **SMALL)
    env.reset(seed=2)
    n = 8
    ignored = np.array([1] * n + [n + 5])   # stop every row (only running ones stop), bad pick
    env.step(ignored)
    env.step(np.zeros(n + 1, dtype=np.float64))   # integral floats are whole numbers
    for bad in (np.full(n + 1, np.nan), ["a"] * (n + 1), None):
        with pytest.raises(ValueError, match="control='full' takes 9 integers"):
            env.step(bad)
    with pytest.raises(ValueError, match="must have 9 entries"):
        env.step(np.zeros(3, dtype=np.int64))


def test_a_full_action_of_the_right_count_but_another_shape_is_refused():
    """9 entries as a (3, 3) array are not one MultiDiscrete action of 9: refused, not
    flattened."""
    env = EvalStopClusterEnv(control="full", max_jobs=8, **{"workload.n_jobs": 12})
    env.reset(seed=0)
    with pytest.raises(ValueError, match=r"must have 9 entries, in one row of shape \(9,\); "
                                         r"got shape \(3, 3\)"):
        env.step(np.zeros((3, 3), dtype=np.int64))
    env.step(np.zeros(9, dtype=np.int64))
