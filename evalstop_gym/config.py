"""Typed configuration of one simulated platform, and its validating YAML loader.

Every constant that shapes a run lives in a frozen dataclass below; the numbers themselves live
in `configs/*.yaml` with a comment saying where each comes from. Loading rejects unknown keys and
out-of-range values with a `ConfigError` that names the field and the allowed range.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import math
import numbers
import re
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import date, datetime
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
       lo_open: bool = False, cap: float | None = None, why: str = "") -> Any:
    """A dataclass field with its allowed range [lo, hi] (or (lo, hi] with `lo_open`) and, for a
    size, the largest value supported (`cap`) with the reason (`why`), checked at construction."""
    meta = {"lo": lo, "hi": hi, "doc": doc, "lo_open": lo_open, "cap": cap, "why": why}
    return field(default=default, metadata=meta)


class _Cap(typing.TypedDict):
    """`_f`'s `cap` and `why`, typed so `**GPUS_CAP` type-checks against `_f`'s keywords."""

    cap: float
    why: str


# Supported sizes: each bound says why it is where it is (see `_f`'s `cap`).
GPUS_CAP = _Cap(cap=1_000_000, why="more GPUs than any cluster built")
JOBS_CAP = _Cap(cap=10_000_000, why="every job is held in memory for the run")
MINUTES_CAP = _Cap(cap=1e7, why="19 years, beyond any fine-tuning job; longer times lose the "
                   "simulated clock's precision")
CURVE_SHAPE_CAP = _Cap(cap=1000.0, why="beyond this the curve is flat or a straight line to "
                       "float precision and its formula divides 0 by 0")


class Validated:
    """Base of every config dataclass: construction checks each field's type, range and size
    from its `_f` metadata, then the class's cross-field rules, so YAML, --set, gym.make keywords
    and the Python API share one check (a new `_f` field is checked with no extra code)."""

    def __post_init__(self) -> None:
        _validate(self)


@dataclass(frozen=True)
class GpuKind(Validated):
    """One kind of GPU in a heterogeneous cluster."""

    name: str = _f("gpu", doc="a label, e.g. A100")
    count: int = _f(1, 1, None, "GPUs of this kind", **GPUS_CAP)
    speed: float = _f(1.0, 0, None, "training and eval speed relative to the reference GPU",
                      lo_open=True)


@dataclass(frozen=True)
class ClusterConfig(Validated):
    gpus: int = _f(64, 1, None, "GPUs in the cluster (the kinds' total when kinds are given)",
                   **GPUS_CAP)
    preemption_overhead_min: float = _f(2.0, 0, None,
                                        "minutes of restart cost when a preempted job resumes",
                                        **MINUTES_CAP)
    kinds: tuple[GpuKind, ...] = _f((), doc="GPU kinds; empty: `gpus` identical reference GPUs")
    time_slice_share: float = _f(0.1, 0, 1, "share of time a time-sliced job trains and "
                                 "evaluates while it keeps its GPUs (EvalSched's demoted jobs)",
                                 lo_open=True)


@dataclass(frozen=True)
class Mix(Validated):
    """Fractions of jobs of each type; must sum to 1."""

    lora: float = _f(0.1, 0, 1)
    dpo: float = _f(0.1, 0, 1)
    rlhf: float = _f(0.8, 0, 1)


@dataclass(frozen=True)
class WorkloadConfig(Validated):
    n_jobs: int = _f(200, 1, None, "jobs per run", **JOBS_CAP)
    n_tenants: int = _f(5, 1, None, "tenants, assigned uniformly at random", cap=10_000_000,
                        why="more tenants than the largest run has jobs")
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
class LossCurve(Validated):
    """Training loss: exponential decay to a floor, reached (within `residual`) at the plateau."""

    initial: Range = _f((2.0, 3.0), 0, None, "loss at progress 0", lo_open=True)
    floor_fraction: Range = _f((0.2, 0.4), 0, 1, "floor as a fraction of the initial loss")
    plateau_progress: Range = _f((0.5, 0.7), 0, 1, "progress where the decay is done", lo_open=True)
    residual: Range = _f((0.01, 0.06), 0, 1, "fraction of the drop still left at the plateau",
                         lo_open=True)


@dataclass(frozen=True)
class JobTypeConfig(Validated):
    duration_min: Range = _f((60.0, 360.0), 0, None, "true training minutes, uniform", lo_open=True,
                             **MINUTES_CAP)
    gpus: IntRange = _f((4, 8), 1, None, "GPU demand, uniform integer, inclusive", **GPUS_CAP)
    eval_minutes: float = _f(0.8, 0, None, "minutes one eval occupies the job's GPUs",
                             **MINUTES_CAP)
    loss: LossCurve = field(default_factory=LossCurve)
    step_time_volatility: float = _f(0.3, 0, 3, "volatility of the log step time over a run, "
                                     "per unit of progress (Brownian; 0: every step alike)")

    @property
    def duration_estimate(self) -> float:
        """The non-clairvoyant estimate a scheduler may use: the type's mean duration."""
        return (self.duration_min[0] + self.duration_min[1]) / 2


