"""TrendTest-<alpha>: stop a run on a sustained decline since its best, with an exact budget.

The statistic. After n evals s_1..s_n the segment runs from the best eval so far (the first
argmax; at most the last `WINDOW` evals) to the latest. Its least-squares slope over the eval
index is taken with each one of its evals in turn pulled to within CLIP sigma_hat of the line
through the others, and the least declining of those slopes is kept, in units of its standard
error sigma_hat / sqrt(Sxx): a decline must hold with any single eval tamed, so one outlier (a
high best, a low latest) never decides alone.
The t is turned into a per-look p-value p_n with Student's t at the noise estimate's degrees of
freedom (that only balances looks of different df; the guarantee comes from the threshold).

The threshold, by simulation (`trend_null`). Under the null (a flat true curve, i.i.d.
Gaussian noise) the whole procedure, noise estimate included, is simulated (a fixed seed, one
simulation per prior df, extended look by look as far as asked and memoised), and the stop
threshold q is the largest whose simulated probability that min_n p_n < q, plus 1.5 Monte Carlo
standard errors, stays within alpha. A run is stopped at the first look with p_n < q, so a run
whose true curve is flat is stopped with probability at most alpha over its whole life: exactly
calibrated to `EXACT_LOOKS` (256) looks, and past them by a union bound over blocks of 128 looks,
each charged the simulated rate of looks 129..256 (the simulation, its memory and a threshold's
cost stop growing there; `trend_null` says why later blocks are no busier). A rising or
plateauing curve only moves the best earlier and the latest evals up, which lowers the evidence
(the property tests check flat and plateau curves at 5..2000 looks).
H is the run's number of evals, read off progress (the largest i / p_i so far, rounded up to a
grid, so a guess too high only makes the test stricter); without usable progress, looks 1..8,
9..16, 17..32, ... spend alpha/2, alpha/4, ... of the budget, each at the threshold of its
epoch's last look.

The noise. sigma_hat^2 is the run's own mean square of second differences over 6 (second
differences cancel a locally linear trend), with Satterthwaite's degrees of freedom, shrunk
toward a prior as limma does: (d0 s0^2 + nu s^2) / (d0 + nu). The prior comes from the group's
ended runs of the same type (`on_job_end`: the simulator's ended jobs, a `MonitorGroup`,
`replay --group-by`): s0^2 their pooled mean square, d0 fitted to how much their variances
differ (runs whose noise differs, as real runs' does, give a weak prior), rounded down to
`PRIOR_DF_BINS` (at most 256, so the run's own evals always count). The default without
peers is d0 = 0: the run's own estimate alone. Every quantity is a ratio of score differences,
so the test is invariant to the metric's units and offset.

Assumptions and where it breaks. Eval noise roughly Gaussian and, as calibrated, independent.
Positively autocorrelated noise (AR(1), a drifting eval set) makes second differences
underestimate the noise and a slope's error larger than i.i.d. theory says; the test estimates
rho from the lag-1 and lag-2 moments of second differences (the run's own and its peers',
pooled, once `MIN_RHO_PAIRS` triples exist; a form that cancels a smooth curve's curvature)
and widens the standard error by the exact AR(1) factor for the segment: it estimates rho and
widens, it does not recalibrate, so under AR(1) the budget holds only approximately. With few
evals and no peers rho cannot be seen and false stops exceed alpha under AR(1); curvature
near a peak and outliers only inflate sigma_hat and rho_hat, which makes the test more
cautious. Safe at any density from 4 evals on.
Name: `TrendTest-<alpha>`, e.g. `TrendTest-0.05`.
"""

from __future__ import annotations

import math
from collections.abc import Iterator, Sequence
from typing import NamedTuple

import numpy as np
from scipy.optimize import brentq
from scipy.special import polygamma, stdtr

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, FoldableHistory, SchedulerJobView

from .detector import DetectorBase, stop
from .registry import register_detector
from .trend_null import (
    MIN_EVALS,
    WINDOW,
    loo_trend_t,
    satterthwaite_df,
    segment,
    segment_t,
    threshold,
)

Floats = Sequence[float] | np.ndarray   # an eval history: a view's tuple or an array

PRIOR_DF_BINS = (0, 16, 64, 256)
MIN_RHO_PAIRS = 20
MIN_PEER_RUNS = 3        # runs before the group's noise is a prior


