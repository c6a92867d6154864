"""The compiled vocabulary and arithmetic, written once: priority keys and stop rules.

A policy the compiled engine can run is described by numbers (`NativeSpec`: a KEY_* code, a
RULE_* code and their parameters). The arithmetic behind each code lives here as plain functions
over plain sequences: the policies call them on a view's tuples, and `native_kernel` compiles the
very same functions (`compiled`) and calls them on slices of its arrays, so both engines decide
alike by construction. The functions use loops, indexing, + - * / and comparisons only, which
plain Python and numba compute to the same bit; a rule that needs log or lgamma (DeclineTest) is
called compiled from both sides, so the last bit of those agrees too.

A new compiled stop rule costs a function here, a RULE_* code and one line in `stop_value`.
Importing this module loads no numba; `compiled` does, on first use.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Sequence
from typing import Any, NamedTuple

import numpy as np

# Priority keys: FIFO, SJF-Est, SRTF-Est, EvalSched-Strict (past peak last, then remaining),
# LossAware, EvalSched (past peak first and time-sliced, then remaining), LAS (GPU-minutes held)
KEY_ARRIVAL, KEY_DURATION_ESTIMATE, KEY_REMAINING_ESTIMATE = 0, 1, 2
KEY_EVAL_DEMOTE, KEY_LOSS_IMPROVEMENT, KEY_EVAL_SLICE, KEY_ATTAINED_SERVICE = 3, 4, 5, 6
# Stop rules: none, EvalStop-k, StopAt-p, LossPlateau, DeclineTest-alpha, Patience-k
RULE_NONE, RULE_DECLINES, RULE_PROGRESS, RULE_LOSS_PLATEAU = 0, 1, 2, 3
RULE_DECLINE_TEST, RULE_PATIENCE = 4, 5
# Not a rule: the compiled engine pauses at each check of a monitored type for an agent's answer
RULE_AGENT = 6
Floats = Sequence[float] | np.ndarray   # a view's tuple, or a slice of the engine's arrays
# Progress, work and counts closer than this are equal: they are sums and products of fractions
# (eval intervals, mix shares) that floating point leaves a few ulps apart
ROUNDING = 1e-9


class NativeSpec(NamedTuple):
    """A policy as the compiled engine runs it.

    `key` orders jobs (smaller first, ties on arrival then id) as `priority_key` does: one of the
    KEY_* codes above. `rule` is the stop rule (a RULE_* code); `monitored` holds, per job type
    in `workload.JOB_TYPES` order, its k (RULE_DECLINES, RULE_PATIENCE) or 1 (other rules) for a
    monitored type and 0 for one the rule never stops.
    """

    key: int
    preemptive: bool
    rule: int = RULE_NONE
    monitored: tuple[int, int, int] = (0, 0, 0)
    best_variant: bool = False     # RULE_DECLINES: a decline must also be below the best so far
    p: float = 0.0                 # RULE_PROGRESS: stop at this progress
    threshold: float = 0.0         # RULE_LOSS_PLATEAU: relative gain below this over `window`;
                                   # RULE_DECLINE_TEST: the false-alarm budget alpha;
                                   # RULE_PATIENCE: min_delta
    window: int = 0
    time_sliced: bool = False      # the platform runs a job the key demotes (major < 0) at its
                                   # slice share, from one check to the next
    rekeys_at_checks: bool = False  # a running job's key may rise at a check: stored afresh there
    rekeys_at_passes: bool = False  # it rises as the job runs: every running job's, at each pass


# What each compiled key does, beside ordering: a policy declares the same of itself (its
# `time_sliced`, its `key_rises_at_checks`), and `disagreement` refuses a mismatch.
SLICING_KEYS = (KEY_EVAL_SLICE,)
KEYS_RISING_AT_CHECKS = (KEY_EVAL_DEMOTE, KEY_LOSS_IMPROVEMENT, KEY_EVAL_SLICE)
KEYS_RISING_WHILE_RUNNING = (KEY_ATTAINED_SERVICE,)


def disagreement(spec: NativeSpec) -> str:
    """What the compiled key would do other than the policy declares ('' when nothing): a
    time-sliced policy whose key does not slice would run unsliced on the compiled engine."""
    for declared, keys, what in ((spec.time_sliced, SLICING_KEYS, "time-sliced"),
                                 (spec.rekeys_at_checks, KEYS_RISING_AT_CHECKS,
                                  "re-keyed at checks"),
                                 (spec.rekeys_at_passes, KEYS_RISING_WHILE_RUNNING,
                                  "re-keyed at every pass")):
        if declared != (spec.key in keys):
            return (f"it declares {'' if declared else 'not '}{what} but its native_key "
                    f"{spec.key} is {'not ' if declared else ''}{what}")
    return ""


# ---------------------------------------------------------------------------- priority keys


def loss_improvement(losses: Floats) -> float:
    """Relative loss drop over the last check interval; +inf when not yet measurable."""
    n = len(losses)
    if n < 2 or losses[n - 2] <= 0:
        return np.inf
    return (losses[n - 2] - losses[n - 1]) / losses[n - 2]


def past_peak(scores: Floats) -> bool:
    """The latest eval fell below the best before it."""
    n = len(scores)
    if n < 2:
        return False
    best = scores[0]
    for i in range(1, n - 1):
        if scores[i] > best:
            best = scores[i]
    return scores[n - 1] < best


def priority_key(code: int, arrival: float, duration_estimate: float, progress: float,
                 losses: Floats, scores: Floats, service: float = 0.0) -> tuple[int, float]:
    """The key of a job under scheduler `code`, as (major, minor): jobs rank by (major, minor,
    arrival, id). Only EvalSched uses the major part (past its peak or not: first for the
    time-sliced form, last for the strict one). `service`: the GPU-minutes it has held."""
    if code == KEY_ARRIVAL:
        return 0, arrival
    if code == KEY_ATTAINED_SERVICE:
        return 0, service
    if code == KEY_DURATION_ESTIMATE:
        return 0, duration_estimate
    if code == KEY_LOSS_IMPROVEMENT:
        return 0, -loss_improvement(losses)
    remaining = duration_estimate * (1.0 - progress)
    if code == KEY_REMAINING_ESTIMATE:
        return 0, remaining
    demoted = past_peak(scores)
    if code == KEY_EVAL_SLICE:
        return (-1 if demoted else 0), remaining
    return (1 if demoted else 0), remaining


# ---------------------------------------------------------------------------- stop rules
# Each returns NaN to continue, else the number its policy's reason quotes.


def decline_count(scores: Floats, below_best: bool = False, start: int = 0) -> int:
    """Trailing consecutive declines in `scores[start:]` (variant: each also below the best
    before it)."""
    count = 0
    i = len(scores) - 1
    while i > start:
        declined = scores[i] < scores[i - 1]
        if below_best and declined:
            best = scores[start]
            for q in range(start + 1, i):
                if scores[q] > best:
                    best = scores[q]
            declined = scores[i] < best
        if not declined:
            break
        count += 1
        i -= 1
    return count


def declines(scores: Floats, k: int, below_best: bool) -> float:
    """EvalStop-k: k consecutive declines. It stops the first time the count reaches k, so the
    last k + 1 scores decide, and an eval costs O(k) however long the run."""
    count = decline_count(scores, below_best, max(0, len(scores) - k - 1))
    return float(count) if count >= k else np.nan


def progress_reached(progress: float, p: float) -> float:
    """StopAt-p: the progress, once it reaches p."""
    return progress if progress >= p - ROUNDING else np.nan


def loss_plateau(losses: Floats, threshold: float, window: int) -> float:
    """LossPlateau: the relative loss gain over the last `window` checks, when below
    `threshold`."""
    n = len(losses)
    if n < window:
        return np.nan
    first, last = losses[n - window], losses[n - 1]
    gain = (first - last) / first if first > 0 else 0.0
    return gain if gain < threshold else np.nan


def patience_step(best: float, wait: int, score: float, min_delta: float,
                  first: bool) -> tuple[float, int]:
    """Keras's (best, wait) after one more score: best moves on a gain > min_delta."""
    return (score, 0) if first or score - min_delta > best else (best, wait + 1)


