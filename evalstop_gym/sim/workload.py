"""A seeded synthetic workload: arrivals, tenants, types, sizes, curves and eval noise.

One `numpy.random.SeedSequence` per run spawns independent streams (arrivals, sizes, curves, noise),
so changing, say, the noise level leaves the arrivals and curves of a seed untouched: every policy
and every cell of a sweep sees the same jobs (common random numbers).
"""

from __future__ import annotations

import numpy as np

from ..config import JobTypeConfig, SimConfig
from .curves import draw_loss_params, eval_noise, exp_loss, gao_hacking, saturating
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


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The jobs of one run, in arrival order, with hidden curves and pre-drawn eval noise."""
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
        is_hacking = bool(job_type == "rlhf" and hacking[i])
        true_scores, peak, params = _eval_curve(config, job_type, is_hacking, points, curves_rng)
        loss_params = draw_loss_params(curves_rng, profile.loss)
        jobs.append(Job(
            job_id=i, tenant=int(tenants[i]), job_type=job_type, gpus=gpus,
            arrival=float(arrivals[i]), duration_estimate=profile.duration_estimate,
            duration=duration, is_hacking=is_hacking, peak_progress=peak,
            eval_points=points, eval_true=true_scores,
            eval_observed=true_scores + noise[i], eval_minutes=profile.eval_minutes,
            loss_params=loss_params, curve_params=params,
        ))
    return jobs


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