def ar1_factor(rho: float, length: int) -> float:
    """How much wider a segment slope's t gets under AR(1) noise: its true variance over the
    i.i.d. one, times what second differences miss of the noise (6 / (6 - 8 rho + 2 rho^2))."""
    if rho <= 0.0 or length < 2:
        return 1.0
    x = np.arange(length) - (length - 1) / 2.0
    gamma = rho ** np.abs(np.subtract.outer(np.arange(length), np.arange(length)))
    return float(math.sqrt((x @ gamma @ x) / (x @ x) * 6.0 / (6.0 - 8.0 * rho + 2.0 * rho**2)))


def lag_ratio_table() -> tuple[np.ndarray, np.ndarray]:
    """(r(rho), rho) on a grid of rho in [0, 0.95]: (m1 - m2) / (m0 - m2) from the lag-0, 1, 2
    moments of second differences of unit AR(1) noise (built once: every look reads it)."""
    g = np.linspace(0.0, 0.95, 96)
    m0, m1, m2 = 6.0 - 8.0 * g + 2.0 * g**2, -4.0 + 7.0 * g - 4.0 * g**2 + g**3, (1.0 - g) ** 4
    return (m1 - m2) / (m0 - m2), g


LAG_RATIO, RHO_GRID = lag_ratio_table()


def rho_from_lags(var: float, cov1: float, cov2: float) -> float:
    """AR(1) rho from the lag-0, 1, 2 moments of second differences, clipped to [0, 0.95].

    A smooth curve adds about the same c_i^2 to all three, so (cov1 - cov2) / (var - cov2)
    cancels curvature to first order; it is -1 under i.i.d. noise, about -0.59 at rho 0.5."""
    if not var - cov2 > 0:
        return 0.0
    r = (cov1 - cov2) / (var - cov2)
    return float(np.interp(r, LAG_RATIO, RHO_GRID)) if r > -1.0 else 0.0


def lag_moments(scores: Floats) -> np.ndarray:
    """Sums of d_i^2, d_i d_(i+1), d_i d_(i+2) over the second differences d, and their count."""
    d = np.diff(np.asarray(scores, dtype=float), n=2)
    if len(d) < 3:
        return np.zeros(4)
    h = d[:-2]
    return np.array([h @ h, h @ d[1:-1], h @ d[2:], len(h)])


class Peers:
    """What ended runs of one type say about the noise: each run's mean-square noise estimate
    and its df (limma's inputs), their second differences, and the lag moments behind rho_hat."""

    def __init__(self) -> None:
        self.d2: list[float] = []
        self.runs: list[tuple[float, float]] = []
        self.lags = np.zeros(4)
        self._prior: tuple[float, int] | None = None

    def add(self, scores: Floats) -> None:
        d = np.diff(np.asarray(scores, dtype=float), n=2)
        self.d2.extend(d.tolist())
        if len(d) >= 2 and d @ d > 0:
            self.runs.append((float(d @ d) / (6.0 * len(d)), satterthwaite_df(len(d))))
        self.lags += lag_moments(scores)
        self._prior = None

    def prior(self) -> tuple[float, int]:
        """(s0^2, d0) as limma fits them: s0^2 the df-weighted mean of the runs' variances, d0
        from how much more their logs spread than sampling alone would (trigamma(d0 / 2) = the
        excess), at most their summed df, rounded down to a bin; (0, 0) below MIN_PEER_RUNS."""
        if self._prior is None:
            self._prior = (0.0, 0)
            if len(self.runs) >= MIN_PEER_RUNS:
                v, nu = np.array(self.runs).T
                excess = float(np.var(np.log(v), ddof=1) - np.mean(polygamma(1, nu / 2.0)))
                d0 = nu.sum() if excess <= 0 else 2.0 * inverse_trigamma(excess)
                df = max(b for b in PRIOR_DF_BINS if b <= min(d0, nu.sum()))
                self._prior = (float(nu @ v / nu.sum()), df) if df else (0.0, 0)
        return self._prior


def inverse_trigamma(y: float) -> float:
    """x with trigamma(x) = y (trigamma falls from +inf to 0 over x > 0)."""
    return float(brentq(lambda x: float(polygamma(1, x)) - y, 1e-8, 1e8))


class Evidence(NamedTuple):
    """The test at one look: its p-value, the stop threshold, sigma_hat, rho_hat, the horizon."""

    p: float
    threshold: float
    sigma: float
    rho: float
    looks: int


