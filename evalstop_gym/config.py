"""Typed configuration of one simulated platform, and its validating YAML loader.

Every constant that shapes a run lives in a frozen dataclass below; the numbers themselves live
in `configs/*.yaml` with a comment saying where each comes from. Loading rejects unknown keys and
out-of-range values with a `ConfigError` that names the field and the allowed range.
"""

from __future__ import annotations

import dataclasses
import math
import types
import typing
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

Range = tuple[float, float]
IntRange = tuple[int, int]

# The packaged experiment and platform files (the repository's configs/, installed as
# evalstop_gym.configs). pip always unpacks a wheel, so this is a directory on disk.
CONFIG_DIR = Path(str(resources.files("evalstop_gym.configs")))


class ConfigError(ValueError):
    """A configuration value is missing, misspelt or outside its allowed range."""


def _f(default: Any, lo: float | None = None, hi: float | None = None, doc: str = "",
       lo_open: bool = False) -> Any:
    """A dataclass field with an allowed numeric range used by the validator."""
    meta = {"lo": lo, "hi": hi, "doc": doc, "lo_open": lo_open}
    return field(default=default, metadata=meta)


@dataclass(frozen=True)
class GpuKind:
    """One kind of GPU in a heterogeneous cluster."""

    name: str = _f("gpu", doc="a label, e.g. A100")
    count: int = _f(1, 1, None, "GPUs of this kind")
    speed: float = _f(1.0, 0, None, "training and eval speed relative to the reference GPU",
                      lo_open=True)


@dataclass(frozen=True)
class ClusterConfig:
    gpus: int = _f(64, 1, None, "GPUs in the cluster (the kinds' total when kinds are given)")
    preemption_overhead_min: float = _f(2.0, 0, None,
                                        "minutes of restart cost when a preempted job resumes")
    kinds: tuple[GpuKind, ...] = _f((), doc="GPU kinds; empty: `gpus` identical reference GPUs")
    time_slice_share: float = _f(0.1, 0, 1, "share of time a time-sliced job trains and "
                                 "evaluates while it keeps its GPUs (EvalSched's demoted jobs)",
                                 lo_open=True)


@dataclass(frozen=True)
class Mix:
    """Fractions of jobs of each type; must sum to 1."""

    lora: float = _f(0.1, 0, 1)
    dpo: float = _f(0.1, 0, 1)
    rlhf: float = _f(0.8, 0, 1)


@dataclass(frozen=True)
class WorkloadConfig:
    n_jobs: int = _f(200, 1, None, "jobs per run")
    n_tenants: int = _f(5, 1, None, "tenants, assigned uniformly at random")
    arrival_rate_per_min: float = _f(0.26, 0, None, "Poisson arrival rate (jobs per minute)",
                                     lo_open=True)
    mix: Mix = field(default_factory=Mix)
    hacking_fraction: float = _f(0.6, 0, 1, "fraction of RLHF jobs that reward-hack")
    counts: str = _f("independent", doc="independent (each job's type and hacking label drawn "
                     "on its own) or exact (the mix and the hacking fraction as fixed counts, "
                     "largest remainder, in an order shuffled by the seed)")
    source: str = _f("synthetic", doc="synthetic (Poisson arrivals, the sizes above) or philly "
                     "(arrivals, durations and GPUs from the `trace` section; n_jobs, "
                     "arrival_rate_per_min and mix are then unused)")


@dataclass(frozen=True)
class LossCurve:
    """Training loss: exponential decay to a floor, reached (within `residual`) at the plateau."""

    initial: Range = _f((2.0, 3.0), 0, None, "loss at progress 0", lo_open=True)
    floor_fraction: Range = _f((0.2, 0.4), 0, 1, "floor as a fraction of the initial loss")
    plateau_progress: Range = _f((0.5, 0.7), 0, 1, "progress where the decay is done", lo_open=True)
    residual: Range = _f((0.01, 0.08), 0, 1, "fraction of the drop still left at the plateau",
                         lo_open=True)


