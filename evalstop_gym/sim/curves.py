"""Hidden training curves (eval score and loss vs progress) and eval noise.

All functions are vectorised over progress so a job's whole eval schedule is computed once at
creation. Scores are in benchmark units (0..1, like an accuracy or win rate).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..config import NoiseConfig
from .drift import progress_drift

# the four parameters of a training-loss curve (`exp_loss`), in draw order
LOSS_PARAMS = ("initial", "floor_fraction", "plateau_progress", "residual")

SCORE_RANGE = (0.0, 1.0)  # eval scores are bounded like an accuracy or a win rate


def observe(true_scores: np.ndarray, noise: np.ndarray) -> np.ndarray:
    """What an eval reports: the true score plus noise, kept inside the score's range."""
    return np.clip(true_scores + noise, *SCORE_RANGE)


def saturating(p: np.ndarray, start: float, gain: float, c: float) -> np.ndarray:
    """Monotone rise start -> start + gain over p in [0, 1]; small c saturates early."""
    return start + gain * np.expm1(-p / c) / np.expm1(-1.0 / c)


def gao_hacking(p: np.ndarray, start: float, gain: float, peak: float,
                collapse: float) -> np.ndarray:
    """Gao et al.'s R(d) = d (alpha - beta ln d) as u (1 - ln u), u = (p / peak) ** collapse.

    The maximum, start + gain, is at p = peak; past it the score falls, faster for larger collapse.
    u (1 - ln u) turns negative past u = e; a benchmark score cannot, so it is floored at 0.
    """
    u = np.power(np.maximum(p, 1e-12) / peak, collapse)
    shape = u * (1.0 - np.log(u))
    return np.maximum(start + gain * np.where(p > 0, shape, 0.0), 0.0)


def exp_loss(p: np.ndarray | float, initial: np.ndarray | float,
             floor_fraction: np.ndarray | float, plateau: np.ndarray | float,
             residual: np.ndarray | float) -> np.ndarray:
    """Loss from `initial` down to `initial * floor_fraction`, within `residual` at `plateau`.

    Any argument may be a scalar or an array (broadcast): one job at one point, or many jobs'
    parameters as columns against a row of points."""
    return loss_at(p, *loss_terms(initial, floor_fraction, plateau, residual))


def loss_terms(initial: np.ndarray | float, floor_fraction: np.ndarray | float,
               plateau: np.ndarray | float, residual: np.ndarray | float
               ) -> tuple[Any, Any, Any]:
    """`exp_loss`'s curve without its progress: (floor, initial - floor, -rate), computed once
    per job by a caller that evaluates many points of it (the same bits as `exp_loss`)."""
    floor = initial * floor_fraction
    rate = -np.log(residual) / plateau
    return floor, initial - floor, -rate


def loss_at(p: np.ndarray | float, floor: Any, span: Any, neg_rate: Any) -> np.ndarray:
    """`exp_loss` at progress `p` from its `loss_terms`."""
    return floor + span * np.exp(neg_rate * p)


def eval_noise(rng: np.random.Generator, shape: tuple[int, int], cfg: NoiseConfig,
               points: np.ndarray | None = None) -> np.ndarray:
    """Noise for a (jobs x evals) grid, standard deviation cfg.sigma, rows independent.

    gaussian: i.i.d.; student_t: i.i.d. heavy-tailed, rescaled to unit variance; ar1: stationary
    AR(1) along each row with correlation rho and the same marginal variance; drift: a smooth
    drift in progress (`sim.drift`: variance share drift_share, time-scale drift_scale) plus
    i.i.d. Gaussian noise, the same marginal variance. `points` (the evals' progress) is needed
    by drift only, whose correlation is in progress rather than in eval index.
    """
    n_jobs, n_evals = shape
    if n_evals == 0:
        return np.zeros(shape)
    if cfg.model == "gaussian":
        z = rng.standard_normal(shape)
    elif cfg.model == "student_t":
        z = rng.standard_t(cfg.df, shape) / np.sqrt(cfg.df / (cfg.df - 2.0))
    elif cfg.model == "ar1":
        e = rng.standard_normal(shape)
        z = np.empty(shape)
        z[:, 0] = e[:, 0]
        scale = np.sqrt(1.0 - cfg.rho**2)
        for i in range(1, n_evals):
            z[:, i] = cfg.rho * z[:, i - 1] + scale * e[:, i]
    elif cfg.model == "drift":
        if points is None or len(points) != n_evals:
            raise ValueError(f"noise model 'drift' needs the {n_evals} eval points' progress")
        drift = progress_drift(rng, n_jobs, points, cfg.drift_scale)   # first: same path at
        z = np.sqrt(cfg.drift_share) * drift + np.sqrt(1.0 - cfg.drift_share) * \
            rng.standard_normal(shape)                                  # any density
    else:  # pragma: no cover - rejected by config validation
        raise ValueError(f"unknown noise model {cfg.model!r}")
    return cfg.sigma * z
