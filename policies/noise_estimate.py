"""A robust, pooled estimate of eval noise for detectors that think in units of noise.

Eval noise is a property of the benchmark, not of one job, so the estimate pools the second
differences of every finished job's eval series (fed through `on_job_end`) with the current job's.
Second differences cancel a locally linear trend, so a rising or falling curve barely biases it;
the MAD makes it robust to curvature near a peak and to heavy-tailed outliers.
For i.i.d. noise of standard deviation sigma, Var(second difference) = 6 sigma^2 and
Var(first difference) = 2 sigma^2; under AR(1) noise both shrink, by about as much.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri

from evalstop_gym.sim.view import SchedulerJobView

from .detector import DetectorBase

NORMAL_MAD = float(ndtri(0.75))  # MAD of a standard Normal: scipy's scale="normal"


def second_differences(scores: Sequence[float]) -> np.ndarray:
    return np.diff(np.asarray(scores, dtype=float), n=2)


class PooledNoise:
    """Second differences pooled over finished jobs; `sigma()` is the per-eval noise estimate."""

    def __init__(self, min_count: int = 8, floor: float = 1e-3) -> None:
        self.min_count = min_count
        self.floor = floor
        self._pool: list[float] = []

    def add(self, job: SchedulerJobView) -> None:
        self._pool.extend(second_differences(job.eval_scores).tolist())

    def reset(self) -> None:
        self._pool.clear()

    def sigma(self, scores: Sequence[float] = ()) -> float | None:
        """Per-eval noise sd, or None while fewer than `min_count` second differences exist."""
        values = np.concatenate([self._pool, second_differences(scores)])
        if len(values) < self.min_count:
            return None
        mad_sd = float(np.median(np.abs(values - np.median(values)))) / NORMAL_MAD
        return max(self.floor, mad_sd / np.sqrt(6.0))


class NoiseScaledDetector(DetectorBase):
    """A detector that thinks in units of eval noise: a fixed `sigma`, or the pooled estimate."""

    sigma: float | None = None

    def __init__(self) -> None:
        self.noise = PooledNoise()

    @property
    def needs(self) -> tuple[str, ...]:
        """A fixed sigma needs the evals only; the estimate also learns from ended runs."""
        return ("evals",) if self.sigma is not None else ("evals", "runs")

    def noise_sigma(self, scores: Sequence[float]) -> float | None:
        return self.sigma if self.sigma is not None else self.noise.sigma(scores)

    def on_job_end(self, job: SchedulerJobView) -> None:
        if job.job_type in self.types:
            self.noise.add(job)

    def reset(self) -> None:
        self.noise.reset()
