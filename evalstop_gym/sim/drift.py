"""A smooth drift of eval scores in training progress, the same whatever the eval schedule.

Real eval curves wander smoothly around their trend (a checkpoint a little better or worse for a
stretch of the run), and the wander is a property of the run, not of how often it is evaluated.
So the drift is a stationary Ornstein-Uhlenbeck process in progress p (the fraction of the run),
unit variance, correlation exp(-|p - q| / scale), drawn for each job on a fixed grid of
`DRIFT_GRID` intervals of [0, 1] and read at the eval points by linear interpolation. The grid
does not depend on the points, so a job's drift at a given progress is the same whatever the
other eval points are (a denser schedule sees the same path, more often). Multiples of 1/2400
hold every 1%, 2%, 2.5%, 5%, 1/3, 1/60 ... exactly; between nodes interpolation lowers the
variance by at most (1 - exp(-1 / (2400 scale))) / 2: 0.2% at scale 0.1, 4% at the smallest
scale the config allows (0.005).
"""

from __future__ import annotations

import numpy as np
from scipy.signal import lfilter

DRIFT_GRID = 2400   # intervals of progress [0, 1] the path is drawn on
CHUNK_JOBS = 512    # jobs whose paths are held at once (a path is 19 kB; memory stays bounded)


def drift_correlation(lag: np.ndarray | float, scale: float) -> np.ndarray:
    """The drift's correlation between two points `lag` apart in progress: exp(-|lag| / scale)
    (the generator below and the public-run fit, `corpus.noise_fit`, both read this)."""
    return np.exp(-np.abs(np.asarray(lag, dtype=float)) / scale)


def progress_drift(rng: np.random.Generator, n_jobs: int, points: np.ndarray,
                   scale: float) -> np.ndarray:
    """(n_jobs x len(points)) unit-variance drift, rows independent; draws n_jobs x
    (DRIFT_GRID + 1) normals from `rng` whatever the points (in chunks of jobs: the same
    draws as one block)."""
    phi = float(drift_correlation(1.0 / DRIFT_GRID, scale))
    at = np.clip(np.asarray(points, dtype=float), 0.0, 1.0) * DRIFT_GRID
    at = np.where(np.abs(at - np.round(at)) < 1e-6, np.round(at), at)   # a node hit exactly
    left = np.minimum(np.floor(at).astype(np.int64), DRIFT_GRID - 1)
    w = at - left
    out = np.empty((n_jobs, len(at)))
    for start in range(0, n_jobs, CHUNK_JOBS):
        e = rng.standard_normal((min(CHUNK_JOBS, n_jobs - start), DRIFT_GRID + 1))
        e[:, 1:] *= np.sqrt(1.0 - phi * phi)          # stationary from the first node on
        path = lfilter([1.0], [1.0, -phi], e, axis=1)
        out[start:start + len(e)] = (1.0 - w) * path[:, left] + w * path[:, left + 1]
    return out
