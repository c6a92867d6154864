"""A robust, pooled estimate of eval noise for detectors that think in units of noise.

Eval noise is a property of the benchmark, not of one job, so the estimate pools the second
differences of every finished job's eval series (fed through `on_job_end`). Second differences
cancel a locally linear trend, so a rising or falling curve barely biases it; the MAD makes it
robust to curvature near a peak and to heavy-tailed outliers.
For i.i.d. noise of standard deviation sigma, Var(second difference) = 6 sigma^2 and
Var(first difference) = 2 sigma^2; under AR(1) noise both shrink, by about as much.

Which values, and why it is fixed for a job. While fewer than `min_count` second differences are
pooled, the job's own earliest second differences make up the count (the first
`min_count - pooled` of them), and nothing later of the job is used: the estimate is a function of
the pool and of the job's first evals only, so it stays fixed along the job while the pool is
unchanged. A detector may then keep its statistic across evals (`HistoryWindow.fold`) instead of
recomputing it from the whole series, and the simulator (which recomputes) decides alike.

Units. The estimate is in the metric's own units and scales with them (MAD and RMS are both
equivariant; an offset cancels in the differences). The floor that keeps it from collapsing to 0
on quantised evals (many second differences exactly 0) is relative, not absolute:
`FLOOR_FRACTION` times the RMS-based estimate of the same values. Only when every second
difference is 0 (a perfectly linear or constant series: no noise to measure) is there no
estimate (None), and detectors that need one continue.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from scipy.special import ndtri

from evalstop_gym.sim.view import SchedulerJobView

from .detector import DetectorBase

NORMAL_MAD = float(ndtri(0.75))  # MAD of a standard Normal: scipy's scale="normal"
FLOOR_FRACTION = 0.1             # floor of the MAD estimate, as a fraction of the RMS estimate


def second_differences(scores: Sequence[float]) -> np.ndarray:
    return np.diff(np.asarray(scores, dtype=float), n=2)


def robust_sigma(values: np.ndarray) -> float | None:
    """Per-eval noise sd from second differences: the MAD estimate, floored at `FLOOR_FRACTION`
    of the RMS estimate (both scale with the metric); None if every value is 0."""
    rms_sd = float(np.sqrt(np.mean(values * values)))
    if rms_sd == 0.0:
        return None
    mad_sd = float(np.median(np.abs(values - np.median(values)))) / NORMAL_MAD
    return max(mad_sd, FLOOR_FRACTION * rms_sd) / np.sqrt(6.0)


class PooledNoise:
    """Second differences pooled over finished jobs; `sigma()` is the per-eval noise estimate."""

    def __init__(self, min_count: int = 8) -> None:
        self.min_count = min_count
        self._pool: list[float] = []
        self._cached: tuple[object, float | None] | None = None   # (what it came from, value)

    def add(self, job: SchedulerJobView) -> None:
        self._pool.extend(second_differences(job.eval_scores).tolist())
        self._cached = None

    def reset(self) -> None:
        self._pool.clear()
        self._cached = None

    def sigma(self, scores: Sequence[float] = ()) -> float | None:
        """Per-eval noise sd from the pool topped up with the job's first second differences
        (see the module docstring), or None while fewer than `min_count` exist. O(1) per call
        (the estimate is cached until the pool or the evals it came from change)."""
        own = self.min_count - len(self._pool)
        if own > 0 and len(scores) < own + 2:
            return None
        first = tuple(scores[:own + 2]) if own > 0 else ()   # the evals it is computed from
        if self._cached is None or self._cached[0] != first:
            values = np.concatenate([self._pool, second_differences(first)])
            self._cached = (first, robust_sigma(values))
        return self._cached[1]


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
