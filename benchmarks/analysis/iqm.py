"""The interquartile mean of a runs x tasks score matrix and its stratified-bootstrap CI.

rliable's aggregate (Agarwal et al., 2021): the IQM (`scipy.stats.trim_mean(x, 0.25)`) pools
every run of every task, and the CI resamples runs within each task (a stratified bootstrap,
`scipy.stats.bootstrap`), so a task with many runs does not stand in for one with few. The one
computation behind `learned_seeds` and `score`.
"""

from __future__ import annotations

import warnings

import numpy as np
from scipy import stats


def iqm_ci(matrix: np.ndarray, resamples: int = 2000, seed: int = 0,
           level: float = 0.95) -> tuple[float, float, float]:
    """IQM of a runs x tasks score matrix and its stratified-bootstrap percentile CI (runs
    resampled within each task). One run: the tasks are resampled instead. NaN entries (a
    metric undefined on a seed) are left out."""
    matrix = np.asarray(matrix, dtype=float)
    if matrix.shape[0] == 1:
        matrix = matrix.T
    columns = [col[np.isfinite(col)] for col in matrix.T]
    columns = [col for col in columns if len(col)]
    if not columns:
        return (np.nan, np.nan, np.nan)
    iqm = float(stats.trim_mean(np.concatenate(columns), 0.25))
    varying = [col for col in columns if len(col) > 1]
    fixed = np.concatenate([col for col in columns if len(col) == 1] or [np.empty(0)])
    if not varying:
        return (iqm, iqm, iqm)

    def statistic(*samples: np.ndarray, axis: int = -1) -> np.ndarray:
        shape = (*samples[0].shape[:-1], len(fixed))
        joined = np.concatenate([*samples, np.broadcast_to(fixed, shape)], axis=-1)
        return stats.trim_mean(joined, 0.25, axis=-1)

    with warnings.catch_warnings():   # identical values: a zero-width CI, as it should be
        warnings.simplefilter("ignore", stats.DegenerateDataWarning)
        result = stats.bootstrap(varying, statistic, n_resamples=resamples, vectorized=True,
                                 confidence_level=level, method="percentile",
                                 rng=np.random.default_rng(seed))
    low, high = result.confidence_interval
    low, high = (iqm, iqm) if np.isnan(low) else (float(low), float(high))
    return (iqm, low, high)
