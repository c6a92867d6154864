"""PeerPrior's shape fit at every prefix of a run, from running sums: O(shapes) per look.

Each shape t of a library, read at the run's eval progresses, is fitted to the run's evals y as
y = a + b t + noise (a free, b >= 0) by generalised least squares under AR(1) noise of
correlation rho: both sides are prewhitened (w_0 = sqrt(1 - rho^2) x_0, w_i = x_i - rho x_(i-1))
and fitted by ordinary least squares. Every inner product of two whitened sequences u, v over
their first n entries is

    <w u, w v>_n = (1 + rho^2) S_uv - rho^2 (u_0 v_0 + u_(n-1) v_(n-1)) - rho (L_uv + L_vu)

with S_uv = sum_(i<n) u_i v_i and L_uv = sum_(0<i<n) u_i v_(i-1), so prefix sums of the products
and lag-1 products give the fit at every prefix, for any rho (TrendTest re-estimates it at every
look), without a pass over the evals: replaying a finished run look by look costs O(shapes x n),
not O(shapes x n^2). Sequences are taken relative to their first entry (the intercept absorbs
any constant), which keeps the sums' cancellation to the curve's range, not its level.
"""

from __future__ import annotations

import numpy as np

TINY = 1e-12   # a shape whose centred sum of squares is below this share of its total is flat


class PrefixFit:
    """Running sums of `scores` (n) against `shapes` (shapes x n, read at the same progresses);
    `log_likelihoods(n, ...)` fits every shape to the first n evals."""

    def __init__(self, shapes: np.ndarray, scores: np.ndarray) -> None:
        y = np.asarray(scores, dtype=float)
        t = np.asarray(shapes, dtype=float)
        self.y, self.t = y - y[0], t - t[:, :1]
        y, t = self.y, self.t
        self.sy, self.syy = np.cumsum(y), np.cumsum(y * y)
        self.st, self.stt, self.sty = (np.cumsum(t, 1), np.cumsum(t * t, 1),
                                       np.cumsum(t * y, 1))
        zero, zeros = np.zeros(1), np.zeros((len(t), 1))
        self.lyy = np.concatenate([zero, np.cumsum(y[1:] * y[:-1])])
        self.ltt = np.concatenate([zeros, np.cumsum(t[:, 1:] * t[:, :-1], 1)], 1)
        self.lty = np.concatenate([zeros, np.cumsum(t[:, 1:] * y[:-1] + t[:, :-1] * y[1:], 1)],
                                  1)

    def log_likelihoods(self, n: int, sigma: float, rho: float = 0.0) -> np.ndarray:
        """Per shape, the Gaussian log likelihood of the first n evals = a + b shape + noise,
        a and b >= 0 fitted per shape (GLS under AR(1) noise of correlation rho, innovation sd
        sigma sqrt(1 - rho^2)) and the shape's own smoothed noise (sigma^2 / 3 per point,
        scaled by b^2) added to the noise variance."""
        k, r2 = n - 1, rho * rho
        y0, yl, t0, tl = self.y[0], self.y[k], self.t[:, 0], self.t[:, k]
        cc = (1.0 + r2) * n - 2.0 * r2 - 2.0 * rho * k
        yc = (1.0 + r2) * self.sy[k] - r2 * (y0 + yl) - rho * (2.0 * self.sy[k] - y0 - yl)
        tc = (1.0 + r2) * self.st[:, k] - r2 * (t0 + tl) - rho * (2.0 * self.st[:, k] - t0 - tl)
        yy = (1.0 + r2) * self.syy[k] - r2 * (y0 * y0 + yl * yl) - 2.0 * rho * self.lyy[k]
        tt = (1.0 + r2) * self.stt[:, k] - r2 * (t0 * t0 + tl * tl) - 2.0 * rho * self.ltt[:, k]
        ty = (1.0 + r2) * self.sty[:, k] - r2 * (t0 * y0 + tl * yl) - rho * self.lty[:, k]
        sxx, sxy = tt - tc * tc / cc, ty - tc * yc / cc
        syy = max(yy - yc * yc / cc, 0.0)
        flat = ~(sxx > TINY * np.maximum(tt, np.finfo(float).tiny))
        b = np.where(flat, 0.0, np.maximum(sxy / np.where(flat, 1.0, sxx), 0.0))
        rss = np.maximum(syy - 2.0 * b * sxy + b * b * np.where(flat, 0.0, sxx), 0.0)
        var = sigma * sigma * (1.0 - r2) * (1.0 + b * b / 3.0)
        return -0.5 * rss / var - 0.5 * n * np.log(var)
