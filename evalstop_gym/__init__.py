"""EvalStop Gym: scheduler-level early stopping of LLM fine-tuning jobs, as a benchmark."""

from .config import ConfigError, SimConfig, load_sim_config
from .sim.protocols import Action, Allocation, StopDecision
from .sim.view import ClusterView, SchedulerJobView
from .simulate import RunResult, simulate

__version__ = "0.1.0"

__all__ = [
    "Action", "Allocation", "ClusterView", "ConfigError", "RunResult", "SchedulerJobView",
    "SimConfig", "StopDecision", "load_sim_config", "simulate",
]

# The Gymnasium env, registered by a string entry point so importing the package stays light.
from gymnasium.envs.registration import register as _register  # noqa: E402

_register(id="EvalStopCluster-v0", entry_point="evalstop_gym.env.cluster_env:EvalStopClusterEnv")
