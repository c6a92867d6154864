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
from .jobs import JOB_TYPES, Job, JobSpec
from .pace import draw_eval_work, row_work_at
from .rules import ROUNDING

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
    return finish_jobs(config, streams, *synthetic_specs(config, streams), make_jobs)


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
RunSpecs = tuple[list[JobSpec], np.ndarray, np.ndarray]
MakeJobs = Callable[[SimConfig, Sequence[JobSpec], np.ndarray, np.ndarray, np.random.Generator],
                    list[Job]]


def finish_jobs(config: SimConfig, streams: Streams, specs: list[JobSpec], points: np.ndarray,
                noise: np.ndarray, make: MakeJobs) -> list[Job]:
    """The jobs of `specs` with curves from `make` (`make_jobs`: the formulas), then their
    step-time jitter: the last two steps of every run, whatever its source."""
    jobs = make(config, specs, points, noise, streams.curves)
    assign_pace(config, jobs, streams.pace)
    return jobs


def assign_pace(config: SimConfig, jobs: Sequence[Job], rng: np.random.Generator) -> None:
    """Draw each job's step-time jitter (one row of normals per job, in job order, whatever its
    volatility, so a change of volatility rescales the same draws); volatility 0 leaves a job
    evenly paced."""
    groups: dict[int, list[Job]] = {}
    for job in jobs:
        groups.setdefault(id(job.eval_points), []).append(job)
    for members in groups.values():
        volatility = np.array([getattr(config.job_types, j.job_type).step_time_volatility
                               for j in members])
        work = draw_eval_work(members[0].eval_points, volatility, rng)
        peaks = row_work_at(members[0].eval_points, work, [j.peak_progress for j in members])
        for job, row, peak, vol in zip(members, work, peaks.tolist(), volatility.tolist(),
                                       strict=True):
            if vol > 0:
                job.set_pace(row, peak)


def synthetic_specs(config: SimConfig, streams: Streams) -> RunSpecs:
    """Poisson arrivals, tenants, types, labels and sizes from the run's streams."""
    wl = config.workload
    arrivals_rng, sizes_rng, curves_rng, noise_rng = streams[:4]
    n = wl.n_jobs
    arrivals = np.cumsum(arrivals_rng.exponential(1.0 / wl.arrival_rate_per_min, n))
    tenants = arrivals_rng.integers(0, wl.n_tenants, n)
    types, hacking = draw_types(wl, arrivals_rng, curves_rng)
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(noise_rng, (n, len(points)), config.noise, points)
    specs = []
    for i in range(n):
        job_type = JOB_TYPES[types[i]]
        profile: JobTypeConfig = getattr(config.job_types, job_type)
        duration = float(sizes_rng.uniform(*profile.duration_min))
        gpus = int(sizes_rng.integers(profile.gpus[0], profile.gpus[1] + 1))
        specs.append(JobSpec(i, int(tenants[i]), job_type, float(arrivals[i]), duration, gpus,
                             bool(job_type == "rlhf" and hacking[i])))
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


def eval_minutes(config: SimConfig, profile: JobTypeConfig, gpus: int) -> float:
    """Minutes one eval of a job takes: its type's figure, or (`evals.cost: per_gpu`) that figure
    scaled by the job's GPUs over the type's mean demand, as eval time grows with model size."""
    if config.evals.cost == "per_type":
        return profile.eval_minutes
    return profile.eval_minutes * gpus / ((profile.gpus[0] + profile.gpus[1]) / 2)


def make_jobs(config: SimConfig, specs: Sequence[JobSpec], points: np.ndarray,
              noise: np.ndarray, curves_rng: np.random.Generator) -> list[Job]:
    """The jobs of `specs` with their hidden curves, drawn from `curves_rng`.

    Per job, in spec order: its curve parameters (start, gain, then peak and collapse for a
    hacking RLHF run or the time constant otherwise), then its four loss parameters, each
    uniform over its configured range. All are drawn as one array of doubles (lo + (hi - lo) u,
    bit for bit what a `rng.uniform(lo, hi)` per parameter gives) and the curves are evaluated
    as one matrix per family. `noise` holds one row per job id.
    """
    if not specs:
        return []
    c = config.curves
    healthy = {"lora": c.lora, "dpo": c.dpo, "rlhf": c.rlhf_healthy}
    ranges = []      # per spec: the (lo, hi) of each parameter, in draw order
    for spec in specs:
        curve = c.rlhf_hacking if spec.is_hacking else healthy[spec.job_type]
        names = HACKING_PARAMS if spec.is_hacking else SATURATING_PARAMS
        loss = getattr(config.job_types, spec.job_type).loss
        ranges.append([getattr(curve, f) for f in names]
                      + [getattr(loss, f) for f in LOSS_PARAMS])
    lo_hi = np.array([r for spec_ranges in ranges for r in spec_ranges], dtype=np.float64)
    values = lo_hi[:, 0] + (lo_hi[:, 1] - lo_hi[:, 0]) * curves_rng.random(len(lo_hi))
    params, at = [], 0
    for spec_ranges in ranges:
        params.append(values[at:at + len(spec_ranges)].tolist())
        at += len(spec_ranges)
    true = np.empty((len(specs), len(points)))
    for hacking in (True, False):
        rows = [i for i, spec in enumerate(specs) if spec.is_hacking == hacking]
        if not rows:
            continue
        n_curve = len(HACKING_PARAMS if hacking else SATURATING_PARAMS)
        columns = np.array([params[i][:n_curve] for i in rows]).T[:, :, None]
        true[rows] = (gao_hacking if hacking else saturating)(points[None, :], *columns)
    observed = observe(true, noise[[spec.job_id for spec in specs]])
    jobs = []
    for i, spec in enumerate(specs):
        n_curve = len(HACKING_PARAMS if spec.is_hacking else SATURATING_PARAMS)
        profile: JobTypeConfig = getattr(config.job_types, spec.job_type)
        jobs.append(Job(
            job_id=spec.job_id, tenant=spec.tenant, job_type=spec.job_type, gpus=spec.gpus,
            arrival=spec.arrival, duration_estimate=profile.duration_estimate,
            duration=spec.duration, is_hacking=spec.is_hacking,
            peak_progress=params[i][HACKING_PARAMS.index("peak_progress")] if spec.is_hacking
            else 1.0,
            eval_points=points, eval_true=true[i], eval_observed=observed[i],
            eval_minutes=eval_minutes(config, profile, spec.gpus),
            loss_params=tuple(params[i][n_curve:]),
            curve_params=tuple(params[i][:n_curve])))
    return jobs


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