def trend_evidence(scores: Floats, progress: Floats, alpha: float,
                   peers: Peers | None = None, rho_allowed: bool = True,
                   noise: str = "series") -> Evidence | None:
    """The test after the last of `scores`; None before MIN_EVALS or with no noise to see.
    `rho_allowed` False: the noise is taken as independent (rho 0), whatever the lags say.
    `noise`: sigma_hat from the whole series' second differences, or the segment's own
    (`trend_null.NOISE_SOURCES`; the threshold is simulated for the same choice)."""
    n = len(scores)
    if n < MIN_EVALS:
        return None
    tail = np.asarray(scores[max(0, n - WINDOW):], dtype=float)
    return evidence_at(series_stats(scores), tail, n, horizon(progress, n, alpha), peers,
                       rho_allowed, noise)


def trend_replay(scores: Floats, progress: Floats, alpha: float,
                 peers: Peers | None = None) -> Iterator[tuple[int, Evidence | None]]:
    """(n, `trend_evidence` of the first n evals) for n = MIN_EVALS.. len(scores): a finished
    run replayed look by look at O(WINDOW) per look (the series' statistics and the horizon are
    folded as a live run's are), not O(n) per look as fresh reads of each prefix would cost."""
    s = np.asarray(scores, dtype=float)
    p = np.asarray(progress, dtype=float)
    st, hz = SERIES_START, (0, True, 0.0, 0)
    for i in range(len(s)):
        st = series_step(st, float(s[i]))
        n = i + 1
        if i < len(p):
            hz = progress_step(hz, float(p[i]))
        if n < MIN_EVALS:
            continue
        usable = hz[0] == n and hz[1] and hz[2] <= 1.0
        looks = (hz[3], alpha) if usable else epoch_horizon(n, alpha)
        yield n, evidence_at(folded_stats(st), s[max(0, n - WINDOW):n], n, looks, peers)


def evidence_at(stats: SeriesStats, tail: np.ndarray, n: int, looks: tuple[int, float],
                peers: Peers | None, rho_allowed: bool = True,
                noise: str = "series") -> Evidence | None:
    """The test at look n from the series' statistics, its last (up to WINDOW) evals and the
    horizon (looks, alpha to spend)."""
    s0, d0 = peers.prior() if peers is not None else (0.0, 0)
    lags = stats.lags + (peers.lags if peers is not None else 0.0)
    rho = rho_from_lags(*lags[:3]) if rho_allowed and lags[3] >= MIN_RHO_PAIRS else 0.0
    values, valid = segment(tail[None, :], n, np.array([stats.best_at]))
    if noise == "segment":
        ts, dfs, sigmas = segment_t(values, valid, np.array([s0]), d0)
        t, df, sigma = float(ts[0]), float(dfs[0]), float(sigmas[0])
        if not (sigma > 0.0 and math.isfinite(t)):
            return None
    else:
        nu = satterthwaite_df(n - 2)
        var = (d0 * s0 + nu * stats.ssq / (6.0 * (n - 2))) / (d0 + nu)
        if not var > 0.0:
            return None
        sigma, df = math.sqrt(var), d0 + nu
        t = float(loo_trend_t(values, valid, np.array([sigma]))[0])
    t /= ar1_factor(rho, int(valid.sum()))
    p = float(stdtr(df, -t))
    return Evidence(p, threshold(looks[0], d0, looks[1], noise), sigma, rho, looks[0])


class SeriesStats(NamedTuple):
    """What the test reads of a whole eval series: its first argmax, the sum of its squared
    second differences, and their lag moments (`lag_moments`)."""

    best_at: int
    ssq: float
    lags: np.ndarray


SERIES_START = (0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0, 0, -math.inf, 0)


def series_step(state: tuple, x: float) -> tuple:
    """`SeriesStats` folded over one more eval: state (evals, last two evals, last two second
    differences, their sum of squares, the three lag sums and their count, best, its index)."""
    n, x1, x2, e1, e2, ssq, l0, l1, l2, cnt, best, best_at = state
    if n >= 2:
        d = x - 2.0 * x1 + x2
        ssq += d * d
        if n >= 4:                         # the second difference two back has two successors
            l0, l1, l2, cnt = l0 + e2 * e2, l1 + e2 * e1, l2 + e2 * d, cnt + 1
        e1, e2 = d, e1
    if x > best:
        best, best_at = x, n
    return n + 1, x, x1, e1, e2, ssq, l0, l1, l2, cnt, best, best_at


