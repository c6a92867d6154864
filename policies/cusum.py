"""CUSUM: a one-sided (downward) cumulative-sum test on the differences of a job's evals.

With d_i = s_i - s_{i-1} and z_i = -d_i / scale, the statistic is
S_i = max(0, S_{i-1} + z_i - drift), and the job stops when S_i > threshold. Because the d_i
telescope, S_n is the largest drop from an earlier eval to the latest one, in units of `scale`,
less `drift` per eval step: a lasting decline accumulates, one noisy dip does not.

Units: `drift` and `threshold` are in units of `scale`, the standard deviation of one eval
difference, so the test is invariant to the metric's units and offset. By default the scale is
sqrt 2 times the per-eval noise estimate of `PooledNoise` (learnt from finished jobs, topped up
with the job's own first evals while fewer than 8 second differences are pooled; see
`noise_estimate`); it is fixed along a job while the pool is unchanged, so a live run keeps the
statistic across evals (`HistoryWindow.fold`): O(1) per eval. Pass `sigma` (score units, per
eval) to fix it instead: that one parameter is in the metric's units.
Until the estimate exists the detector does not stop.
Defaults (drift 0, threshold 3): a job stops once its latest eval sits 3 difference-sds below an
earlier one; with only ~7 evals per job a positive drift costs more recall than it saves.
Name: `CUSUM-<drift>-<threshold>[-<sigma>]`, e.g. `CUSUM-0-3` or `CUSUM-0.5-4-0.05`.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, FoldableHistory, SchedulerJobView

from .detector import stop
from .noise_estimate import NoiseScaledDetector
from .registry import register_detector


def cusum_down(scores: Sequence[float], scale: float, drift: float) -> float:
    """The downward CUSUM statistic after the last score.

    A history that can `fold` (a live run's, see `evalstop_gym.online`) keeps the statistic
    between evals while the scale stays the same (a fixed sigma), so each eval is added once."""
    if isinstance(scores, FoldableHistory):
        def step(state: tuple[float, float | None], x: float) -> tuple[float, float | None]:
            s, prev = state
            return (s if prev is None else max(0.0, s - (x - prev) / scale - drift)), x
        return scores.fold("CUSUM.down", (float(scale), drift), step, (0.0, None))[0]
    s = 0.0
    for d in np.diff(np.asarray(scores, dtype=float)):
        s = max(0.0, s - d / scale - drift)
    return s


class CUSUM(NoiseScaledDetector):
    """CUSUM: a one-sided cumulative-sum test for a sustained fall in a job's evals.

    Stops when the largest drop from an earlier eval to the latest, in units of the noise of an
    eval difference and less `drift` per eval, exceeds `threshold`: a lasting decline
    accumulates, one noisy dip does not. The noise is `sigma` when given, else pooled from
    finished jobs (`PooledNoise`); until that estimate exists it never stops. It assumes
    independent noise of one shared scale: a job noisier than the pool is stopped too readily.
    Needs the evals (and ended runs, without `sigma`). Name: `CUSUM-<drift>-<threshold>[-<sigma>]`.
    """

    def __init__(self, drift: float = 0.0, threshold: float = 3.0,
                 sigma: float | None = None) -> None:
        if not drift >= 0 or not threshold > 0 or (sigma is not None and not sigma > 0):
            raise ValueError(f"CUSUM: need drift >= 0, threshold > 0, sigma > 0; got "
                             f"{drift}, {threshold}, {sigma}")
        super().__init__()
        self.drift, self.threshold, self.sigma = drift, threshold, sigma
        self.name = f"CUSUM-{drift:g}-{threshold:g}" + (f"-{sigma:g}" if sigma else "")

    def scale(self, scores: Sequence[float]) -> float | None:
        sigma = self.noise_sigma(scores)
        return None if sigma is None else sigma * np.sqrt(2.0)

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        scale = self.scale(job.eval_scores)
        if scale is None or len(job.eval_scores) < 2:
            return CONTINUE
        stat = cusum_down(job.eval_scores, scale, self.drift)
        if stat > self.threshold:
            return stop(f"downward CUSUM {stat:.2f} > {self.threshold:g} difference-sds")
        return CONTINUE


def _factory(args: list[str]) -> CUSUM:
    nums = [float(a) for a in args]
    return CUSUM(*nums[:3]) if nums else CUSUM()


register_detector("CUSUM", _factory)
