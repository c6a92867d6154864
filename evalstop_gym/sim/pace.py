"""Step-time jitter: how a job's training minutes are spread over its progress.

A trainer reports progress as steps done / steps planned; the minutes a step takes drift over a
run (RLHF responses grow or shrink, a node is shared, data lengths change). So the fraction of a
job's training minutes spent by a given progress (its *work*) is not the progress itself. Here a
job's log step time follows a Brownian motion in progress, with the volatility of its type
(`job_types.<type>.step_time_volatility`, per unit of progress), held constant between
consecutive eval points: `eval_work[i]` is the work done at `eval_points[i]`, and work is
piecewise linear in progress between them (0 at 0, 1 at 1). The job's true training minutes
stay `duration`; what is hidden is how they are spread, so a scheduler that reads progress and
the clock does not learn the rest of a run exactly (see `view.py`).

The engines advance work linearly in time (`speed / duration` per minute) and report progress
through `progress_between`, the one formula both of them use. A job with volatility 0 has no
`eval_work` (None): its work is its progress, bit for bit as without jitter.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from .rules import ROUNDING


def draw_eval_work(points: np.ndarray, volatility: np.ndarray,
                   rng: np.random.Generator) -> np.ndarray:
    """The work done at each of `points` (one row per entry of `volatility`), for jobs that
    share the eval points `points`: log step time is a random walk with steps of standard
    deviation `volatility * sqrt(progress between knots)`, normalised so work reaches 1 at 1."""
    knots = knot_progress(points)
    widths = np.diff(knots)
    steps = rng.standard_normal((len(volatility), len(widths)))
    log_pace = np.cumsum(steps * (np.asarray(volatility)[:, None] * np.sqrt(widths)), axis=1)
    minutes = np.cumsum(np.exp(log_pace) * widths, axis=1)
    work = minutes / minutes[:, -1:]
    work[:, -1] = 1.0
    return np.ascontiguousarray(work[:, :len(points)])


def knot_progress(points: np.ndarray) -> np.ndarray:
    """0, the eval points, and 1 (once): the progress where a job's step time may change."""
    tail = 0 if len(points) > 0 and points[-1] >= 1.0 - ROUNDING else 1
    knots = np.ones(len(points) + 1 + tail)
    knots[0] = 0.0
    knots[1:len(points) + 1] = points
    return knots


def work_at(points: np.ndarray, eval_work: np.ndarray, progress: np.ndarray | float
            ) -> np.ndarray:
    """Work done at each of `progress` (values in [0, 1]), linear between the knots; with
    `eval_work` a matrix (one row per job sharing `points`), one row of answers per job."""
    progress = np.asarray(progress, dtype=np.float64)
    x, w, k = _segments(points, eval_work, progress)
    return _linear(progress, x[k], x[k + 1], w[..., k], w[..., k + 1])


def row_work_at(points: np.ndarray, eval_work: np.ndarray,
                progress: np.ndarray | Sequence[float]) -> np.ndarray:
    """Work done by row i of `eval_work` at `progress[i]`: `work_at` one value per job, to the
    bit (the same lines), for a whole workload at once."""
    progress = np.asarray(progress, dtype=np.float64)
    x, w, k = _segments(points, eval_work, progress)
    rows = np.arange(len(progress))
    return _linear(progress, x[k], x[k + 1], w[rows, k], w[rows, k + 1])


def _segments(points: np.ndarray, eval_work: np.ndarray, progress: np.ndarray
              ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The knots' progress, the work at them (a row per job: 0 first, 1 last), and the index of
    the segment each of `progress` falls in."""
    x = knot_progress(points)
    eval_work = np.asarray(eval_work, dtype=np.float64)
    pad = np.ones(eval_work.shape[:-1] + (len(x) - 1 - eval_work.shape[-1],))
    w = np.concatenate([np.zeros(eval_work.shape[:-1] + (1,)), eval_work, pad], axis=-1)
    return x, w, np.clip(np.searchsorted(x, progress, side="right") - 1, 0, len(x) - 2)


def _linear(progress, x_lo, x_hi, w_lo, w_hi):
    return np.where(progress >= 1.0, 1.0, segment_work(progress, x_lo, x_hi, w_lo, w_hi))


def segment_work(progress, x_lo, x_hi, w_lo, w_hi):
    """The work at `progress` on the segment from (x_lo, w_lo) to (x_hi, w_hi)."""
    return w_lo + (progress - x_lo) * ((w_hi - w_lo) / (x_hi - x_lo))


def point_work(knots: np.ndarray, eval_work: np.ndarray, progress: float) -> float:
    """`work_at` for one job at one progress, in a form compiled code runs too (the packer's):
    the same knots (`knot_progress`), segment and formula, so the same bits. `eval_work` is the
    job's row; past its last eval point the work at a knot is 1, as `_segments` pads it."""
    if progress >= 1.0:
        return 1.0
    n = len(eval_work)
    k = min(max(np.searchsorted(knots, progress, side="right") - 1, 0), len(knots) - 2)
    w_lo = 0.0 if k == 0 else (eval_work[k - 1] if k <= n else 1.0)
    w_hi = eval_work[k] if k < n else 1.0
    return segment_work(progress, knots[k], knots[k + 1], w_lo, w_hi)


def progress_between(work: float, prev_progress: float, prev_work: float,
                     next_progress: float, next_work: float) -> float:
    """The progress a trainer reports at `work`, between two checks of the job (the knots are
    checks, so step time is constant between them). The native kernel compiles this function."""
    if work >= next_work:
        return next_progress
    if work <= prev_work:
        return prev_progress
    return prev_progress + (work - prev_work) * ((next_progress - prev_progress)
                                                 / (next_work - prev_work))