def patience(scores: Floats, k: int, min_delta: float) -> float:
    """Patience-k: k evals without improving the best by more than `min_delta`."""
    best, wait = 0.0, 0
    for i in range(len(scores)):
        best, wait = patience_step(best, wait, scores[i], min_delta, i == 0)
    return float(wait) if wait >= k else np.nan


def _t_tail_bound(t: float, nu: float, log_norm: float) -> float:
    """log of a Student-t tail bound, P(T_nu > t) <= f_nu(t) (nu + t^2) / ((nu - 1) t), nu > 1
    (tight within a few percent of the quantile for nu >= 5)."""
    return (log_norm - 0.5 * (nu + 1.0) * math.log1p(t * t / nu) + math.log(nu + t * t)
            - math.log((nu - 1.0) * t))


def decline_critical(eps: float, nu: float) -> float:
    """The smallest t (to bisection precision) with the tail bound at t <= eps: DeclineTest's
    critical value for one comparison at level eps with a noise estimate of nu df."""
    log_norm = math.lgamma(0.5 * (nu + 1.0)) - math.lgamma(0.5 * nu) - 0.5 * math.log(
        nu * math.pi)
    log_eps = math.log(eps)
    lo = 1.0
    hi = math.sqrt(nu * (eps ** (-2.0 / nu) - 1.0))   # the cruder bound (1 + t^2/nu)^(-nu/2)
    if hi <= lo:
        return hi
    for _ in range(60):
        mid = 0.5 * (lo + hi)
        if _t_tail_bound(mid, nu, log_norm) > log_eps:
            lo = mid
        else:
            hi = mid
    return hi


