"""A seeded synthetic workload: arrivals, tenants, types, sizes, curves and eval noise.

One `numpy.random.SeedSequence` per run spawns independent streams (`seed_streams`: arrivals,
sizes, curves, noise, pace), so changing, say, the noise level leaves the arrivals and curves of a
seed untouched: every policy and every cell of a sweep sees the same jobs (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import NamedTuple

import numpy as np

from ..config import JobTypeConfig, SimConfig, WorkloadConfig
from .curves import LOSS_PARAMS, eval_noise, exp_loss, gao_hacking, observe, saturating
from .jobs import JOB_TYPES, Job
from .pace import draw_eval_work, row_work_at
from .rules import ROUNDING
from .stream_draws import interleaved
from .workload_arrays import Curves, Specs, WorkloadArrays, jobs_of, one_schedule

# the drawn parameters of each curve family, in draw order (their ranges are in config.py)
HACKING_PARAMS = ("start", "gain", "peak_progress", "collapse")
SATURATING_PARAMS = ("start", "gain", "time_constant")


def eval_points(interval: float, final: bool) -> np.ndarray:
    """Progress fractions where evals run: every `interval`, plus 1.0 when `final`."""
    n = int(np.floor(1.0 / interval + ROUNDING))
    pts = np.round(np.arange(1, n + 1) * interval, 10)
    pts = pts[pts < 1.0 - ROUNDING]
    if final:
        pts = np.append(pts, 1.0)
    return pts


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The jobs of a synthetic run with formula curves, in arrival order, with hidden curves,
    pre-drawn eval noise and step-time jitter (pace.py, from a stream of its own).

    A Philly trace or corpus curves are read above the simulator: `evalstop_gym.workloads.
    generate_workload` is the one place that chooses among all sources.
    """
    if config.workload.source != "synthetic" or config.curves.source != "synthetic":
        raise ValueError(f"workload.source={config.workload.source!r}, curves.source="
                         f"{config.curves.source!r}: sim.workload makes synthetic jobs with "
                         f"formula curves only; use evalstop_gym.workloads.generate_workload")
    streams = seed_streams(seed)
    return jobs_of(finish_arrays(config, streams, *synthetic_specs(config, streams),
                                 formula_curves))


class Streams(NamedTuple):
    """The independent random streams of one run, in spawn order (a new one goes last, so the
    draws of the others stay the same)."""

    arrivals: np.random.Generator
    sizes: np.random.Generator
    curves: np.random.Generator
    noise: np.random.Generator
    pace: np.random.Generator


def seed_streams(seed: int) -> Streams:
    return Streams(*(np.random.default_rng(s)
                     for s in np.random.SeedSequence(seed).spawn(len(Streams._fields))))


# What a workload source gives: its job specs, the eval points and the eval noise drawn for them
RunSpecs = tuple[Specs, np.ndarray, np.ndarray]
DrawCurves = Callable[[SimConfig, Specs, np.ndarray, np.ndarray, np.random.Generator], Curves]


def finish_arrays(config: SimConfig, streams: Streams, specs: Specs, points: np.ndarray,
                  noise: np.ndarray, curves: DrawCurves) -> WorkloadArrays:
    """The jobs of `specs` with curves from `curves` (`formula_curves`, or the corpus), then
    their step-time jitter: the last two steps of every run, whatever its source."""
    c = curves(config, specs, points, noise, streams.curves)
    eval_work, paced, peak_work = draw_pace(config, specs.jtype, c.peak_progress, points,
                                            streams.pace)
    estimates = np.array([_profile(config, t).duration_estimate for t in JOB_TYPES], np.float64)
    return WorkloadArrays(
        tenant=specs.tenant, jtype=specs.jtype, gpus=specs.gpus, arrival=specs.arrival,
        duration=specs.duration, dur_est=estimates[specs.jtype], eval_min=c.eval_min,
        is_hacking=c.is_hacking, peak_progress=c.peak_progress, peak_work=peak_work,
        paced=paced, loss_params=c.loss_params, curve_ptr=c.curve_ptr,
        curve_params=c.curve_params, **one_schedule(points, len(specs.jtype)),
        eval_true=c.eval_true.ravel(), eval_observed=c.eval_observed.ravel(),
        eval_work=eval_work.ravel())


def _profile(config: SimConfig, job_type: str) -> JobTypeConfig:
    return getattr(config.job_types, job_type)


def draw_pace(config: SimConfig, jtype: np.ndarray, peak_progress: np.ndarray,
              points: np.ndarray, rng: np.random.Generator
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each job's step-time jitter (one row of normals per job, in job order, whatever its
    volatility, so a change of volatility rescales the same draws): the work at each eval point
    (NaN where volatility 0 leaves a job evenly paced), which jobs are paced, and the work
    done by each job's peak."""
    volatility = np.array([_profile(config, t).step_time_volatility for t in JOB_TYPES],
                          np.float64)[jtype]
    work = draw_eval_work(points, volatility, rng)
    peaks = row_work_at(points, work, peak_progress)
    paced = volatility > 0
    return (np.where(paced[:, None], work, np.nan), paced,
            np.where(paced, peaks, peak_progress))


