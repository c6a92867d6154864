"""A seeded synthetic workload: arrivals, tenants, types, sizes, curves and eval noise.

One `numpy.random.SeedSequence` per run spawns independent streams (arrivals, sizes, curves, noise),
so changing, say, the noise level leaves the arrivals and curves of a seed untouched: every policy
and every cell of a sweep sees the same jobs (common random numbers).
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from ..config import JobTypeConfig, SimConfig
from .curves import draw_loss_params, eval_noise, exp_loss, gao_hacking, observe, saturating
from .jobs import Job

JOB_TYPES = ("lora", "dpo", "rlhf")


def eval_points(interval: float, final: bool) -> np.ndarray:
    """Progress fractions where evals run: every `interval`, plus 1.0 when `final`."""
    n = int(np.floor(1.0 / interval + 1e-9))
    pts = np.round(np.arange(1, n + 1) * interval, 10)
    pts = pts[pts < 1.0 - 1e-9]
    if final:
        pts = np.append(pts, 1.0)
    return pts


class JobSpec(NamedTuple):
    """What a workload source decides about a job before its curves are drawn."""

    job_id: int
    tenant: int
    job_type: str
    arrival: float      # minutes
    duration: float     # true training minutes
    gpus: int
    is_hacking: bool


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The jobs of one run, in arrival order, with hidden curves and pre-drawn eval noise.

    `workload.source: philly` replays a window of the Philly trace instead (evalstop_gym.traces).
    """
    if config.workload.source != "synthetic":
        from ..traces.philly import trace_workload

        return trace_workload(config, seed)
    wl = config.workload
    arrivals_rng, sizes_rng, curves_rng, noise_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    n = wl.n_jobs
    arrivals = np.cumsum(arrivals_rng.exponential(1.0 / wl.arrival_rate_per_min, n))
    tenants = arrivals_rng.integers(0, wl.n_tenants, n)
    mix = np.array([wl.mix.lora, wl.mix.dpo, wl.mix.rlhf])
    types = arrivals_rng.choice(3, size=n, p=mix / mix.sum())
    hacking = curves_rng.random(n) < wl.hacking_fraction
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(noise_rng, (n, len(points)), config.noise)
    jobs = []
    for i in range(n):
        job_type = JOB_TYPES[types[i]]
        profile: JobTypeConfig = getattr(config.job_types, job_type)
        duration = float(sizes_rng.uniform(*profile.duration_min))
        gpus = int(sizes_rng.integers(profile.gpus[0], profile.gpus[1] + 1))
        spec = JobSpec(i, int(tenants[i]), job_type, float(arrivals[i]), duration, gpus,
                       bool(job_type == "rlhf" and hacking[i]))
        jobs.append(make_job(config, spec, points, noise[i], curves_rng))
    return jobs


def make_job(config: SimConfig, spec: JobSpec, points: np.ndarray, noise: np.ndarray,
             curves_rng: np.random.Generator) -> Job:
    """A job with its hidden curves: eval curve, then loss parameters, drawn from `curves_rng`."""
    profile: JobTypeConfig = getattr(config.job_types, spec.job_type)
    true_scores, peak, params = _eval_curve(config, spec.job_type, spec.is_hacking, points,
                                            curves_rng)
    loss_params = draw_loss_params(curves_rng, profile.loss)
    return Job(
        job_id=spec.job_id, tenant=spec.tenant, job_type=spec.job_type, gpus=spec.gpus,
        arrival=spec.arrival, duration_estimate=profile.duration_estimate,
        duration=spec.duration, is_hacking=spec.is_hacking, peak_progress=peak,
        eval_points=points, eval_true=true_scores, eval_observed=observe(true_scores, noise),
        eval_minutes=profile.eval_minutes, loss_params=loss_params, curve_params=params,
    )


def _eval_curve(config: SimConfig, job_type: str, is_hacking: bool, points: np.ndarray,
                rng: np.random.Generator) -> tuple[np.ndarray, float, tuple[float, ...]]:
    """True eval scores at `points`, the progress of the true peak, and the drawn parameters."""
    if is_hacking:
        c = config.curves.rlhf_hacking
        params = (rng.uniform(*c.start), rng.uniform(*c.gain), rng.uniform(*c.peak_progress),
                  rng.uniform(*c.collapse))
        return gao_hacking(points, *params), params[2], params
    c = {"lora": config.curves.lora, "dpo": config.curves.dpo,
         "rlhf": config.curves.rlhf_healthy}[job_type]
    params = (rng.uniform(*c.start), rng.uniform(*c.gain), rng.uniform(*c.time_constant))
    return saturating(points, *params), 1.0, params


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
