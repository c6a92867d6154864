"""PeerPrior-<alpha>: stop a run whose curve looks like the group's declining runs, not its healthy.

What it learns, and from what. Every ended run of the group (the simulator's ended jobs, a
`MonitorGroup`, `replay --group-by`, as MedianPruner learns) is labelled in hindsight from its
own curve alone, by a documented rule: declining if its last fifth (at least two evals) averages
more than `LABEL_Z` noise standard errors below its best three-eval moving average
(`hindsight_label`), or if TrendTest-<alpha>, replayed over its evals, finds a sustained decline
since its best at some look (`trend_would_stop`: a run the stop rule's own first part would stop
is no healthy example for calibrating its second); else healthy. No hidden label is read: a
job's view carries none. The run's curve, smoothed by a three-eval moving average, joins its
label's library of shapes (per job type). A run that ended with its whole curve (last eval at
progress 1) joins either; a run cut short (by this detector, a scheduler, a user) joins only
when its curve so far already declines by the same rule, and is read as flat past its last
eval: what it did after a stop is unknown, and a library of completed runs alone would hold
only the declines that were missed.

The test. For a running job with evals s_1..s_n at progress p_1..p_n, each shape t of a library
is read at those progresses and fitted as a + b t(p) (least squares, b >= 0: any level, any
positive gain, so the metric's units and offset do not matter); its likelihood is Gaussian with
the job's noise (TrendTest's estimate, shrunk toward the group's, and its AR(1) rho_hat, by
which residuals are prewhitened), widened for the shape's own smoothed noise. A label's
likelihood is the mean over its shapes. The job is stopped when TrendTest-<alpha> would stop it,
or when two things hold at one look: its own evals show a decline since their best (TrendTest's
per-look p-value below alpha, not yet corrected for the looks: the gate), and the log ratio
declining : healthy passes the threshold: the peers can only add to TrendTest's recall. The gate
is what makes this a detector, not a forecast: a run at or near its best is never stopped
however much its rise resembles the declining peers' (their rise is often the steeper one), so a
healthy run is stopped only for a fall it shows itself.

The threshold, and its guarantee. Conformal: the k-th largest (k = floor(alpha (m + 1))) of the
m hindsight-healthy peers' own largest gated log ratios over their whole lives (each replayed
against the library without its own shape; a peer the gate never opens for scores -inf, one
TrendTest stops +inf: a peer labelled healthy under an older noise prior; scoring it by its
ratios before that stop instead, which the ratio's own budget would allow, gained E2 a little
recall but took its AR(1) false stops past the 5% bar at native density), and never below 0 (a
run the peers find likelier healthy is not stopped).
A new healthy run exchangeable with the healthy peers passes it, at any look, with probability
at most alpha, and as those peers are the runs TrendTest lets go (the label's second reading),
the whole rule's false stops are TrendTest's (at most alpha on flat curves, far fewer on rising
ones) plus at most alpha among the runs it lets go: the look count is in the score, not in a
union bound. There is no guarantee without enough healthy peers for k >= 1 (m >= 1 / alpha - 1)
and `MIN_PEERS` shapes of each label, so until then (and for job types with none) it is
TrendTest-<alpha>, whose budget needs no peers; a likelihood-ratio bound such as Ville's log(1 /
alpha) is not used: with a, b fitted per shape and the noise estimated the ratio is no
martingale. The guarantee holds as far as the hindsight-healthy peers represent the healthy
runs: a healthy run unlike every healthy peer (a new shape, a new density) can look declining
once it falls, and a declining run labelled healthy only raises the threshold. The hindsight
label widens its noise for AR(1) (rho_hat, on runs of FINE_EVALS evals or more: on coarser ones
curvature passes for autocorrelation).

Cost. A finished run of n evals is replayed look by look twice: for its label (TrendTest's
reading, `trend_replay`: folded statistics, O(WINDOW) per look) and, if healthy, for the
threshold (the shape fits from running sums, `shape_fit.PrefixFit`: O(shapes) per look), so it
costs O(n) per library shape, not the O(n^2) of reading every prefix afresh; the threshold is
recomputed as the healthy library grows 10%, so each finished run's share stays O(n) per shape.
Name: `PeerPrior-<alpha>`, e.g. `PeerPrior-0.05`.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import ROUNDING
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import stop
from .registry import register_detector
from .shape_fit import PrefixFit
from .trend_test import (
    MIN_RHO_PAIRS,
    Evidence,
    Floats,
    Peers,
    TrendTest,
    lag_moments,
    rho_from_lags,
    trend_replay,
)

MIN_PEERS = 5       # shapes of each label before the likelihood ratio decides
LABEL_Z = 3.0       # hindsight: the final level this many standard errors below the best
FINE_EVALS = 20     # runs with fewer evals are labelled without the AR(1) widening
READ_MEMO = 64      # eval schedules whose reading of the shapes a library keeps


def smooth(scores: np.ndarray) -> np.ndarray:
    """A three-eval moving average (the ends average two), which thins a shape's noise ~3x."""
    if len(scores) < 3:
        return scores.copy()
    padded = np.concatenate([scores[:1], scores, scores[-1:]])
    inner = (padded[:-2] + padded[1:-1] + padded[2:]) / 3.0
    inner[0], inner[-1] = (scores[0] + scores[1]) / 2.0, (scores[-2] + scores[-1]) / 2.0
    return inner