def synthetic_specs(config: SimConfig, streams: Streams) -> RunSpecs:
    """Poisson arrivals, tenants, types, labels and sizes from the run's streams (per job, in
    job order, a duration then a GPU count from the sizes stream)."""
    wl = config.workload
    arrivals_rng, sizes_rng, curves_rng, noise_rng = streams[:4]
    n = wl.n_jobs
    arrivals = np.cumsum(arrivals_rng.exponential(1.0 / wl.arrival_rate_per_min, n))
    tenants = arrivals_rng.integers(0, wl.n_tenants, n)
    types, hacking = draw_types(wl, arrivals_rng, curves_rng)
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(noise_rng, (n, len(points)), config.noise, points)
    profiles = [_profile(config, t) for t in JOB_TYPES]
    minutes = np.array([p.duration_min for p in profiles], np.float64)[types]
    gpus = np.array([p.gpus for p in profiles], np.int64)[types]
    extra_gpus, u = interleaved(sizes_rng, gpus[:, 1] - gpus[:, 0], 1, integer_first=False)
    duration = minutes[:, 0] + (minutes[:, 1] - minutes[:, 0]) * u[:, 0]
    specs = Specs(np.asarray(tenants, np.int64), np.asarray(types, np.int64), arrivals,
                  duration, gpus[:, 0] + extra_gpus,
                  (types == JOB_TYPES.index("rlhf")) & hacking)
    return specs, points, noise