def decline_evidence(scores: Floats, prog: Floats, n: int,
                     alpha: float) -> tuple[float, float, float]:
    """policies.decline_test's test on the first n evals: (z, critical value, sigma_hat);
    z = -inf when it cannot be run (fewer than 4 evals, no measurable noise). Uses log and
    lgamma: call it `compiled` from plain Python."""
    if n < 4:
        return -np.inf, np.inf, 0.0
    k = n - 2
    acc = 0.0
    for i in range(k):
        d = (scores[i + 2] - scores[i + 1]) - (scores[i + 1] - scores[i])
        acc += d * d
    sigma = math.sqrt(acc / (6.0 * k))
    if not sigma > 0.0:
        return -np.inf, np.inf, 0.0
    # Satterthwaite df of sigma^2: second differences of i.i.d. noise correlate -4/6 at lag 1,
    # 1/6 at lag 2
    nu = k * k / (k + 2.0 * (k - 1) * (16.0 / 36.0) + 2.0 * max(k - 2, 0) * (1.0 / 36.0))
    cum = np.zeros(n + 1)
    for i in range(n):
        cum[i + 1] = cum[i] + scores[i]
    z = -np.inf
    comparisons = 0
    w = 2
    while 2 * w <= n:
        latest = (cum[n] - cum[n - w]) / w
        if w == 2:   # the better of the last two: one bad eval alone never decides
            latest = max(scores[n - 2], scores[n - 1])
        best = -np.inf
        for end in range(n - w, w - 1, -w):     # earlier blocks tile back from the latest
            best = max(best, (cum[end] - cum[end - w]) / w)
        z = max(z, (best - latest) / (sigma * math.sqrt(2.0 / w)))
        comparisons += (n - w) // w
        w *= 2
    usable = 0.0 < prog[n - 1] <= 1.0
    for i in range(n - 1):
        usable = usable and prog[i] < prog[i + 1]
    if usable:   # spend alpha over progress; the first look spends all the progress so far
        budget = alpha * (prog[n - 1] if n == 4 else prog[n - 1] - prog[n - 2])
    else:        # look m since the first spends alpha / (m (m + 1))
        m = n - 3.0
        budget = alpha / (m * (m + 1.0))
    return z, decline_critical(budget / comparisons, nu), sigma


def decline_test(scores: Floats, progress: Floats, alpha: float) -> float:
    """DeclineTest-alpha: the evidence z, once it passes its critical value."""
    z, critical, _ = decline_evidence(scores, progress, len(scores), alpha)
    return z if z > critical else np.nan


def stop_value(rule: int, k: int, best_variant: bool, p: float, threshold: float, window: int,
               progress: float, scores: Floats, eval_progress: Floats,
               losses: Floats) -> float:
    """The compiled engine's dispatch: rule `rule` of a monitored job (k: its type's k) on its
    history so far. NaN to continue, else the number the rule's reason quotes."""
    if rule == RULE_PROGRESS:
        return progress_reached(progress, p)
    if rule == RULE_LOSS_PLATEAU:
        return loss_plateau(losses, threshold, window)
    if rule == RULE_DECLINE_TEST:
        return decline_test(scores, eval_progress, threshold)
    if rule == RULE_PATIENCE:
        return patience(scores, k, threshold)
    if rule == RULE_DECLINES:
        return declines(scores, k, best_variant)
    return np.nan


# Every function above that another one calls; numba must know them before it compiles a caller.
HELPERS = (loss_improvement, past_peak, priority_key, decline_count, declines, progress_reached,
           loss_plateau, patience_step, patience, _t_tail_bound, decline_critical,
           decline_evidence, decline_test, stop_value)
_COMPILED: dict[Callable[..., Any], Callable[..., Any]] = {}


def compiled(rule: Callable[..., Any]) -> Callable[..., Any]:
    """`rule` compiled by numba, once per process (cached outside the package, see `jit.py`):
    what the compiled engine runs. Without numba, the plain function."""
    fn = _COMPILED.get(rule)
    if fn is None:
        from .jit import jitable, njit

        if not _COMPILED:
            for helper in HELPERS:
                jitable(helper)
        fn = _COMPILED[rule] = njit(cache=True)(rule)
    return fn
