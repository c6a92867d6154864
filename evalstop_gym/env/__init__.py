"""The Gymnasium adapter: `EvalStopCluster-v0`, its observation encodings, reward and agents."""

from .agents import HeuristicAgent, TableEvalStopAgent
from .cluster_env import EvalStopClusterEnv, resolve_config
from .observation import (
    CLUSTER_FIELDS,
    JOB_FIELDS,
    ROW_FIELDS,
    StopObservation,
    TableObservation,
    decode_stop,
)
from .reward import RewardTerms

__all__ = [
    "CLUSTER_FIELDS", "EvalStopClusterEnv", "HeuristicAgent", "JOB_FIELDS", "ROW_FIELDS",
    "RewardTerms", "StopObservation", "TableEvalStopAgent", "TableObservation", "decode_stop",
    "resolve_config",
]
