"""Typed configuration of one simulated platform, and its validating YAML loader.

Three parts, each importing only the ones before it: validation.py (the one checking mechanism:
`_f` fields, `Validated`, building from data), schema.py (the platform's dataclasses and their
cross-field rules) and loading.py (YAML, `extends`, names found beside a file or in the package).
Loading rejects unknown keys and out-of-range values with a `ConfigError` that names the field
and the allowed range. Every name is importable from here.
"""

from .loading import (
    CONFIG_DIR,
    extends_chain,
    find_config,
    in_file,
    load_sim_config,
    merged,
    parse_yaml,
    read_yaml,
)
from .schema import (
    CORPUS_FAMILIES,
    CORPUS_NOISE,
    CURVE_SHAPE_CAP,
    CURVE_SOURCES,
    EVAL_COSTS,
    GPUS_CAP,
    JOBS_CAP,
    MAX_HORIZON_MIN,
    MAX_RUN_BYTES,
    MINUTES_CAP,
    NOISE_MODELS,
    PER_CHECK_BYTES,
    PER_JOB_BYTES,
    WORKLOAD_COUNTS,
    WORKLOAD_SOURCES,
    ClusterConfig,
    Curves,
    EvalSchedule,
    GpuKind,
    HackingCurve,
    IntRange,
    JobTypeConfig,
    JobTypes,
    LossCurve,
    MetricsConfig,
    Mix,
    NoiseConfig,
    Range,
    RewardConfig,
    SaturatingCurve,
    SimConfig,
    TraceConfig,
    WorkloadConfig,
    check_feasible,
    checks_per_job,
)
from .validation import (
    ConfigError,
    ConfigFieldError,
    Rule,
    Validated,
    _Cap,
    _f,
    allow,
    apply_overrides,
    build,
    to_dict,
    validate,
)

__all__ = [
    "CONFIG_DIR", "CORPUS_FAMILIES", "CORPUS_NOISE", "CURVE_SHAPE_CAP", "CURVE_SOURCES",
    "EVAL_COSTS", "GPUS_CAP", "JOBS_CAP", "MAX_HORIZON_MIN", "MAX_RUN_BYTES", "MINUTES_CAP",
    "NOISE_MODELS", "PER_CHECK_BYTES", "PER_JOB_BYTES", "WORKLOAD_COUNTS", "WORKLOAD_SOURCES",
    "ClusterConfig", "ConfigError", "ConfigFieldError", "Curves", "EvalSchedule", "GpuKind",
    "HackingCurve", "IntRange", "JobTypeConfig", "JobTypes", "LossCurve", "MetricsConfig", "Mix",
    "NoiseConfig", "Range", "RewardConfig", "Rule", "SaturatingCurve", "SimConfig",
    "TraceConfig", "Validated", "WorkloadConfig", "_Cap", "_f", "allow", "apply_overrides", "build",
    "check_feasible", "checks_per_job", "extends_chain", "find_config", "in_file",
    "load_sim_config", "merged", "parse_yaml", "read_yaml", "to_dict", "validate",
]