def folded_stats(st: tuple) -> SeriesStats:
    """`SeriesStats` from `series_step`'s state."""
    return SeriesStats(st[11], st[5], np.array([st[6], st[7], st[8], float(st[9])]))


def series_stats(scores: Floats) -> SeriesStats:
    """`SeriesStats` of `scores`: a live run's history (`fold`, see `evalstop_gym.online`) keeps
    them between evals, O(1) time and memory per eval however long the run; any other sequence
    is read whole."""
    if isinstance(scores, FoldableHistory):
        return folded_stats(scores.fold("TrendTest.series", (), series_step, SERIES_START))
    s = np.asarray(scores, dtype=float)
    d = np.diff(s, n=2)
    return SeriesStats(int(np.argmax(s)), float(d @ d), lag_moments(s))


def progress_step(state: tuple[int, bool, float, int], x: float) -> tuple[int, bool, float, int]:
    """The horizon's fold over one more progress: (evals, rising and positive so far, the last
    progress, the most looks i / p_i implies)."""
    i, ok, last, most = state
    ok = ok and x > (last if i else 0.0)
    return i + 1, ok, x, max(most, math.ceil((i + 1) / x - 1e-6)) if ok else most


def horizon(progress: Floats, n: int, alpha: float) -> tuple[int, float]:
    """(looks to calibrate for, alpha to spend): the run's evals from progress when usable
    (positive, rising, at most 1), else the doubling epoch that holds look n, which spends
    alpha / 2^(epoch + 1). A live run's progress is folded: O(1) per eval."""
    if isinstance(progress, FoldableHistory) and len(progress) == n:
        count, ok, last, most = progress.fold("TrendTest.horizon", (), progress_step,
                                              (0, True, 0.0, 0))
        if ok and last <= 1.0:
            return most, alpha
    else:
        p = np.asarray(progress, dtype=float)[:n]
        if len(p) == n and p[-1] <= 1.0 and p[0] > 0.0 and bool(np.all(np.diff(p) > 0)):
            return int(np.max(np.ceil(np.arange(1, n + 1) / p - 1e-6))), alpha
    return epoch_horizon(n, alpha)


def epoch_horizon(n: int, alpha: float) -> tuple[int, float]:
    """Without usable progress: the doubling epoch that holds look n, and its alpha / 2^(e+1)."""
    epoch = max(0, math.ceil(math.log2(n / 8.0)))
    return 8 * 2**epoch, alpha / 2 ** (epoch + 1)


class TrendTest(DetectorBase):
    """TrendTest: stop a run on a sustained decline since its best eval, within a false-alarm
    budget alpha over the run's whole life (the module docstring gives the statistic, the
    simulated threshold, the noise model and where it breaks). Needs the evals; progress sharpens
    the horizon; it borrows its noise prior from ended runs of its group when there are some.
    Name: `TrendTest-<alpha>`.
    """

    # progress sharpens the horizon; without it the budget is spent over epochs (`horizon`)
    needs: tuple[str, ...] = ("evals", "runs")

    def __init__(self, alpha: float = 0.05) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"TrendTest: alpha must be in (0, 1), got {alpha}")
        self.alpha = alpha
        self.name = f"TrendTest-{alpha:g}"
        self.peers: dict[str, Peers] = {}

    def evidence(self, job: SchedulerJobView) -> Evidence | None:
        return trend_evidence(job.eval_scores, job.eval_progress, self.alpha,
                              self.peers.get(job.job_type))

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        ev = self.evidence(job)
        if ev is not None and ev.p < ev.threshold:
            return stop(f"a sustained decline since the best eval, beyond the eval-to-eval "
                        f"noise: a decline this strong stops fewer than {self.alpha:.0%} of "
                        f"healthy runs")
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        if job.job_type in self.types and len(job.eval_scores) >= 3:
            self.peers.setdefault(job.job_type, Peers()).add(job.eval_scores)

    def reset(self) -> None:
        self.peers.clear()


def _factory(args: list[str]) -> TrendTest:
    return TrendTest(float(args[0]) if args else 0.05)


register_detector("TrendTest", _factory)
