"""Each finished job's scored columns, one loop over a `JobTable`'s arrays.

Plain functions that numba compiles (`compiled.py`); without numba they run as they are. The
checkpoint a stop keeps and its truth are `sim.checkpoint`'s, the rule the env and `RunMonitor`
use.
"""

from __future__ import annotations

import math

import numpy as np

from ..sim.checkpoint import best_eval, true_score_at
from ..sim.rules import ROUNDING, Floats

# rows of `score_jobs`'s output
TTFUC, SAVED, BEST_SCORE, BEST_PROGRESS, DELIVERED, ORACLE = range(6)
N_SCORED = 6


def useful_time(scores: Floats, times: Floats, tau: float, margin: float) -> float:
    """Time of the first eval above `tau` that beats the best before it by the relative
    `margin` (NaN when none does): when the user first had a useful checkpoint."""
    best = -math.inf
    for k in range(len(scores)):
        s = scores[k]
        improves = best == -math.inf or s >= best + margin * abs(best)
        if s > tau and improves:
            return times[k]
        if s > best:    # Python's max(best, s)
            best = s
    return math.nan


def saved_minutes(gpus: int, duration: float, work: float, eval_minutes: float,
                  points: Floats, progress: float) -> float:
    """GPU-minutes a stop at `progress` (`work` done) spared: the training left and the evals
    still ahead."""
    remaining = 0
    for p in points:
        if p > progress + ROUNDING:
            remaining += 1
    return gpus * (duration * (1.0 - work) + remaining * eval_minutes)


def highest(values: Floats) -> float:
    """np.max of `values` (NaN if any is NaN), NaN when empty."""
    top = math.nan
    for k in range(len(values)):
        v = values[k]
        if math.isnan(v):
            return math.nan
        if k == 0 or v > top:
            top = v
    return top


def score_jobs(stopped: np.ndarray, gpus: np.ndarray, duration: np.ndarray,
               eval_min: np.ndarray, work: np.ndarray, progress: np.ndarray,
               arrival: np.ndarray, ev_ptr: np.ndarray, ev_point: np.ndarray,
               ev_true: np.ndarray, obs_ptr: np.ndarray, obs_score: np.ndarray,
               obs_prog: np.ndarray, obs_time: np.ndarray, tau: float, margin: float,
               out: np.ndarray) -> None:
    """Each job's ttfuc, saved GPU-minutes, kept checkpoint (score, progress), the true score
    of what the user gets (the kept checkpoint if stopped, else the last eval) and the best
    true score over its schedule, into the rows of `out` (N_SCORED x n)."""
    for j in range(len(gpus)):
        a, b = obs_ptr[j], obs_ptr[j + 1]
        points, truth = ev_point[ev_ptr[j]:ev_ptr[j + 1]], ev_true[ev_ptr[j]:ev_ptr[j + 1]]
        scores = obs_score[a:b]
        best = best_eval(scores, 0, -1)
        out[TTFUC, j] = useful_time(scores, obs_time[a:b], tau, margin) - arrival[j]
        out[SAVED, j] = saved_minutes(gpus[j], duration[j], work[j], eval_min[j], points,
                                      progress[j]) if stopped[j] else 0.0
        out[ORACLE, j] = highest(truth)
        if best < 0:
            out[BEST_SCORE, j] = out[BEST_PROGRESS, j] = out[DELIVERED, j] = math.nan
            continue
        out[BEST_SCORE, j], out[BEST_PROGRESS, j] = scores[best], obs_prog[a + best]
        kept = obs_prog[a + best] if stopped[j] else obs_prog[b - 1]
        out[DELIVERED, j] = true_score_at(points, truth, kept)
