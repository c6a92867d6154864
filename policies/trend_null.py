"""TrendTest's statistic and its null calibration, with a cost that stops growing past a cap.

The statistic (`loo_trend_t` over `segment`) is TrendTest's; the module docstring of
`trend_test` says what it measures. This module finds the stop threshold: under the null (a
flat true curve, i.i.d. Gaussian noise) the whole procedure, noise estimate included, is
simulated look by look on PATHS paths, and the threshold for a run of H looks is read from the
distribution of min_{n <= H} p_n.

One simulation per prior df serves every horizon. The statistic at look n reads evals 1..n only,
so the minimum over looks 1..H of a longer path is distributed as that of an H-look path: the
paths are extended as far as asked (to `EXACT_LOOKS` at most), and the sorted prefix minimum is
kept at each grid horizon. A path keeps only what the statistic reads: its last WINDOW evals,
its best eval and the sum of its squared second differences, so memory is PATHS x WINDOW
whatever the horizon, and each look's evals come from a generator seeded by the look, so the
tables do not depend on the order in which horizons were asked for.

Past the cap. For H > EXACT_LOOKS the looks are split into the first EXACT_LOOKS and ceil((H -
EXACT_LOOKS) / BLOCK) blocks of BLOCK looks, and the union bound over them

    P(min_{n <= H} p_n < q) <= P(min_{n <= EXACT_LOOKS} p_n < q) + blocks P(min over a block < q)

is held within alpha, each probability from the simulation at its upper bound 1.5 Monte Carlo
standard errors out (Wilson's, so a rate no path reached is not taken for 0). Every block is
charged the simulated rate of the block (BLOCK, 2 BLOCK]: later ones are quieter, as only two
things change along a null path and both calm it (the best lies inside the last WINDOW evals
ever more rarely, and the noise estimate's df only grow). The cost of a threshold is then
constant past EXACT_LOOKS; the price is the union bound's slack over blocks, small as blocks far
apart are nearly independent, and a threshold of 0 (never stop) once alpha / blocks falls below
what PATHS paths resolve (about 2.8e-4: past some 20,000 looks for alpha 0.05; runs that long
need an alpha spent over epochs of looks, or fewer looks).
"""

from __future__ import annotations

import functools
import math
from collections.abc import Callable

import numpy as np
from scipy.special import stdtr

MIN_EVALS = 4            # two second differences for the noise, a segment of three
MIN_SEGMENT = 3          # a slope with one eval left out needs two
CLIP = 2.5               # how far (in sigma) one eval may pull the trend of the others
WINDOW = 32              # the segment's longest reach back (keeps a look O(WINDOW))
PATHS = 8000             # null paths per calibration
SEED = 20_261_201
BLOCK = 128              # past the exact horizons, the union bound's block of looks
EXACT_LOOKS = 2 * BLOCK  # horizons calibrated exactly; the paths are simulated this far at most
MC_SES = 1.5             # Monte Carlo standard errors kept between the budget and the estimate
# where sigma_hat comes from: the whole run's second differences (TrendTest), or only the
# segment's, from the best on (MaterialDecline: a real run's climb is curvature, not noise)
NOISE_SOURCES = ("series", "segment")


def satterthwaite_df(k: int) -> float:
    """Degrees of freedom of the mean square of k >= 1 second differences of i.i.d. noise (they
    correlate -4/6 at lag 1 and 1/6 at lag 2)."""
    return float(satterthwaite_dfs(np.array([k]))[0])


def satterthwaite_dfs(k: np.ndarray) -> np.ndarray:
    """`satterthwaite_df` per entry of k (0 where k is 0)."""
    k = np.asarray(k, dtype=float)
    den = k + 2.0 * np.maximum(k - 1, 0) * (16.0 / 36.0) \
        + 2.0 * np.maximum(k - 2, 0) * (1.0 / 36.0)
    return np.divide(k * k, den, out=np.zeros_like(k), where=den > 0)