@dataclass(frozen=True)
class JobTypes(Validated):
    lora: JobTypeConfig = field(default_factory=lambda: JobTypeConfig(
        (10.0, 60.0), (1, 2), 0.2, LossCurve((1.5, 2.5), (0.3, 0.5), (0.6, 1.0), (0.01, 0.05)),
        step_time_volatility=0.1))
    dpo: JobTypeConfig = field(default_factory=lambda: JobTypeConfig(
        (30.0, 120.0), (2, 4), 0.4, LossCurve((0.6, 0.8), (0.3, 0.5), (0.88, 1.0), (0.01, 0.08)),
        step_time_volatility=0.1))
    rlhf: JobTypeConfig = field(default_factory=JobTypeConfig)


@dataclass(frozen=True)
class SaturatingCurve(Validated):
    """Eval score start + gain (1 - exp(-p/c)) / (1 - exp(-1/c)): monotone; saturates if c small."""

    start: Range = _f((0.2, 0.35), 0, 1, "eval score at progress 0")
    gain: Range = _f((0.3, 0.5), 0, 1, "rise from progress 0 to 1")
    time_constant: Range = _f((0.2, 0.4), 0, None, "c, in progress units", lo_open=True,
                              **CURVE_SHAPE_CAP)


@dataclass(frozen=True)
class HackingCurve(Validated):
    """Gao et al. (2023): gold reward R(d) = d (alpha - beta ln d), d = sqrt(KL).

    Normalised, R/R* = u (1 - ln u) with u = d/d*. Progress maps to KL distance as
    u = (p / peak) ** collapse: collapse = 1 is d proportional to progress (a mild post-peak
    drop); larger values model KL growing faster than progress late in training, the
    stronger collapse the paper's curves show.
    """

    start: Range = _f((0.2, 0.35), 0, 1, "eval score at progress 0")
    gain: Range = _f((0.3, 0.5), 0, 1, "rise from progress 0 to the peak")
    peak_progress: Range = _f((0.55, 0.75), 0, 1, "progress of the true eval peak", lo_open=True)
    collapse: Range = _f((1.5, 2.5), 0, None, "exponent of the progress-to-KL map", lo_open=True,
                         **CURVE_SHAPE_CAP)


@dataclass(frozen=True)
class Curves(Validated):
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
class NoiseConfig(Validated):
    model: str = _f("gaussian", doc="one of gaussian, student_t, ar1")
    sigma: float = _f(0.02, 0, None, "standard deviation of eval noise (score units)")
    df: float = _f(3.0, 2, None, "Student-t degrees of freedom (> 2 so the variance exists)",
                   lo_open=True)
    rho: float = _f(0.5, -1, 1, "AR(1) correlation between consecutive evals of one job")


@dataclass(frozen=True)
class EvalSchedule(Validated):
    interval: float = _f(0.15, 0, 1, "evals every this fraction of progress", lo_open=True)
    final: bool = _f(True, doc="also evaluate at completion (progress 1.0)")
    cost: str = _f("per_type", doc="per_type (each type's eval_minutes) or per_gpu (eval_minutes "
                   "x the job's GPUs / its type's mean GPU demand: eval time grows with model "
                   "size, the type's mean kept)")


@dataclass(frozen=True)
class MetricsConfig(Validated):
    tau: float = _f(0.5, 0, 1, "TTFUC quality threshold on the eval score")
    min_improvement: float = _f(0.01, 0, None, "TTFUC: relative gain over the previous best")