def hindsight_label(scores: Floats, sigma: float) -> bool:
    """True (declining) when the mean of the last fifth of the evals (at least 2) lies more than
    LABEL_Z standard errors below the best three-eval moving average of the earlier ones."""
    s = np.asarray(scores, dtype=float)
    w = max(2, len(s) // 5)
    if len(s) < w + 3 or not sigma > 0:
        return False
    best = float(np.max(np.convolve(s[:-w], np.ones(3) / 3.0, mode="valid")))
    return best - float(s[-w:].mean()) > LABEL_Z * sigma * math.sqrt(1.0 / 3.0 + 1.0 / w)


class Library:
    """The smoothed shapes of one job type's finished runs, by hindsight label (and the healthy
    runs' own evals, which calibrate the threshold)."""

    def __init__(self) -> None:
        self.shapes: dict[bool, list[tuple[np.ndarray, np.ndarray]]] = {True: [], False: []}
        self.healthy_runs: list[tuple[np.ndarray, np.ndarray]] = []
        self._read: dict[tuple[bool, bytes], np.ndarray] = {}
        self.threshold: tuple[int, float] | None = None   # (healthy runs it was read from, it)

    def add(self, progress: np.ndarray, scores: np.ndarray, declining: bool) -> None:
        self.shapes[declining].append((progress, smooth(scores)))
        if not declining:
            self.healthy_runs.append((progress, scores))
        self._read.clear()

    def ready(self, alpha: float) -> bool:
        """Shapes of both labels, and enough healthy runs for a conformal threshold at alpha."""
        return (all(len(v) >= MIN_PEERS for v in self.shapes.values())
                and math.floor(alpha * (len(self.healthy_runs) + 1)) >= 1)

    def fits(self, progress: np.ndarray, scores: np.ndarray) -> tuple[PrefixFit, PrefixFit]:
        """The running fits of `scores` to the declining and the healthy shapes: the log ratio
        at any prefix of the run then costs O(shapes)."""
        return (PrefixFit(self.read(True, progress), scores),
                PrefixFit(self.read(False, progress), scores))

    def log_ratio(self, progress: np.ndarray, scores: np.ndarray, ev: Evidence) -> float:
        """log LR declining : healthy of `scores`."""
        return ratio_at(self.fits(progress, scores), len(scores), ev)

    def read(self, declining: bool, progress: np.ndarray) -> np.ndarray:
        """Every shape of a label at `progress` (shapes x evals), memoised per eval schedule
        (runs of one eval interval share one; the last READ_MEMO schedules are kept)."""
        key = (declining, progress.tobytes())
        if key not in self._read:
            if len(self._read) >= READ_MEMO:
                del self._read[next(iter(self._read))]
            self._read[key] = np.array([np.interp(progress, p, s)
                                        for p, s in self.shapes[declining]])
        return self._read[key]


def ratio_at(fits: tuple[PrefixFit, PrefixFit], n: int, ev: Evidence,
             leave_out: int | None = None) -> float:
    """log LR declining : healthy of the first n evals under the noise of `ev` (the healthy
    shape `leave_out` left out)."""
    sigma = marginal_sigma(ev.sigma, ev.rho)
    decl = fits[0].log_likelihoods(n, sigma, ev.rho)
    healthy = fits[1].log_likelihoods(n, sigma, ev.rho)
    if leave_out is not None:
        healthy = np.delete(healthy, leave_out)
    return log_mean_exp(decl) - log_mean_exp(healthy)


def marginal_sigma(sigma_d2: float, rho: float) -> float:
    """The noise sd when second differences (which see 6 - 8 rho + 2 rho^2 of 6) gave sigma_d2."""
    return sigma_d2 * math.sqrt(6.0 / (6.0 - 8.0 * rho + 2.0 * rho**2))


def log_mean_exp(ll: np.ndarray) -> float:
    return float(logsumexp(ll) - math.log(len(ll)))


class PeerPrior(TrendTest):
    """PeerPrior: stop a run whose curve looks like its group's declining runs rather than its
    healthy ones, the finished runs labelled in hindsight from their own curves (never a hidden
    label); TrendTest until it has peers of both kinds. The module docstring gives the model, the
    conformal threshold and where its guarantee ends. Needs the evals, progress and ended runs.
    Name: `PeerPrior-<alpha>`.
    """

    needs = ("evals", "progress", "runs")

    def __init__(self, alpha: float = 0.05) -> None:
        if not 0.0 < alpha < 1.0:
            raise ValueError(f"PeerPrior: alpha must be in (0, 1), got {alpha}")
        super().__init__(alpha)
        self.name = f"PeerPrior-{alpha:g}"
        self.libraries: dict[str, Library] = {}

    def log_ratio(self, job: SchedulerJobView) -> float | None:
        """log LR declining : healthy after the job's latest eval; None while it falls back."""
        lib = self.libraries.get(job.job_type)
        ev = self.evidence(job)
        if lib is None or not lib.ready(self.alpha) or ev is None:
            return None
        return lib.log_ratio(np.asarray(job.eval_progress, dtype=float),
                             np.asarray(job.eval_scores, dtype=float), ev)

    def threshold_for(self, job_type: str) -> float:
        """The conformal log-ratio threshold: the k-th largest, k = floor(alpha (m + 1)), of the m
        healthy peers' largest gated log ratios (each replayed against the library without its
        own shape), at least 0. Recomputed as the healthy library grows 10%."""
        lib = self.libraries[job_type]
        m = len(lib.healthy_runs)
        if lib.threshold is None or m >= 1.1 * lib.threshold[0]:
            k = math.floor(self.alpha * (m + 1))
            peaks = sorted((self.replayed_peak(lib, job_type, i) for i in range(m)), reverse=True)
            lib.threshold = (m, max(0.0, peaks[k - 1]))
        return lib.threshold[1]

    def replayed_peak(self, lib: Library, job_type: str, i: int) -> float:
        """Healthy peer i's largest log ratio over the looks where the gate opens (its own evals
        show a decline at level alpha), its own shape left out; -inf if the gate never opens,
        +inf if TrendTest alone stops it (the stop rule is TrendTest's or the ratio's)."""
        progress, scores = lib.healthy_runs[i]
        fits = None
        peak = -math.inf
        for n, ev in trend_replay(scores, progress, self.alpha, self.peers.get(job_type)):
            if ev is not None and ev.p < ev.threshold:
                return math.inf
            if ev is not None and ev.p < self.alpha:
                fits = fits or lib.fits(progress, scores)   # read once, at the whole schedule
                peak = max(peak, ratio_at(fits, n, ev, leave_out=i))
        return peak

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        lib = self.libraries.get(job.job_type)
        if lib is None or not lib.ready(self.alpha):
            return super()._decide(job, cluster)
        ev = self.evidence(job)
        if ev is None or not ev.p < self.alpha:       # the gate: no fall of its own, no stop
            return CONTINUE
        if ev.p < ev.threshold:
            return super()._decide(job, cluster)      # TrendTest's own evidence suffices
        ratio = lib.log_ratio(np.asarray(job.eval_progress, dtype=float),
                              np.asarray(job.eval_scores, dtype=float), ev)
        bound = self.threshold_for(job.job_type)
        if ratio > bound:
            return stop(f"a decline of its own (p {ev.p:.2g}) on a curve like the group's "
                        f"declining runs: log likelihood ratio {ratio:.3g} past {bound:.3g} "
                        f"(alpha={self.alpha:g})")
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        super().on_job_end(job)
        progress = np.asarray(job.eval_progress, dtype=float)
        if job.job_type not in self.types or len(progress) < 4:
            return
        scores = np.asarray(job.eval_scores, dtype=float)
        declining = (hindsight_label(scores, self.group_sigma(job.job_type, scores))
                     or self.trend_would_stop(job.job_type, progress, scores))
        if declining or progress[-1] >= 1.0 - ROUNDING:   # a cut-short run: only a decline it shows
            self.libraries.setdefault(job.job_type, Library()).add(progress, scores, declining)

    def trend_would_stop(self, job_type: str, progress: np.ndarray, scores: np.ndarray) -> bool:
        """Whether TrendTest-<alpha>, replayed over the run's evals, finds a sustained decline
        since its best at some look (the hindsight label's second reading)."""
        return any(ev is not None and ev.p < ev.threshold
                   for _, ev in trend_replay(scores, progress, self.alpha,
                                             self.peers.get(job_type)))

    def group_sigma(self, job_type: str, scores: np.ndarray) -> float:
        """The noise of a block mean's eval, for the hindsight label: the group's (the peers'
        pooled mean square) once known, else the run's own; under AR(1) (rho_hat from the pooled
        lag moments, as TrendTest, on runs of FINE_EVALS evals or more) widened by what second
        differences miss and what a block mean keeps,
        sqrt(6 / (6 - 8 rho + 2 rho^2) (1 + rho) / (1 - rho)).
        """
        peers = self.peers.get(job_type, Peers())
        s0, d0 = peers.prior()
        d = np.diff(scores, n=2)
        sigma = math.sqrt(s0) if d0 else (float(np.sqrt(d @ d / (6.0 * len(d)))) if len(d)
                                          else 0.0)
        lags = peers.lags + lag_moments(scores)
        fine = len(scores) >= FINE_EVALS     # coarser, curvature passes for autocorrelation
        rho = rho_from_lags(*lags[:3]) if fine and lags[3] >= MIN_RHO_PAIRS else 0.0
        return marginal_sigma(sigma, rho) * math.sqrt((1 + rho) / (1 - rho))

    def reset(self) -> None:
        super().reset()
        self.libraries.clear()


def _factory(args: list[str]) -> PeerPrior:
    return PeerPrior(float(args[0]) if args else 0.05)


register_detector("PeerPrior", _factory)