def segment_noise(values: np.ndarray, valid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Per row: the sum of squared second differences of the evals after the segment's first
    (the best), and their count. The climb to the best, and the bend at the best where a fall
    begins, are curvature that a whole-run estimate takes for noise; neither enters here."""
    d = values[:, 2:] - 2.0 * values[:, 1:-1] + values[:, :-2]
    after = np.zeros_like(valid)
    after[:, 1:] = valid[:, :-1]            # valid cells are contiguous up to the right edge
    inside = after[:, :-2]
    return np.where(inside, d * d, 0.0).sum(1), inside.sum(1)


def segment_t(values: np.ndarray, valid: np.ndarray, s0: np.ndarray,
              prior_df: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per row: the decline's t, its df and sigma_hat, with the noise read from the segment's
    own second differences, shrunk toward the prior s0 with prior_df as limma does; t is -inf
    where fewer than two differences are read and there is no prior."""
    ssq, k = segment_noise(values, valid)
    nu = satterthwaite_dfs(k)
    with np.errstate(divide="ignore", invalid="ignore"):
        var = (prior_df * s0 + nu * np.where(k > 0, ssq / (6.0 * np.maximum(k, 1)), 0.0)) \
            / (prior_df + nu)
        sigma = np.sqrt(var)
        t = loo_trend_t(values, valid, np.where(sigma > 0, sigma, np.nan))
    seen = (k >= 2) | (prior_df > 0)
    return np.where(seen & np.isfinite(t), t, -np.inf), prior_df + nu, sigma


def segment_p(values: np.ndarray, valid: np.ndarray, s0: np.ndarray,
              prior_df: int) -> np.ndarray:
    """Per row: `segment_t`'s p-value (Student's t at its df; 1 where nothing is seen)."""
    t, df, _ = segment_t(values, valid, s0, prior_df)
    return stdtr(np.maximum(df, 1e-9), -t)


def horizon_grid(n: int) -> int:
    """`n` rounded up to the calibration grid: exact to 24, then steps of an eighth of a power
    of two (a few tables serve every run)."""
    if n <= 24:
        return max(n, MIN_EVALS)
    step = 2 ** (math.floor(math.log2(n)) - 3)
    return int(math.ceil(n / step) * step)


def loo_trend_t(values: np.ndarray, valid: np.ndarray, sigma: np.ndarray) -> np.ndarray:
    """Per row: the decline's t (-slope sqrt(Sxx) / sigma) with each eval in turn pulled to
    within CLIP sigma of the line through the others, the least of those; rows with fewer than
    MIN_SEGMENT values give -inf. `values` (rows x width) hold each segment right-aligned,
    `valid` marks its cells, `sigma` is each row's noise estimate."""
    w = valid.astype(float)
    x = np.arange(values.shape[1], dtype=float) - values.shape[1]
    y = np.where(valid, values, 0.0)
    s0, sx, sy = w.sum(1, keepdims=True), (w * x).sum(1, keepdims=True), y.sum(1, keepdims=True)
    sxx, sxy = (w * x * x).sum(1, keepdims=True), (y * x).sum(1, keepdims=True)
    n1, sx1, sy1, sxx1, sxy1 = s0 - 1.0, sx - x, sy - y, sxx - x * x, sxy - x * y
    cxx = sxx - sx * sx / s0
    with np.errstate(divide="ignore", invalid="ignore"):
        slope1 = (sxy1 - sx1 * sy1 / n1) / (sxx1 - sx1 * sx1 / n1)
        line = (sy1 - slope1 * sx1) / n1 + slope1 * x     # the others' line at the left-out x
        bound = CLIP * sigma[:, None]
        pulled = line + np.clip(y - line, -bound, bound)
        slope = (sxy1 + x * pulled - sx * (sy1 + pulled) / s0) / cxx
        t = -slope * np.sqrt(cxx) / sigma[:, None]
    t = np.where(valid & np.isfinite(t), t, np.inf).min(1)
    return np.where(s0[:, 0] >= MIN_SEGMENT, t, -np.inf)


def segment(scores: np.ndarray, n: int, start: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Rows' evals start..n-1 (start at most WINDOW back), right-aligned in a WINDOW-wide array;
    `scores` holds evals 0..n-1, or only the last ones (right-aligned, at least WINDOW of them)."""
    width = min(WINDOW, n)
    pos = n - width + np.arange(width)
    valid = pos[None, :] >= np.maximum(start, n - width)[:, None]
    return scores[:, scores.shape[1] - width:], valid


class NullPaths:
    """`paths` runs (sigma 1) with the prior's variance drawn as chi2(d0) / d0, simulated look by
    look as far as asked, to `max_looks` (see the module docstring). The calibration's runs are
    flat; `mean(n)` (each run's true value at look n) lets a check run other healthy curves."""

    def __init__(self, prior_df: int, seed: int = SEED, paths: int = PATHS,
                 max_looks: int = EXACT_LOOKS,
                 mean: Callable[[int], np.ndarray] | None = None,
                 noise: str = "series") -> None:
        if noise not in NOISE_SOURCES:
            raise ValueError(f"noise {noise!r}: expected one of {', '.join(NOISE_SOURCES)}")
        self.noise = noise
        self.prior_df, self.seed, self.paths = prior_df, seed, paths
        self.max_looks, self.mean = max_looks, mean
        rng = np.random.default_rng([seed, prior_df])
        self.s0 = rng.chisquare(prior_df, paths) / prior_df if prior_df else np.zeros(paths)
        self.last = np.zeros((paths, WINDOW))     # the last WINDOW evals, right-aligned
        self.best = np.full(paths, -np.inf)
        self.best_at = np.zeros(paths, dtype=int)
        self.d2 = np.zeros(paths)
        self.min_p = np.ones(paths)
        self.block_min = np.ones(paths)
        self.looks = 0
        self.prefix: dict[int, np.ndarray] = {}   # grid horizon -> sorted min of p over it

    def extend(self, looks: int) -> None:
        """Simulate up to look `looks` (at most `max_looks`)."""
        while self.looks < min(looks, self.max_looks):
            n = self.looks = self.looks + 1
            y = np.random.default_rng([self.seed, self.prior_df, n]).standard_normal(self.paths)
            if self.mean is not None:
                y += self.mean(n)
            if n >= 3:
                self.d2 += (y - 2.0 * self.last[:, -1] + self.last[:, -2]) ** 2
            self.last[:, :-1] = self.last[:, 1:]
            self.last[:, -1] = y
            higher = y > self.best
            self.best = np.where(higher, y, self.best)
            self.best_at = np.where(higher, n - 1, self.best_at)
            if n >= MIN_EVALS:
                d0 = self.prior_df
                values, valid = segment(self.last, n, self.best_at)
                if self.noise == "segment":
                    p = segment_p(values, valid, self.s0, d0)
                else:
                    nu = satterthwaite_df(n - 2)
                    var = (d0 * self.s0 + nu * self.d2 / (6.0 * (n - 2))) / (d0 + nu)
                    p = stdtr(d0 + nu, -loo_trend_t(values, valid, np.sqrt(var)))
                self.min_p = np.minimum(self.min_p, p)
                if n > BLOCK:
                    self.block_min = np.minimum(self.block_min, p)
            if horizon_grid(n) == n:
                self.prefix[n] = np.sort(self.min_p)

    def prefix_min(self, looks: int) -> np.ndarray:
        """Sorted min over looks 1..`looks` of p_n (`looks` a grid horizon <= EXACT_LOOKS)."""
        self.extend(looks)
        return self.prefix[looks]

    def block(self) -> np.ndarray:
        """Sorted min of p_n over the looks BLOCK + 1 .. 2 BLOCK."""
        self.extend(EXACT_LOOKS)
        return np.sort(self.block_min)


@functools.lru_cache(maxsize=8)
def null_paths(prior_df: int, noise: str = "series") -> NullPaths:
    """The null simulation for one prior df and noise source, memoised (a few prior df bins
    serve every run). Call it with both arguments positional, as the callers here do, so one
    cache entry serves them all."""
    return NullPaths(prior_df, noise=noise)


def null_min_p(looks: int, prior_df: int, noise: str = "series") -> np.ndarray:
    """Sorted min over `looks` looks of p_n on the null paths (`looks` up to EXACT_LOOKS)."""
    return null_paths(prior_df, noise).prefix_min(horizon_grid(looks))


def threshold(looks: int, prior_df: int, alpha: float, noise: str = "series") -> float:
    """The p-value below which a run of `looks` evals is stopped: the largest q whose simulated
    false-alarm probability (exact to EXACT_LOOKS, a union bound over blocks past it), each
    term at its upper bound MC_SES Monte Carlo standard errors out, stays within alpha; 0 (never
    stop) when none does."""
    return grid_threshold(horizon_grid(looks), prior_df, alpha, noise)


def upper(count: np.ndarray, m: int) -> np.ndarray:
    """Wilson's upper bound, MC_SES standard errors out, on probabilities seen `count` times in
    m paths (above 0 at a count of 0: no path below q does not make a block's rate 0)."""
    z2, f = MC_SES * MC_SES, count / m
    return (f + z2 / (2 * m) + MC_SES * np.sqrt(f * (1 - f) / m + z2 / (4 * m * m))) / (1 + z2 / m)


@functools.lru_cache(maxsize=256)
def grid_threshold(horizon: int, prior_df: int, alpha: float, noise: str = "series") -> float:
    """`threshold` at a grid horizon, memoised (a look costs a dictionary lookup)."""
    null = null_paths(prior_df, noise)
    head = null.prefix_min(min(horizon, EXACT_LOOKS))
    blocks = math.ceil((horizon - EXACT_LOOKS) / BLOCK) if horizon > EXACT_LOOKS else 0
    tail = null.block() if blocks else np.ones(0)
    q = np.concatenate([head, tail])
    q = np.unique(q[q < 1.0])
    risk = upper(np.searchsorted(head, q, side="left"), len(head))
    if blocks:
        risk += blocks * upper(np.searchsorted(tail, q, side="left"), len(tail))
    ok = np.nonzero(risk <= alpha)[0]
    return float(q[ok[-1]]) if len(ok) else 0.0
