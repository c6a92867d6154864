"""MaterialDecline-<alpha>: stop a run whose eval has fallen, materially and out of its noise.

A person calls a run declining when its metric has left its best for good, by an amount that
matters against what the run gained. The rule asks exactly that, at every eval, with the run's
best so far at eval b, the gain G (best minus the lowest eval before it) and the drop D (best
minus the mean of the last `LEVEL_EVALS` evals after b):
- sustained: at least `MIN_AFTER` evals since the best;
- material: D >= `SHARE` x G (a tenth of what the run had gained), and the latest eval below
  the best by at least as much;
- out of noise: TrendTest's decline test (`trend_test`) at alpha, whose threshold is simulated
  so that a flat run with i.i.d. noise is stopped with probability at most alpha over its life.

The noise model is TrendTest's with three changes for real curves:
- The noise is read after the best. TrendTest's sigma_hat comes from the second differences of
  the whole run, where a real run's climb (a few evals of large curvature) and the bend where a
  fall begins count as noise and can triple it. Here it comes from the second differences of
  the evals after the best only (`trend_null.segment_noise`), shrunk toward like peers' as
  TrendTest shrinks, and the threshold is simulated for that estimate (`noise="segment"`), so
  the budget is as exact as TrendTest's. The price: a lone run needs four evals after its best
  (two second differences) before it can be stopped, so at evals every 15% of a run whose
  best comes at a third, a lone run's decline is seen late or not at all.
- Curvature is not autocorrelation. TrendTest reads AR(1) rho from the lag moments of second
  differences; under stationary AR(1) noise their lag-1 correlation lies in [-2/3, -1/2]
  whatever rho, so where the run's (with its like peers') correlate above -1/2 by more than
  `SMOOTH_Z` standard errors (`is_smooth`), the curve is smooth: its second differences are
  curvature, not noise, and rho is unidentified and taken as 0. On such runs TrendTest's rho
  reaches its 0.95 clip and its widened test can never stop.
- Rho only where it can be seen. The lag ratio TrendTest reads rho from is -1 under i.i.d. noise
  and -0.59 at rho 0.5, and its sd is `LAG_RATIO_SD` / sqrt(triples) (simulated); a lone run of
  100 evals reads it to +-0.37, so its rho_hat swings between 0 and the 0.95 clip from one eval
  to the next and the widened test misses plain declines. Rho is read only once the triples (the
  run's and its like peers') tell rho 0.5 from i.i.d. at two standard errors (`RHO_PAIRS`,
  `rho_identified`): in a group of like runs, as the simulator's AR(1) jobs are. A lone run's
  noise is taken as independent: under autocorrelated noise its false stops can exceed alpha,
  and only the materiality rule stands between a wander and a stop (on the public runs' healthy
  half, whose noise is mostly a slow drift, no more were stopped than with rho read).
- Only like peers. Ended runs of the group lend their noise prior and rho only when they are of
  the run's kind (job type), their noise sd is within `LIKE_FACTOR` of the run's own, and their
  range of scores holds the run's latest level (the same metric on the same scale); the reason
  says how many were used. A run among unlike runs is judged as if alone.

The guarantee. A healthy run is stopped only on a significant decline (TrendTest's budget) that
is also a tenth of its gain: noise alone cannot do the second on a run that gained much more
than its noise, and a smooth drift cannot do the first on any run that keeps its gain.
Where it breaks: a run that gains little against its noise leans on the test alone (TrendTest's
assumptions hold there: roughly Gaussian noise, AR(1) correlation seen only with 20 or more
second-difference triples); a decline smaller than a tenth of the gain is never stopped.
Name: `MaterialDecline-<alpha>`, e.g. `MaterialDecline-0.05`.
"""

from __future__ import annotations

import math

import numpy as np

from evalstop_gym.sim.fall import LEVEL_EVALS, Fall, fall_since_best
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, stop
from .registry import register_detector
from .trend_test import LAG_RATIO, RHO_GRID, Evidence, Floats, Peers, lag_moments, trend_evidence

SHARE = 0.10          # material: a tenth of what the run gained by its best
MIN_AFTER = 2         # sustained: evals since the best
SMOOTH_Z = 3.0        # standard errors above -1/2 at which second differences are curvature
NOISE = "segment"     # where sigma_hat comes from (`trend_null.NOISE_SOURCES`)
LIKE_FACTOR = 4.0     # peers whose noise sd is within this factor of the run's lend their noise
LAG_RATIO_SD = 3.7    # the lag ratio's sd x sqrt(triples), i.i.d. noise (simulated, 40-256 evals)
RHO_SEEN = 0.5        # the smallest rho the triples must tell from i.i.d. noise (two sds)
RHO_PAIRS = math.ceil((2.0 * LAG_RATIO_SD
                       / (float(np.interp(RHO_SEEN, RHO_GRID, LAG_RATIO)) - LAG_RATIO[0])) ** 2)


def is_material(fall: Fall) -> bool:
    """Sustained and a tenth of the gain (a run with no gain yet: any sustained fall)."""
    need = SHARE * fall.gain
    return fall.after >= MIN_AFTER and fall.drop > 0 and fall.drop >= need \
        and fall.latest_drop >= need