WORKLOAD_SOURCES = ("synthetic", "philly")
WORKLOAD_COUNTS = ("independent", "exact")
EVAL_COSTS = ("per_type", "per_gpu")


@dataclass(frozen=True)
class TraceConfig(Validated):
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
    max_jobs: int = _f(0, 0, None, "keep only the first this many jobs of the window; 0 = all",
                       **JOBS_CAP)
    time_scale: float = _f(1.0, 0, None, "multiplies arrival gaps and durations (< 1 compresses)",
                           lo_open=True)
    min_duration_min: float = _f(1.0, 0, None, "shorter trace jobs are lengthened to this "
                                 "(minutes, after time_scale)", lo_open=True)
    gpu_scale: float = _f(1.0, 0, None, "multiplies each job's GPU count before capping",
                          lo_open=True)
    gpu_cap: int = _f(8, 1, None, "largest GPU demand kept (also capped at cluster.gpus)",
                      **GPUS_CAP)
    lora_max_gpu_hours: float = _f(0.5, 0, None, "GPU-hours up to which a job is LoRA")
    dpo_max_gpu_hours: float = _f(4.0, 0, None, "GPU-hours up to which a job is DPO")
    rlhf_min_gpus: int = _f(4, 1, None, "trace GPU count from which a job is RLHF", **GPUS_CAP)


@dataclass(frozen=True)
class RewardConfig(Validated):
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
class SimConfig(Validated):
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


# --------------------------------------------------------------------------- validation

# What one run holds in memory: each job's record, view cache and metrics row (about 1.2 kB at
# creation, measured with tracemalloc, a few kB by the end of a run), and per check point its eval
# arrays, observation and place in the view's history tuples. Rounded up, so the estimate errs
# high; a run estimated above MAX_RUN_BYTES is refused before anything is allocated.
PER_JOB_BYTES = 4_000
PER_CHECK_BYTES = 250
MAX_RUN_BYTES = 8 * 2**30
# float64 resolves 1e9 minutes (1,900 years) to about 1e-7 minutes: a clock that stays below it
# keeps every job's minutes exact enough that JCT and waste mean what they say.
MAX_HORIZON_MIN = 1e9


class ConfigFieldError(ConfigError):
    """One field of one config object is wrong (`name`, `detail`); `build` re-prefixes it with
    the section path."""

    def __init__(self, owner: str, name: str, detail: str) -> None:
        self.name, self.detail = name, detail
        where = f"{owner}.{name}" if owner and name else owner or name
        super().__init__(f"{where}: {detail}")


class _Bad(Exception):
    """A value's problem, before the field that holds it is known."""


@functools.cache
def _field_hints(cls: type) -> tuple[tuple[dataclasses.Field, Any], ...]:
    hints = typing.get_type_hints(cls)
    return tuple((f, hints[f.name]) for f in dataclasses.fields(cls))


def _validate(obj: Validated) -> None:
    """Check (and normalise: 2 -> 2.0, lists -> tuples) every field of `obj`, then its
    cross-field rules; a problem raises `ConfigFieldError` naming the field."""
    cls: type = type(obj)   # mypy checks type[Validated] against Hashable by its instances
    owner = "" if isinstance(obj, SimConfig) else cls.__name__
    for f, hint in _field_hints(cls):
        value = getattr(obj, f.name)
        try:
            checked = _checked(hint, value, f.metadata)
        except _Bad as exc:
            raise ConfigFieldError(owner, f.name, str(exc)) from None
        if checked is not value:
            object.__setattr__(obj, f.name, checked)
    for rule in _RULES.get(type(obj), ()):
        problem = rule(obj)
        if problem is not None:
            raise ConfigFieldError(owner, *problem)


def _checked(hint: Any, value: Any, meta: Mapping[str, Any]) -> Any:
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, hint):
            raise _Bad(f"expected a {hint.__name__} (a section), got {value!r}")
        return value
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin is tuple and args[-1] is Ellipsis:
        if not isinstance(value, (list, tuple)):
            raise _Bad(f"expected a list, got {value!r}")
        items = tuple(_checked(args[0], v, meta) for v in value)
        return value if items == value and isinstance(value, tuple) else items
    if origin is tuple:
        if not isinstance(value, (list, tuple)) or len(value) != len(args):
            raise _Bad(f"expected [low, high], got {value!r}")
        items = tuple(_bounded(_scalar(a, v), meta) for a, v in zip(args, value, strict=True))
        if items[0] > items[1]:
            raise _Bad(f"low {items[0]} is above high {items[1]}")
        return items
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return value
        hint = next(a for a in args if a is not type(None))
    return _bounded(_scalar(hint, value), meta)


