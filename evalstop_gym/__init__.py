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
