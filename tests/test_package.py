"""The top-level API: `simulate` with names or objects, its seed check, and the lazy exports."""

from __future__ import annotations

import subprocess
import sys

import pytest

import evalstop_gym
from evalstop_gym.config import ConfigError
from evalstop_gym.experiment import load_experiment
from evalstop_gym.policies import parse_policy

SMALL = {"workload.n_jobs": 20}


def test_simulate_takes_names_paths_or_objects_and_agrees():
    """A name, a YAML path and a SimConfig (and a policy name or object) give the same run."""
    config = load_experiment("e2").config.with_overrides(SMALL)
    by_object = evalstop_gym.simulate(config, parse_policy("EvalStop-2+SRTF-Est"), 42)
    by_name = evalstop_gym.simulate(config, "EvalStop-2+SRTF-Est", 42)
    assert by_name.metrics == by_object.metrics and by_name.policy == "EvalStop-2+SRTF-Est"
    from evalstop_gym.config import CONFIG_DIR

    named = evalstop_gym.simulate("e2", "SRTF-Est", 3)
    pathed = evalstop_gym.simulate(CONFIG_DIR / "e2.yaml", "SRTF-Est", 3)
    assert named.metrics == pathed.metrics and named.metrics["jct"] > 0


@pytest.mark.parametrize("seed", [None, True, False, 1.5, "3", -1])
def test_simulate_requires_an_int_seed(seed):
    with pytest.raises(ValueError, match=r"^seed=.*whole number >= 0"):
        evalstop_gym.simulate("e2", "SRTF-Est", seed)


@pytest.mark.parametrize("config", [5, None, 1.5, True])
def test_simulate_rejects_a_config_of_the_wrong_type(config):
    with pytest.raises(ConfigError, match=r"^config=.*experiment or platform name"):
        evalstop_gym.simulate(config, "SRTF-Est", 1)


def test_simulate_rejects_an_unknown_policy_name_and_a_non_policy():
    from evalstop_gym.policies import PolicyNameError

    with pytest.raises(PolicyNameError, match="Bogus"):
        evalstop_gym.simulate("e2", "Bogus-3+SRTF-Est", 1)
    with pytest.raises(TypeError, match="policy="):
        evalstop_gym.simulate("e2", 5, 1)


def test_top_level_exports_what_a_user_needs():
    from evalstop_gym.env import EvalStopClusterEnv

    for name in ("simulate", "make_policy", "load_experiment", "EvalStopClusterEnv"):
        assert name in evalstop_gym.__all__ and name in dir(evalstop_gym)
    assert evalstop_gym.EvalStopClusterEnv is EvalStopClusterEnv
    assert evalstop_gym.load_experiment("e2").name == "e2"
    assert evalstop_gym.make_policy("SRTF-Est", "EvalStop-2").name == "EvalStop-2+SRTF-Est"
    with pytest.raises(AttributeError, match="no attribute 'nope'"):
        evalstop_gym.nope  # noqa: B018


def test_importing_the_package_loads_no_env_policies_or_training_library():
    """`import evalstop_gym` stays light: the lazy exports load only when asked for."""
    code = ("import sys, evalstop_gym; heavy = [m for m in ('evalstop_gym.policies', "
            "'evalstop_gym.env.cluster_env', 'torch', 'stable_baselines3', 'pandas') "
            "if m in sys.modules]; print(heavy)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