def _scalar(hint: Any, value: Any) -> Any:
    if hint is bool:
        if not isinstance(value, bool):
            raise _Bad(f"expected true or false, got {value!r}")
        return value
    if hint in (int, float):
        if isinstance(value, bool) or not isinstance(value, numbers.Real):
            raise _Bad(f"expected a {'whole number' if hint is int else 'number'}, got {value!r}")
        if not math.isfinite(value):
            raise _Bad(f"expected a finite {'whole number' if hint is int else 'number'}, "
                       f"got {value!r}")
        if hint is int and value != math.trunc(value):
            raise _Bad(f"expected a whole number, got {value!r}")
        return hint(value) if type(value) is not hint else value
    if hint is str:
        if isinstance(value, datetime):    # YAML reads 2017-11-07 00:00:00 as a datetime
            return value.strftime("%Y-%m-%d %H:%M:%S")
        if isinstance(value, date):
            return value.strftime("%Y-%m-%d 00:00:00")
        if not isinstance(value, str):
            raise _Bad(f"expected text, got {value!r}")
    return value


def _bounded(value: Any, meta: Mapping[str, Any]) -> Any:
    """`value` if inside the field's range [lo, hi] and at most its supported size `cap`."""
    if not isinstance(value, (int, float)) or isinstance(value, bool):
        return value
    lo, hi, lo_open = meta.get("lo"), meta.get("hi"), meta.get("lo_open", False)
    too_low = lo is not None and (value <= lo if lo_open else value < lo)
    if too_low or (hi is not None and value > hi):
        left = "(" if lo_open else "["
        lo_s = "-inf" if lo is None else f"{lo:g}"
        hi_s = "inf)" if hi is None else f"{hi:g}]"
        raise _Bad(f"{value!r} is outside the allowed range {left}{lo_s}, {hi_s}")
    cap = meta.get("cap")
    if cap is not None and value > cap:
        cap_s = f"{cap:,}" if isinstance(cap, int) else f"{cap:g}"
        raise _Bad(f"{value!r} is above the supported maximum {cap_s} ({meta.get('why')})")
    return value


# Cross-field rules per class: each returns (field, problem) or None.
Rule = Callable[[Any], "tuple[str, str] | None"]


def _mix_sums_to_one(m: Mix) -> tuple[str, str] | None:
    total = m.lora + m.dpo + m.rlhf
    return None if abs(total - 1.0) <= 1e-6 else ("", f"lora + dpo + rlhf must sum to 1, got "
                                                      f"{total:g}")


def _one_of(name: str, allowed: tuple[str, ...]) -> Rule:
    def rule(obj: Any) -> tuple[str, str] | None:
        value = getattr(obj, name)
        return None if value in allowed else (name, f"{value!r} is not one of "
                                                    f"{', '.join(allowed)}")
    return rule


def _kinds_add_up(c: ClusterConfig) -> tuple[str, str] | None:
    total = sum(k.count for k in c.kinds)
    if not c.kinds or total == c.gpus:
        return None
    return "gpus", f"{c.gpus} must equal the total of kinds ({total})"


def _trace_rules(t: TraceConfig) -> tuple[str, str] | None:
    if t.lora_max_gpu_hours > t.dpo_max_gpu_hours:
        return "lora_max_gpu_hours", (f"{t.lora_max_gpu_hours:g} is above dpo_max_gpu_hours "
                                      f"({t.dpo_max_gpu_hours:g})")
    if t.start:
        try:
            datetime.strptime(t.start, "%Y-%m-%d %H:%M:%S")
        except ValueError:
            return "start", f"{t.start!r} is not 'YYYY-MM-DD HH:MM:SS'"
    return None


def checks_per_job(evals: EvalSchedule) -> int:
    """Check points of one job (evals plus completion), the unit of a run's memory."""
    return math.ceil(1.0 / evals.interval) + 2