@dataclass(frozen=True)
class JobTypeConfig:
    duration_min: Range = _f((60.0, 360.0), 0, None, "true training minutes, uniform", lo_open=True)
    gpus: IntRange = _f((4, 8), 1, None, "GPU demand, uniform integer, inclusive")
    eval_minutes: float = _f(2.0, 0, None, "minutes one eval occupies the job's GPUs")
    loss: LossCurve = field(default_factory=LossCurve)

    @property
    def duration_estimate(self) -> float:
        """The non-clairvoyant estimate a scheduler may use: the type's mean duration."""
        return (self.duration_min[0] + self.duration_min[1]) / 2


@dataclass(frozen=True)
class JobTypes:
    lora: JobTypeConfig = field(default_factory=lambda: JobTypeConfig(
        (10.0, 60.0), (1, 2), 0.5, LossCurve((1.5, 2.5), (0.3, 0.5), (0.6, 1.0), (0.01, 0.05))))
    dpo: JobTypeConfig = field(default_factory=lambda: JobTypeConfig(
        (30.0, 120.0), (2, 4), 1.0, LossCurve((0.6, 0.8), (0.3, 0.5), (0.5, 0.9), (0.01, 0.08))))
    rlhf: JobTypeConfig = field(default_factory=JobTypeConfig)


@dataclass(frozen=True)
class SaturatingCurve:
    """Eval score start + gain (1 - exp(-p/c)) / (1 - exp(-1/c)): monotone; saturates if c small."""

    start: Range = _f((0.2, 0.35), 0, 1, "eval score at progress 0")
    gain: Range = _f((0.3, 0.5), 0, 1, "rise from progress 0 to 1")
    time_constant: Range = _f((0.2, 0.4), 0, None, "c, in progress units", lo_open=True)


@dataclass(frozen=True)
class HackingCurve:
    """Gao et al. (2023): gold reward R(d) = d (alpha - beta ln d), d = sqrt(KL).

    Normalised, R/R* = u (1 - ln u) with u = d/d*. Progress maps to KL distance as
    u = (p / peak) ** collapse: collapse = 1 is d proportional to progress (a mild post-peak
    drop); larger values model KL growing faster than progress late in training, the
    stronger collapse the paper's curves show.
    """

    start: Range = _f((0.2, 0.35), 0, 1, "eval score at progress 0")
    gain: Range = _f((0.3, 0.5), 0, 1, "rise from progress 0 to the peak")
    peak_progress: Range = _f((0.55, 0.75), 0, 1, "progress of the true eval peak", lo_open=True)
    collapse: Range = _f((1.5, 2.5), 0, None, "exponent of the progress-to-KL map", lo_open=True)


@dataclass(frozen=True)
class Curves:
    lora: SaturatingCurve = field(default_factory=SaturatingCurve)
    dpo: SaturatingCurve = field(default_factory=lambda: SaturatingCurve(
        time_constant=(0.4, 0.8)))
    rlhf_healthy: SaturatingCurve = field(default_factory=lambda: SaturatingCurve(
        time_constant=(1.0, 3.0)))
    rlhf_hacking: HackingCurve = field(default_factory=HackingCurve)
    source: str = _f("synthetic", doc="synthetic (the formula curves above) or corpus (real "
                     "training curves shipped with the package, evalstop_gym.traces.corpus: "
                     "labels and true peaks from each run's test curve)")
    corpus_lora: str = _f("supervised", doc="corpus family of LoRA jobs: supervised or reward")
    corpus_dpo: str = _f("supervised", doc="corpus family of DPO jobs: supervised or reward")
    corpus_rlhf: str = _f("reward", doc="corpus family of RLHF jobs: supervised or reward")
    corpus_noise: str = _f("recorded", doc="recorded (a corpus run's evals as logged) or added "
                           "(plus the noise section's draw)")


CURVE_SOURCES = ("synthetic", "corpus")
CORPUS_FAMILIES = ("supervised", "reward")
CORPUS_NOISE = ("recorded", "added")
NOISE_MODELS = ("gaussian", "student_t", "ar1")


@dataclass(frozen=True)
class NoiseConfig:
    model: str = _f("gaussian", doc="one of gaussian, student_t, ar1")
    sigma: float = _f(0.02, 0, None, "standard deviation of eval noise (score units)")
    df: float = _f(3.0, 2, None, "Student-t degrees of freedom (> 2 so the variance exists)",
                   lo_open=True)
    rho: float = _f(0.5, -1, 1, "AR(1) correlation between consecutive evals of one job")


