"""The schema of one simulated platform: every constant that shapes a run, as frozen dataclasses.

The numbers themselves live in `configs/*.yaml` with a comment saying where each comes from. Each
field declares its allowed range with `_f` and each class its cross-field `rules`; the checking
itself is validation.py's, the files loading.py's.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from .validation import ConfigError, Validated, _Cap, _f, apply_overrides, build, to_dict

Range = tuple[float, float]
IntRange = tuple[int, int]

# Supported sizes: each bound says why it is where it is (see `_f`'s `cap`).
GPUS_CAP = _Cap(cap=1_000_000, why="more GPUs than any cluster built")
JOBS_CAP = _Cap(cap=10_000_000, why="every job is held in memory for the run")
MINUTES_CAP = _Cap(cap=1e7, why="19 years, beyond any fine-tuning job; longer times lose the "
                   "simulated clock's precision")
CURVE_SHAPE_CAP = _Cap(cap=1000.0, why="beyond this the curve is flat or a straight line to "
                       "float precision and its formula divides 0 by 0")

CURVE_SOURCES = ("synthetic", "corpus")
CORPUS_FAMILIES = ("supervised", "reward")
CORPUS_NOISE = ("recorded", "added")
NOISE_MODELS = ("gaussian", "student_t", "ar1", "drift")
WORKLOAD_SOURCES = ("synthetic", "philly")
WORKLOAD_COUNTS = ("independent", "exact")
EVAL_COSTS = ("per_type", "per_gpu")

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


# Cross-field rules, named by the classes below (`rules`); each returns (field, problem) or None.

def _mix_sums_to_one(m: Mix) -> tuple[str, str] | None:
    total = m.lora + m.dpo + m.rlhf
    return None if abs(total - 1.0) <= 1e-6 else ("", f"lora + dpo + rlhf must sum to 1, got "
                                                      f"{total:g}")


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
    """Check points of one job (evals plus completion), the unit of a run's memory (bounded: 1
    over a subnormal interval overflows to infinity, which has no whole count)."""
    return math.ceil(min(1.0 / evals.interval, 2.0**63)) + 2


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


@dataclass(frozen=True)
class GpuKind(Validated):
    """One kind of GPU in a heterogeneous cluster."""

    name: str = _f("gpu", doc="a label, e.g. A100")
    count: int = _f(1, 1, None, "GPUs of this kind", **GPUS_CAP)
    speed: float = _f(1.0, 0, None, "training and eval speed relative to the reference GPU",
                      lo_open=True)


@dataclass(frozen=True)
class ClusterConfig(Validated):
    rules = (_kinds_add_up,)
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

    rules = (_mix_sums_to_one,)

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
    counts: str = _f("independent", choices=WORKLOAD_COUNTS,
                     doc="independent (each job's type and hacking label drawn on its own) or "
                     "exact (the mix and the hacking fraction as fixed counts, largest remainder, "
                     "in an order shuffled by the seed)")
    source: str = _f("synthetic", choices=WORKLOAD_SOURCES,
                     doc="synthetic (Poisson arrivals, the sizes above) or philly (arrivals, "
                     "durations and GPUs from the `trace` section; n_jobs, "
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
    source: str = _f("synthetic", choices=CURVE_SOURCES,
                     doc="synthetic (the formula curves above) or corpus (real training "
                     "curves shipped with the package, evalstop_gym.traces.corpus: "
                     "labels and true peaks from each run's test curve)")
    corpus_lora: str = _f("supervised", choices=CORPUS_FAMILIES, doc="corpus family of LoRA jobs")
    corpus_dpo: str = _f("supervised", choices=CORPUS_FAMILIES, doc="corpus family of DPO jobs")
    corpus_rlhf: str = _f("reward", choices=CORPUS_FAMILIES, doc="corpus family of RLHF jobs")
    corpus_noise: str = _f("recorded", choices=CORPUS_NOISE,
                           doc="recorded (a corpus run's evals as logged) or added (plus the "
                           "noise section's draw)")


@dataclass(frozen=True)
class NoiseConfig(Validated):
    model: str = _f("gaussian", choices=NOISE_MODELS, doc="how eval noise is drawn")
    sigma: float = _f(0.02, 0, None, "standard deviation of eval noise (score units)")
    df: float = _f(3.0, 2, None, "Student-t degrees of freedom (> 2 so the variance exists)",
                   lo_open=True)
    rho: float = _f(0.5, -1, 1, "AR(1) correlation between consecutive evals of one job")
    drift_share: float = _f(0.5, 0, 1, "drift model: share of the noise variance (sigma^2) in "
                            "the smooth drift; the rest is i.i.d. Gaussian")
    drift_scale: float = _f(0.1, 0.005, None, "drift model: the drift's time-scale in progress "
                            "units (fraction of the run; correlation exp(-lag / drift_scale))")


@dataclass(frozen=True)
class EvalSchedule(Validated):
    interval: float = _f(0.15, 0, 1, "evals every this fraction of progress", lo_open=True)
    final: bool = _f(True, doc="also evaluate at completion (progress 1.0)")
    cost: str = _f("per_type", choices=EVAL_COSTS,
                   doc="per_type (each type's eval_minutes) or per_gpu (eval_minutes x the "
                   "job's GPUs / its type's mean GPU demand: eval time grows with model size, "
                   "the type's mean kept)")


@dataclass(frozen=True)
class MetricsConfig(Validated):
    tau: float = _f(0.5, 0, 1, "TTFUC quality threshold on the eval score")
    min_improvement: float = _f(0.01, 0, None, "TTFUC: relative gain over the previous best")


@dataclass(frozen=True)
class TraceConfig(Validated):
    """A window of the Philly trace replayed as the workload (when workload.source = philly).

    Job types come from each job's GPU-hours (duration x GPUs, before scaling): up to
    lora_max_gpu_hours -> LoRA, up to dpo_max_gpu_hours -> DPO, longer -> RLHF; a job with at
    least rlhf_min_gpus GPUs is RLHF whatever its length. Curves are drawn as for synthetic jobs.
    """

    rules = (_trace_rules,)

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

    rules = (_run_fits_in_memory, _arrivals_stay_exact)
    root = True

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