def draw_types(wl: WorkloadConfig, arrivals_rng: np.random.Generator,
               curves_rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Each job's type code (JOB_TYPES order) and hacking flag (meaningful for RLHF jobs only).

    `counts: independent` draws each job on its own; `exact` realises the mix and the hacking
    fraction as fixed counts (largest remainder), the order shuffled by the seed's streams.
    """
    n, mix = wl.n_jobs, np.array([wl.mix.lora, wl.mix.dpo, wl.mix.rlhf])
    if wl.counts == "independent":
        types = arrivals_rng.choice(3, size=n, p=mix / mix.sum())
    else:
        types = arrivals_rng.permutation(np.repeat(np.arange(3), exact_counts(n, mix)))
    return types, draw_hacking(wl, types, curves_rng)


def draw_hacking(wl: WorkloadConfig, types: np.ndarray,
                 curves_rng: np.random.Generator) -> np.ndarray:
    """Each job's hacking flag given its type code: drawn job by job (`counts: independent`),
    or the hacking fraction of the RLHF jobs exactly, in an order the seed shuffles."""
    if wl.counts == "independent":
        return curves_rng.random(len(types)) < wl.hacking_fraction
    rlhf = np.flatnonzero(types == JOB_TYPES.index("rlhf"))
    n_hacking = exact_counts(len(rlhf), [wl.hacking_fraction, 1.0 - wl.hacking_fraction])[0]
    hacking = np.zeros(len(types), dtype=bool)
    hacking[curves_rng.permutation(rlhf)[:n_hacking]] = True
    return hacking


def exact_counts(n: int, shares: Sequence[float] | np.ndarray) -> list[int]:
    """`n` split in proportion to `shares` by largest remainder (ties to the earlier share)."""
    quota = np.asarray(shares, dtype=np.float64) * n / float(np.sum(shares))
    counts = np.floor(quota + ROUNDING).astype(np.int64)
    order = sorted(range(len(quota)), key=lambda k: (-(quota[k] - counts[k]), k))
    for k in order[:n - int(counts.sum())]:
        counts[k] += 1
    return counts.tolist()


def eval_minutes(config: SimConfig, jtype: np.ndarray, gpus: np.ndarray) -> np.ndarray:
    """Minutes one eval of each job takes: its type's figure, or (`evals.cost: per_gpu`) that
    figure scaled by the job's GPUs over the type's mean demand, as eval time grows with model
    size."""
    minutes = np.array([_profile(config, t).eval_minutes for t in JOB_TYPES], np.float64)[jtype]
    if config.evals.cost == "per_type":
        return minutes
    sizes = np.array([_profile(config, t).gpus for t in JOB_TYPES], np.int64)[jtype]
    return minutes * gpus / ((sizes[:, 0] + sizes[:, 1]) / 2)


def formula_curves(config: SimConfig, specs: Specs, points: np.ndarray, noise: np.ndarray,
                   curves_rng: np.random.Generator) -> Curves:
    """The hidden curves of the jobs of `specs`, drawn from `curves_rng`.

    Per job, in job order: its curve parameters (start, gain, then peak and collapse for a
    hacking RLHF run or the time constant otherwise), then its four loss parameters, each
    uniform over its configured range. All are drawn as one array of doubles (lo + (hi - lo) u,
    bit for bit what a `rng.uniform(lo, hi)` per parameter gives) and the curves are evaluated
    as one matrix per family. `noise` holds one row per job.
    """
    c = config.curves
    hack = np.asarray(specs.is_hacking, np.bool_)
    n, n_curve = len(hack), np.where(hack, len(HACKING_PARAMS), len(SATURATING_PARAMS))
    families = (c.lora, c.dpo, c.rlhf_healthy)
    curve_ranges = np.zeros((4, len(HACKING_PARAMS), 2))   # per family, hacking last
    for f, (curve, names) in enumerate([(fam, SATURATING_PARAMS) for fam in families]
                                       + [(c.rlhf_hacking, HACKING_PARAMS)]):
        curve_ranges[f, :len(names)] = [getattr(curve, name) for name in names]
    loss_ranges = np.array([[getattr(_profile(config, t).loss, f) for f in LOSS_PARAMS]
                            for t in JOB_TYPES], np.float64)
    # each job's ranges in draw order (curve then loss), padded to 8; `drawn` marks the real ones
    ranges = np.zeros((n, len(HACKING_PARAMS) + len(LOSS_PARAMS), 2))
    ranges[:, :len(HACKING_PARAMS)] = curve_ranges[np.where(hack, 3, specs.jtype)]
    column = np.arange(ranges.shape[1])[None, :]
    is_loss = (column >= n_curve[:, None]) & (column < n_curve[:, None] + len(LOSS_PARAMS))
    ranges[is_loss] = loss_ranges[specs.jtype].reshape(-1, 2)
    drawn = column < (n_curve + len(LOSS_PARAMS))[:, None]
    lo_hi = ranges[drawn]
    params = np.full(ranges.shape[:2], np.nan)
    params[drawn] = lo_hi[:, 0] + (lo_hi[:, 1] - lo_hi[:, 0]) * curves_rng.random(len(lo_hi))
    true = np.empty((n, len(points)))
    for hacking in (True, False):
        rows = np.flatnonzero(hack == hacking)
        if not len(rows):
            continue
        k = len(HACKING_PARAMS if hacking else SATURATING_PARAMS)
        columns = params[rows, :k].T[:, :, None]
        true[rows] = (gao_hacking if hacking else saturating)(points[None, :], *columns)
    is_curve = column < n_curve[:, None]
    return Curves(hack, np.where(hack, params[:, HACKING_PARAMS.index("peak_progress")], 1.0),
                  eval_minutes(config, specs.jtype, specs.gpus),
                  params[is_loss].reshape(n, len(LOSS_PARAMS)),
                  np.concatenate([[0], np.cumsum(n_curve)]).astype(np.int64), params[is_curve],
                  true, observe(true, noise[:n]))


def true_curves(job: Job, progress: np.ndarray) -> dict[str, np.ndarray]:
    """Noiseless eval score, loss and reward-model score of a job on a progress grid (for plots)."""
    if job.is_hacking:
        score = gao_hacking(progress, *job.curve_params)
    else:
        score = saturating(progress, *job.curve_params)
    loss = exp_loss(progress, *job.loss_params)
    return {"eval": score, "loss": loss, "reward_model": 1.0 - loss / loss[0]}


class DropToNoise(NamedTuple):
    """How hard a workload's hacking is to see through its eval noise (hidden truth: scoring only).

    peak_to_final: mean over hacking jobs of (true peak eval - true final eval) / sigma.
    step: mean over hacking jobs of the largest drop between consecutive post-peak evals,
    / (sigma sqrt 2) -- the signal-to-noise of one eval-to-eval difference.
    """

    peak_to_final: float
    step: float
    n_hacking: int


def drop_to_noise(config: SimConfig, seeds: Sequence[int]) -> DropToNoise:
    """Drop-to-noise ratios of the hacking jobs of `config`'s workload over `seeds`."""
    drops, steps = [], []
    for seed in seeds:
        for job in generate_workload(config, seed):
            if not job.is_hacking:
                continue
            top = int(np.argmax(job.eval_true))
            drops.append(job.eval_true[top] - job.eval_true[-1])
            tail = -np.diff(job.eval_true[top:])
            steps.append(float(tail.max()) if len(tail) else 0.0)
    sigma = config.noise.sigma
    if not drops or sigma <= 0:
        return DropToNoise(math.nan, math.nan, len(drops))
    return DropToNoise(float(np.mean(drops)) / sigma,
                       float(np.mean(steps)) / (sigma * math.sqrt(2.0)), len(drops))