@dataclass(frozen=True)
class EvalSchedule:
    interval: float = _f(0.15, 0, 1, "evals every this fraction of progress", lo_open=True)
    final: bool = _f(True, doc="also evaluate at completion (progress 1.0)")
    cost: str = _f("per_type", doc="per_type (each type's eval_minutes) or per_gpu (eval_minutes "
                   "x the job's GPUs / its type's mean GPU demand: eval time grows with model "
                   "size, the type's mean kept)")


@dataclass(frozen=True)
class MetricsConfig:
    tau: float = _f(0.5, 0, 1, "TTFUC quality threshold on the eval score")
    min_improvement: float = _f(0.01, 0, None, "TTFUC: relative gain over the previous best")


WORKLOAD_SOURCES = ("synthetic", "philly")
WORKLOAD_COUNTS = ("independent", "exact")
EVAL_COSTS = ("per_type", "per_gpu")


@dataclass(frozen=True)
class TraceConfig:
    """A window of the Philly trace replayed as the workload (when workload.source = philly).

    Job types come from each job's GPU-hours (duration x GPUs, before scaling): up to
    lora_max_gpu_hours -> LoRA, up to dpo_max_gpu_hours -> DPO, longer -> RLHF; a job with at
    least rlhf_min_gpus GPUs is RLHF whatever its length. Curves are drawn as for synthetic jobs.
    """

    path: str = _f("philly.csv.gz", doc="trace CSV (.csv or .csv.gz), relative to the current "
                   "directory; 'philly.csv.gz' is the packaged Philly subset")
    cluster: str = _f("", doc="virtual cluster id (e.g. 6214e9); empty = every cluster")
    start: str = _f("", doc="window start, 'YYYY-MM-DD HH:MM:SS'; empty = first job of the "
                    "selection")
    hours: float = _f(24.0, 0, None, "window length in hours of submissions", lo_open=True)
    max_jobs: int = _f(0, 0, None, "keep only the first this many jobs of the window; 0 = all")
    time_scale: float = _f(1.0, 0, None, "multiplies arrival gaps and durations (< 1 compresses)",
                           lo_open=True)
    min_duration_min: float = _f(1.0, 0, None, "shorter trace jobs are lengthened to this "
                                 "(minutes, after time_scale)", lo_open=True)
    gpu_scale: float = _f(1.0, 0, None, "multiplies each job's GPU count before capping",
                          lo_open=True)
    gpu_cap: int = _f(8, 1, None, "largest GPU demand kept (also capped at cluster.gpus)")
    lora_max_gpu_hours: float = _f(0.5, 0, None, "GPU-hours up to which a job is LoRA")
    dpo_max_gpu_hours: float = _f(4.0, 0, None, "GPU-hours up to which a job is DPO")
    rlhf_min_gpus: int = _f(4, 1, None, "trace GPU count from which a job is RLHF")


@dataclass(frozen=True)
class RewardConfig:
    """Weights of the Gymnasium env's reward terms (evalstop_gym/env/reward.py defines each)."""

    jobs_in_system: float = _f(1.0, 0, None, "weight of -(minutes x unfinished jobs) / time_scale")
    gpu_minutes: float = _f(0.0, 0, None, "weight of -(GPU-minutes held) / time_scale")
    wasted_gpu_minutes: float = _f(1.0, 0, None, "weight of -(GPU-minutes trained past the "
                                   "true peak) / time_scale")
    quality_lost: float = _f(10.0, 0, None, "weight of -(true peak score - true score of the "
                             "checkpoint a stop keeps)")
    false_stop: float = _f(0.5, 0, None, "weight of -(stops of jobs that were not hacking)")
    time_scale_min: float = _f(1000.0, 0, None, "minutes that make one unit of time cost",
                               lo_open=True)