def _run_fits_in_memory(c: SimConfig) -> tuple[str, str] | None:
    if c.workload.source != "synthetic":
        return None   # a trace's size is its file's
    n, checks = c.workload.n_jobs, checks_per_job(c.evals)
    need = n * (PER_JOB_BYTES + checks * PER_CHECK_BYTES)
    if need <= MAX_RUN_BYTES:
        return None
    name = "evals.interval" if checks * PER_CHECK_BYTES > PER_JOB_BYTES else "workload.n_jobs"
    return name, (f"{n:,} jobs x {checks:,} check points each need about {need / 2**30:,.1f} "
                  f"GiB of memory (estimated); a run is limited to {MAX_RUN_BYTES / 2**30:g} GiB: "
                  "use fewer jobs or a larger evals.interval")


def _arrivals_stay_exact(c: SimConfig) -> tuple[str, str] | None:
    w = c.workload
    if w.source != "synthetic":
        return None
    horizon = w.n_jobs / w.arrival_rate_per_min
    if horizon <= MAX_HORIZON_MIN:
        return None
    return "workload.arrival_rate_per_min", (
        f"{w.arrival_rate_per_min!r} spreads {w.n_jobs:,} arrivals over about {horizon:.3g} "
        f"minutes; at most {MAX_HORIZON_MIN:g} minutes keep the simulated clock exact "
        f"(raise the rate to at least {w.n_jobs / MAX_HORIZON_MIN:.3g})")


_RULES: dict[type, tuple[Rule, ...]] = {
    Mix: (_mix_sums_to_one,),
    WorkloadConfig: (_one_of("source", WORKLOAD_SOURCES), _one_of("counts", WORKLOAD_COUNTS)),
    EvalSchedule: (_one_of("cost", EVAL_COSTS),),
    Curves: (_one_of("source", CURVE_SOURCES), _one_of("corpus_lora", CORPUS_FAMILIES),
             _one_of("corpus_dpo", CORPUS_FAMILIES), _one_of("corpus_rlhf", CORPUS_FAMILIES),
             _one_of("corpus_noise", CORPUS_NOISE)),
    ClusterConfig: (_kinds_add_up,),
    NoiseConfig: (_one_of("model", NOISE_MODELS),),
    TraceConfig: (_trace_rules,),
    SimConfig: (_run_fits_in_memory, _arrivals_stay_exact),
}


def check_feasible(config: SimConfig) -> SimConfig:
    """`config` itself, once its largest job fits the cluster (or one GPU kind); checked where a
    config is loaded, so an impossible platform fails before a run rather than in the middle."""
    largest = max((k.count for k in config.cluster.kinds), default=config.cluster.gpus)
    where = "one GPU kind" if config.cluster.kinds else "the cluster"
    if config.workload.source == "philly":
        need = min(config.trace.gpu_cap, config.cluster.gpus)
        if need > largest:
            raise ConfigError(f"trace.gpu_cap: jobs of up to {need} GPUs do not fit {where} "
                              f"({largest} GPUs); lower trace.gpu_cap to {largest}")
        return config
    for kind in ("lora", "dpo", "rlhf"):
        need = getattr(config.job_types, kind).gpus[1]
        if getattr(config.workload.mix, kind) > 0 and need > largest:
            raise ConfigError(f"cluster.gpus: a {kind} job needs up to {need} GPUs "
                              f"(job_types.{kind}.gpus) but {where} has {largest}; raise "
                              f"cluster.gpus or lower job_types.{kind}.gpus")
    return config


# --------------------------------------------------------------------------- building

def to_dict(obj: Any) -> dict[str, Any]:
    return dataclasses.asdict(obj)