def own_noise(scores: Floats) -> float:
    """The run's noise sd from its second differences (NaN where unseen)."""
    d = np.diff(np.asarray(scores, dtype=float), 2)
    if len(d) < 2 or not d @ d > 0:
        return math.nan
    return math.sqrt(float(d @ d) / (6.0 * len(d)))


def rho_identified(lags: np.ndarray) -> bool:
    """Whether the triples are enough to tell rho `RHO_SEEN` from i.i.d. noise (`RHO_PAIRS`)."""
    return bool(lags[3] >= RHO_PAIRS)


def is_smooth(lags: np.ndarray) -> bool:
    """Whether second differences correlate with their successors above what any stationary
    AR(1) noise gives (-1/2), by more than `SMOOTH_Z` standard errors (about 1.4 / sqrt(count)
    for a lag-1 correlation of second differences): they are then a smooth curve's curvature."""
    l0, l1, _, count = lags
    if count < 3 or not l0 > 0:
        return False
    return l1 / l0 > -0.5 + SMOOTH_Z * 1.4 / math.sqrt(count)


class LikePeers:
    """Ended runs of one kind: each one's noise sd, its range of scores and its scores, for
    `Peers` of the runs like a given one."""

    def __init__(self) -> None:
        self.runs: list[tuple[float, float, float, np.ndarray]] = []
        self._cache: dict[tuple[int, ...], Peers] = {}

    def add(self, scores: Floats) -> None:
        s = np.asarray(scores, dtype=float)
        sigma = own_noise(s)
        if math.isfinite(sigma):
            self.runs.append((sigma, float(s.min()), float(s.max()), s))
            self._cache.clear()   # choices made before this run ended are stale

    def like(self, sigma: float, level: float) -> tuple[Peers | None, int]:
        """The peers like a run whose noise sd is `sigma` and whose latest scores sit at
        `level`: noise sd within LIKE_FACTOR of it, and a range of scores that holds the level
        (the same metric on the same scale). Their `Peers`, and how many."""
        if not self.runs or not math.isfinite(sigma) or sigma <= 0:
            return None, 0
        chosen = tuple(i for i, (s, lo, hi, _) in enumerate(self.runs)
                       if sigma / LIKE_FACTOR <= s <= sigma * LIKE_FACTOR and lo <= level <= hi)
        if not chosen:
            return None, 0
        if chosen not in self._cache:
            peers = Peers()
            for i in chosen:
                peers.add(self.runs[i][3])
            self._cache[chosen] = peers
        return self._cache[chosen], len(chosen)


class MaterialDecline(DetectorBase):
    """MaterialDecline: stop on a sustained fall from the best that is a tenth of the run's gain
    and significant by TrendTest's test, rho read only where the curve is not smooth, noise
    borrowed only from like peers (the module docstring gives the rule and its guarantee).
    Name: `MaterialDecline-<alpha>`.
    """

    needs: tuple[str, ...] = ("evals", "runs")

    def __init__(self, alpha: float = 0.05) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"MaterialDecline: alpha must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self.name = f"MaterialDecline-{alpha:g}"
        self.peers: dict[str, LikePeers] = {}

    def evidence(self, job: SchedulerJobView) -> tuple[Evidence | None, int]:
        """TrendTest's evidence with this rule's noise model, and the like peers it used."""
        scores = job.eval_scores
        sigma = own_noise(scores)
        group = self.peers.get(job.job_type)
        level = float(np.median(np.asarray(scores[-LEVEL_EVALS:], dtype=float)))
        peers, used = group.like(sigma, level) if group is not None else (None, 0)
        lags = lag_moments(scores) + (peers.lags if peers is not None else 0.0)
        ev = trend_evidence(scores, job.eval_progress, self.alpha, peers,
                            rho_allowed=rho_identified(lags) and not is_smooth(lags),
                            noise=NOISE)
        return ev, used

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        fall = fall_since_best(job.eval_scores)
        if not is_material(fall):
            return CONTINUE
        ev, used = self.evidence(job)
        if ev is None or not ev.p < ev.threshold:
            return CONTINUE
        share = f", {fall.drop / fall.gain:.0%} of what it had gained" if fall.gain > 0 else ""
        peers = f"; noise also read from {used} like ended runs" if used else ""
        return stop(f"the eval has fallen below its best (eval {fall.best_at + 1}) over the "
                    f"{fall.after} evals since{share}, {fall.drop / ev.sigma:.1f} times its "
                    f"eval-to-eval noise; a fall this sustained stops fewer than "
                    f"{self.alpha:.0%} of healthy runs{peers}")

    def on_job_end(self, job: SchedulerJobView) -> None:
        if job.job_type in self.types and len(job.eval_scores) >= 4:
            self.peers.setdefault(job.job_type, LikePeers()).add(job.eval_scores)

    def reset(self) -> None:
        self.peers.clear()


def _factory(args: list[str]) -> MaterialDecline:
    return MaterialDecline(float(args[0]) if args else 0.05)


register_detector("MaterialDecline", _factory, "MaterialDecline-ALPHA: ALPHA in (0, 1)")