@dataclass(frozen=True)
class SimConfig:
    """Everything one simulated run depends on, besides the policy and the seed.

    `SimConfig()` is the platform of configs/defaults.yaml (a test keeps the two equal); the YAML
    is where each value's source is recorded.
    """

    cluster: ClusterConfig = field(default_factory=ClusterConfig)
    workload: WorkloadConfig = field(default_factory=WorkloadConfig)
    job_types: JobTypes = field(default_factory=JobTypes)
    curves: Curves = field(default_factory=Curves)
    noise: NoiseConfig = field(default_factory=NoiseConfig)
    evals: EvalSchedule = field(default_factory=EvalSchedule)
    metrics: MetricsConfig = field(default_factory=MetricsConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    trace: TraceConfig = field(default_factory=TraceConfig)

    def with_overrides(self, overrides: Mapping[str, Any]) -> SimConfig:
        """A copy with dotted-key overrides applied (`{"noise.sigma": 0.05}`), validated."""
        data = to_dict(self)
        apply_overrides(data, overrides)
        return build(SimConfig, data)


# --------------------------------------------------------------------------- building

def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set dotted keys in a nested dict; an unknown path is a ConfigError."""
    for key, value in overrides.items():
        node = data
        parts = key.split(".")
        for depth, part in enumerate(parts[:-1]):
            if not isinstance(node.get(part), dict):
                raise ConfigError(f"{'.'.join(parts[:depth + 1])}: unknown section in override "
                                  f"'{key}'; known: {', '.join(sorted(node))}")
            node = node[part]
        if parts[-1] not in node:
            raise ConfigError(f"{key}: unknown key; known here: {', '.join(sorted(node))}")
        if isinstance(node[parts[-1]], dict) and isinstance(value, Mapping):
            node[parts[-1]] = {**node[parts[-1]], **value}
        else:
            node[parts[-1]] = value


def build(cls: type, data: Mapping[str, Any] | None, path: str = "") -> Any:
    """Build dataclass `cls` from a mapping, checking keys, types and ranges by field name."""
    data = dict(data or {})
    hints = typing.get_type_hints(cls)
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names)
    if unknown:
        where = path or "config"
        raise ConfigError(f"{where}: unknown key(s) {', '.join(unknown)}; "
                          f"allowed: {', '.join(sorted(names))}")
    kwargs = {}
    for f in dataclasses.fields(cls):
        if f.name not in data:
            continue
        name = f"{path}.{f.name}" if path else f.name
        kwargs[f.name] = _coerce(hints[f.name], data[f.name], name, f.metadata)
    try:
        obj = cls(**kwargs)
    except TypeError as exc:  # pragma: no cover - every field has a default
        raise ConfigError(f"{path or 'config'}: {exc}") from None
    _check_object(obj, path)
    return obj


def _coerce(hint: Any, value: Any, name: str, meta: Mapping[str, Any]) -> Any:
    if dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a section (mapping), got {value!r}")
        return build(hint, value, name)
    origin = typing.get_origin(hint)
    if origin is tuple and typing.get_args(hint)[-1] is Ellipsis:
        item = typing.get_args(hint)[0]
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return tuple(build(item, v, f"{name}[{i}]") for i, v in enumerate(value))
    if origin is tuple:
        args = typing.get_args(hint)
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise ConfigError(f"{name}: expected [low, high], got {value!r}")
        items = tuple(_scalar(a, v, name) for a, v in zip(args, value, strict=True))
        for v in items:
            _check_range(v, name, meta)
        if items[0] > items[1]:
            raise ConfigError(f"{name}: low {items[0]} is above high {items[1]}")
        return items
    if origin in (typing.Union, types.UnionType):
        hint = next(a for a in typing.get_args(hint) if a is not type(None))
    out = _scalar(hint, value, name)
    _check_range(out, name, meta)
    return out


def _scalar(hint: Any, value: Any, name: str) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise ConfigError(f"{name}: expected true or false, got {value!r}")
        return value
    if hint is int:
        if isinstance(value, bool) or not isinstance(value, (int, float)) or value != int(value):
            raise ConfigError(f"{name}: expected a whole number, got {value!r}")
        return int(value)
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            raise ConfigError(f"{name}: expected a number, got {value!r}")
        if not math.isfinite(value):
            raise ConfigError(f"{name}: expected a finite number, got {value!r}")
        return float(value)
    if hint is str:
        if not isinstance(value, str):
            raise ConfigError(f"{name}: expected text, got {value!r}")
        return value
    return value


def _check_range(value: Any, name: str, meta: Mapping[str, Any]) -> None:
    lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    too_high = hi is not None and value > hi
    if too_low or too_high:
        left = "(" if lo_open else "["
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf)" if hi is None else f"{hi:g}]"
        raise ConfigError(f"{name}: {value!r} is outside the allowed range {left}{lo_s}, {hi_s}")


def _check_object(obj: Any, path: str) -> None:
    """Cross-field rules that a single range cannot express."""
    if isinstance(obj, Mix):
        total = obj.lora + obj.dpo + obj.rlhf
        if abs(total - 1.0) > 1e-6:
            where = path or "mix"
            raise ConfigError(f"{where}: lora + dpo + rlhf must sum to 1, got {total:g}")
    if isinstance(obj, WorkloadConfig) and obj.counts not in WORKLOAD_COUNTS:
        raise ConfigError(f"{path or 'workload'}.counts: {obj.counts!r} is not one of "
                          f"{', '.join(WORKLOAD_COUNTS)}")
    if isinstance(obj, EvalSchedule) and obj.cost not in EVAL_COSTS:
        raise ConfigError(f"{path or 'evals'}.cost: {obj.cost!r} is not one of "
                          f"{', '.join(EVAL_COSTS)}")
    if isinstance(obj, WorkloadConfig) and obj.source not in WORKLOAD_SOURCES:
        raise ConfigError(f"{path or 'workload'}.source: {obj.source!r} is not one of "
                          f"{', '.join(WORKLOAD_SOURCES)}")
    if isinstance(obj, TraceConfig):
        _check_trace(obj, path or "trace")
    if isinstance(obj, ClusterConfig) and obj.kinds:
        total = sum(k.count for k in obj.kinds)
        if total != obj.gpus:
            raise ConfigError(f"{path or 'cluster'}.gpus: {obj.gpus} must equal the total of "
                              f"{path or 'cluster'}.kinds ({total})")
    if isinstance(obj, Curves):
        for name, allowed in (("source", CURVE_SOURCES), ("corpus_lora", CORPUS_FAMILIES),
                              ("corpus_dpo", CORPUS_FAMILIES), ("corpus_rlhf", CORPUS_FAMILIES),
                              ("corpus_noise", CORPUS_NOISE)):
            if getattr(obj, name) not in allowed:
                raise ConfigError(f"{path or 'curves'}.{name}: {getattr(obj, name)!r} is not "
                                  f"one of {', '.join(allowed)}")
    if isinstance(obj, NoiseConfig) and obj.model not in NOISE_MODELS:
        raise ConfigError(f"{path or 'noise'}.model: {obj.model!r} is not one of "
                          f"{', '.join(NOISE_MODELS)}")


def _check_trace(obj: TraceConfig, where: str) -> None:
    if obj.lora_max_gpu_hours > obj.dpo_max_gpu_hours:
        raise ConfigError(f"{where}.lora_max_gpu_hours: {obj.lora_max_gpu_hours:g} is above "
                          f"{where}.dpo_max_gpu_hours ({obj.dpo_max_gpu_hours:g})")
    if obj.start:
        try:
            datetime.strptime(obj.start, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            raise ConfigError(f"{where}.start: {obj.start!r} is not 'YYYY-MM-DD HH:MM:SS'") \
                from None


# --------------------------------------------------------------------------- YAML

def read_yaml(path: Path) -> dict[str, Any]:
    try:
        text = Path(path).read_text()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        data = yaml.safe_load(text) or {}
    except yaml.YAMLError as exc:
        raise ConfigError(f"{path}: not valid YAML ({exc})") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level")
    return data


def load_sim_config(path: Path | str | None = None,
                    overrides: Mapping[str, Any] | None = None) -> SimConfig:
    """Load a platform config YAML (default: configs/defaults.yaml) with dotted overrides.

    A platform file may start from another with `extends: other.yaml` (relative to itself) and
    then give only the dotted keys it changes under `overrides:`.
    """
    path = Path(path) if path is not None else CONFIG_DIR / "defaults.yaml"
    data = read_yaml(path)
    if "extends" in data:
        unknown = sorted(set(data) - {"extends", "overrides"})
        if unknown:
            raise ConfigError(f"{path.name}: a file with 'extends' takes only 'overrides'; "
                              f"unknown key(s) {', '.join(unknown)}")
        parent = load_sim_config(path.parent / data["extends"], data.get("overrides") or {})
        data = to_dict(parent)
    if overrides:
        base = to_dict(build(SimConfig, data))
        apply_overrides(base, overrides)
        data = base
    return build(SimConfig, data)
