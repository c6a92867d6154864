"""EvalStop Gym: scheduler-level early stopping of LLM fine-tuning jobs, as a benchmark.

    import evalstop_gym
    result = evalstop_gym.simulate("e2", "EvalStop-2+SRTF-Est", seed=42)

The policies, the experiment loader and the env class are exported lazily (PEP 562), so
`import evalstop_gym` stays light and no subpackage imports the top level while it loads.
"""

from typing import Any

from .config import ConfigError, SimConfig, load_sim_config
from .sim.protocols import Action, Allocation, StopDecision
from .sim.view import ClusterView, SchedulerJobView
from .simulate import RunResult, simulate

__version__ = "0.1.0"

# name -> (module, attribute), imported on first access
_LAZY = {
    "make_policy": ("evalstop_gym.policies", "make_policy"),
    "parse_policy": ("evalstop_gym.policies", "parse_policy"),
    "load_experiment": ("evalstop_gym.experiment", "load_experiment"),
    "list_experiments": ("evalstop_gym.experiment", "list_experiments"),
    "EvalStopClusterEnv": ("evalstop_gym.env.cluster_env", "EvalStopClusterEnv"),
    "HeuristicAgent": ("evalstop_gym.env.agents", "HeuristicAgent"),
    "replay": ("evalstop_gym.benchmarks.detectors.replay", "replay_logs"),
}

__all__ = [
    "Action", "Allocation", "ClusterView", "ConfigError", "RunResult", "SchedulerJobView",
    "SimConfig", "StopDecision", "load_sim_config", "simulate", *_LAZY,
]


def __getattr__(name: str) -> Any:
    if name not in _LAZY:
        raise AttributeError(f"module 'evalstop_gym' has no attribute {name!r}")
    import importlib

    module, attr = _LAZY[name]
    value = getattr(importlib.import_module(module), attr)
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})


# The Gymnasium env, registered by a string entry point so importing the package stays light.
from gymnasium.envs.registration import register as _register  # noqa: E402

_register(id="EvalStopCluster-v0", entry_point="evalstop_gym.env.cluster_env:EvalStopClusterEnv",
          vector_entry_point="evalstop_gym.env.vector:EvalStopClusterVectorEnv")