def apply_overrides(data: dict[str, Any], overrides: Mapping[str, Any]) -> None:
    """Set dotted keys in a nested dict; an unknown path is a ConfigError."""
    if not isinstance(overrides, Mapping):
        raise ConfigError(f"overrides: expected a mapping of dotted keys to values "
                          f"(e.g. {{noise.sigma: 0.05}}), got {overrides!r}")
    for key, value in overrides.items():
        if not isinstance(key, str) or not key:
            raise ConfigError(f"overrides: {key!r} is not a dotted key such as noise.sigma")
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
    """Build dataclass `cls` from a mapping: unknown keys and sections here, every value's type
    and range in the dataclass's own check (`Validated`), errors prefixed with `path`."""
    data = dict(data or {})
    names = {f.name for f in dataclasses.fields(cls)}
    unknown = sorted(set(data) - names, key=str)
    if unknown:
        raise ConfigError(f"{path or 'config'}: unknown key(s) {', '.join(map(str, unknown))}; "
                          f"allowed: {', '.join(sorted(names))}")
    kwargs = {}
    for f, hint in _field_hints(cls):
        if f.name in data:
            name = f"{path}.{f.name}" if path else f.name
            kwargs[f.name] = _sections(hint, data[f.name], name)
    try:
        return cls(**kwargs)
    except ConfigFieldError as exc:
        name = ".".join(p for p in (path, exc.name) if p)
        raise ConfigError(f"{name or 'config'}: {exc.detail}") from None


def _sections(hint: Any, value: Any, name: str) -> Any:
    """Nested sections (and lists of them) built from mappings; plain values left as given."""
    if isinstance(hint, type) and dataclasses.is_dataclass(hint):
        if not isinstance(value, Mapping):
            raise ConfigError(f"{name}: expected a section (mapping), got {value!r}")
        return build(hint, value, name)
    args = typing.get_args(hint)
    if typing.get_origin(hint) is tuple and args[-1] is Ellipsis \
            and dataclasses.is_dataclass(args[0]):
        if not isinstance(value, (list, tuple)):
            raise ConfigError(f"{name}: expected a list, got {value!r}")
        return tuple(_sections(args[0], v, f"{name}[{i}]") for i, v in enumerate(value))
    return value


# --------------------------------------------------------------------------- YAML

class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            with contextlib.suppress(TypeError):   # unhashable: the base class reports it
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


# YAML 1.1 reads 1e-9 (no dot) as text; here it is a number, as in YAML 1.2. The exponent's
# sign is required, so ids such as a Philly cluster's 6214e9 stay text.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)"
                                          r"[eE][-+][0-9]+$"), list("-+0123456789."))


def parse_yaml(text: str, where: str) -> Any:
    """YAML text to data; any parse problem is a one-line ConfigError naming `where`."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where}: not valid YAML: {exc.problem or exc.context}{at}") \
            from None
    except (yaml.YAMLError, ValueError, OverflowError) as exc:  # e.g. a date 2020-13-01
        raise ConfigError(f"{where}: not valid YAML: {' '.join(str(exc).split())}") from None


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") \
            from None
    data = parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got "
                          f"{type(data).__name__}")
    return data


def load_sim_config(path: Path | str | None = None,
                    overrides: Mapping[str, Any] | None = None) -> SimConfig:
    """Load a platform config YAML (default: configs/defaults.yaml) with dotted overrides.

    A platform file may start from another with `extends: other.yaml` (relative to itself) and
    then give only the dotted keys it changes under `overrides:`.
    """
    path = Path(path) if path is not None else CONFIG_DIR / "defaults.yaml"
    config = _platform(path, ())
    return check_feasible(config.with_overrides(overrides) if overrides else config)


def _platform(path: Path, chain: tuple[Path, ...]) -> SimConfig:
    """The platform file's config, with any `extends` chain resolved (cycles refused); a
    problem in the file is reported with its name."""
    resolved = path.resolve()
    if resolved in chain:
        names = " -> ".join(p.name for p in (*chain, resolved))
        raise ConfigError(f"{path.name}: extends: cycle {names}")
    data = read_yaml(path)
    if "extends" not in data:
        return _in_file(path.name, lambda: build(SimConfig, data))
    unknown = sorted(set(data) - {"extends", "overrides"}, key=str)
    if unknown:
        raise ConfigError(f"{path.name}: a file with 'extends' takes only 'overrides'; "
                          f"unknown key(s) {', '.join(map(str, unknown))}")
    parent = data["extends"]
    if not isinstance(parent, str) or not parent:
        raise ConfigError(f"{path.name}: extends: expected a file name, got {parent!r}")
    base = _platform(path.parent / parent, (*chain, resolved))
    return _in_file(path.name, lambda: base.with_overrides(data.get("overrides") or {}))


def _in_file(name: str, make: Callable[[], SimConfig]) -> SimConfig:
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
