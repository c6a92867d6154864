"""The Gymnasium adapter: `EvalStopCluster-v0`, its vector env, observation encodings, reward and
agents."""

from .agents import HeuristicAgent, TableEvalStopAgent
from .batch_core import BatchCore, ReferenceBatch
from .cluster_env import EvalStopClusterEnv, resolve_config
from .full_batch import ReferenceFullBatch
from .observation import (
    CLUSTER_FIELDS,
    JOB_FIELDS,
    ROW_FIELDS,
    StopObservation,
    TableObservation,
    decode_stop,
)
from .reward import RewardTerms
from .vector import EvalStopClusterVectorEnv

__all__ = [
    "CLUSTER_FIELDS", "BatchCore", "EvalStopClusterEnv", "EvalStopClusterVectorEnv",
    "HeuristicAgent", "JOB_FIELDS", "ROW_FIELDS", "ReferenceBatch", "ReferenceFullBatch",
    "RewardTerms", "StopObservation", "TableEvalStopAgent", "TableObservation", "decode_stop",
    "resolve_config",
]
