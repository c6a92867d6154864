"""The env's reward: named terms, each weighted by `config.reward`, all defined here.

The reward is the world's feedback, so it may read hidden truth (true durations, peaks, curves);
it is computed from the job records the env keeps for scoring, never from or into observations.
With T = reward.time_scale_min minutes, the reward of a step (from one decision point to the next)
is minus the weighted sum of:

- jobs_in_system: integral over the step of the number of arrived, unfinished jobs, / T.
  Over an episode it sums to total JCT / T (Decima's -dt x jobs in system).
- gpu_minutes: GPU-minutes held by jobs during the step, / T.
- wasted_gpu_minutes: GPU-minutes spent training past a job's true eval peak, / T. In
  control="stop" it is charged when a check is answered "continue", for the segment that answer
  commits the job to (up to its next check), so the cost lands on the decision that caused it; in
  control="full" it is charged as it accrues.
- quality_lost: at each stop, the job's best true eval score over its whole schedule minus the
  true score of the checkpoint it keeps (its best observed eval; 0 if it has none): what stopping
  before the true peak cost the user. Zero for a stop after the peak of a collapsing job.
- false_stop: 1 for each stop of a job that was not reward-hacking, whatever it cost in quality:
  the tenant's cost of a false alarm (a flagged healthy run gets investigated). Without it, a
  stop at a healthy job's final eval is free, and agents learn to flag every job at the end.

What accrues before the first decision point answers no action, so no step returns it; the
episode totals at the end (`info["reward_terms"]`) include it.

The arithmetic is written once, as plain functions over numbers and sequences (`admitted_by`,
`sweep_open`, `held_minutes`, `integrals`, `step_terms`, `weighted_reward`, `segment_waste`,
`stop_quality_lost`): `RewardMeter` calls them on the job records, and the compiled batch
(`batch_step.py`) compiles the very same functions and calls them on its arrays, so both
sum the same numbers in the same order.
"""

from __future__ import annotations

import math
from collections.abc import MutableSequence, Sequence
from typing import NamedTuple

import numpy as np

from ..config import RewardConfig
from ..sim.checkpoint import best_eval, true_score_at
from ..sim.cluster import Cluster
from ..sim.jobs import Job
from ..sim.rules import Floats

Triple = tuple[float, float, float]
Terms = tuple[float, float, float, float, float]


class RewardTerms(NamedTuple):
    jobs_in_system: float = 0.0
    gpu_minutes: float = 0.0
    wasted_gpu_minutes: float = 0.0
    quality_lost: float = 0.0
    false_stop: float = 0.0

    def __add__(self, other: tuple) -> RewardTerms:
        return RewardTerms(*(a + b for a, b in zip(self, other, strict=True)))

    def weighted(self, cfg: RewardConfig) -> float:
        return weighted_reward(weights(cfg), self)


def weights(cfg: RewardConfig) -> tuple[float, float, float, float, float]:
    """The terms' weights, in `RewardTerms` order."""
    return (cfg.jobs_in_system, cfg.gpu_minutes, cfg.wasted_gpu_minutes, cfg.quality_lost,
            cfg.false_stop)


class RewardMeter:
    """Measures the terms of one episode from the cluster's job records.

    The three integrals are kept incrementally: a job is booked once when it ends, so each call
    sums only the jobs in the system (arrived, not ended), not every job of the run.
    """

    def __init__(self, cfg: RewardConfig, cluster: Cluster, jobs: list[Job],
                 wasted_on_decision: bool) -> None:
        self.cfg = cfg
        self.cluster = cluster
        self.scale = cfg.time_scale_min
        self.wasted_on_decision = wasted_on_decision
        self._arrivals = sorted(jobs, key=lambda j: j.arrival)   # stable: ties by job id
        self._arrival_times = [j.arrival for j in self._arrivals]
        self._admitted = 0                  # jobs of _arrivals already in _open or booked
        self._open: list[Job] = []          # arrived jobs whose end is not yet booked
        self._booked = (0.0, 0.0, 0.0)      # the integrals' share from ended jobs (final)
        self._last = (0.0, 0.0, 0.0)        # integrals at the previous decision point
        self.total = RewardTerms()

    def step(self, stopped: list[Job], continued: list[Job]) -> RewardTerms:
        """Terms accrued since the previous call, plus those charged to this step's decisions."""
        now = self._integrals(self.cluster.now)
        wasted = now[2] - self._last[2]
        if self.wasted_on_decision:
            wasted = 0.0      # a loop, not sum(): the compiled batch adds in this order
            for job in continued:
                wasted += committed_waste(job)
        terms = RewardTerms(*step_terms(now, self._last, wasted,
                                        sum(quality_lost(j) for j in stopped),
                                        float(sum(not j.is_hacking for j in stopped)),
                                        self.scale))
        self._last = now
        self.total = self.total + terms
        return terms

    def _integrals(self, now: float) -> Triple:
        """Up to `now`: job-minutes in system, GPU-minutes held, GPU-minutes past true peaks."""
        times = self._arrival_times
        admitted = admitted_by(now, range(len(times)), len(times), times, self._admitted)
        self._open += self._arrivals[self._admitted:admitted]
        self._admitted = admitted
        jobs = self._open
        ids = list(range(len(jobs)))
        kept, *sums = sweep_open(
            now, ids, len(jobs), [j.arrival for j in jobs],
            [math.nan if j.end_time is None else j.end_time for j in jobs],
            [j.gpu_minutes for j in jobs], [j.gpu_minutes_after_peak for j in jobs],
            self._booked)
        self._booked = (sums[0], sums[1], sums[2])
        self._open = [jobs[q] for q in ids[:kept]]
        running = list(self.cluster.running.values())
        held = held_minutes(now, range(len(running)), len(running), [j.gpus for j in running],
                            [j.phase for j in running], [j.phase_start for j in running])
        return integrals(self._booked, (sums[3], sums[4], sums[5]), held)


def committed_waste(job: Job) -> float:
    """GPU-minutes past the true peak of the job's next segment (training, then its eval)."""
    if job.next_check >= len(job.checks):
        return 0.0
    target, eval_index = job.checks[job.next_check]
    return segment_waste(target, eval_index, job.check_work[job.next_check], job.work,
                         job.peak_work, job.peak_progress, job.duration, job.speed,
                         job.eval_minutes, job.gpus)


def quality_lost(job: Job) -> float:
    """Best true score over the schedule minus the true score of the kept checkpoint (0 if none)."""
    evals = job.observed_evals()
    return float(stop_quality_lost(job.eval_points, job.eval_true, [s for s, _ in evals],
                                   [p for _, p in evals]))


# ---------------------------------------------------------------- the arithmetic, written once


def admitted_by(now: float, order: Sequence[int] | np.ndarray, n: int, arrival: Floats,
                admitted: int) -> int:
    """How many of the n jobs, taken in arrival `order`, have arrived by `now` (counting on
    from `admitted`)."""
    while admitted < n and arrival[order[admitted]] <= now:
        admitted += 1
    return admitted


def sweep_open(now: float, ids: MutableSequence[int] | np.ndarray, n_open: int, arrival: Floats,
               end_time: Floats, gpu_min: Floats, gpu_after: Floats, booked: Triple
               ) -> tuple[int, float, float, float, float, float, float]:
    """One pass over the open jobs ids[:n_open] (arrived, end not yet booked; admission order):
    an ended one's totals (end_time not NaN) are final, so they join the booked sums and it
    leaves `ids`, compacted in place; the others' are summed. Returns how many stay open, the
    booked sums and the open ones' sums (job-minutes in system, GPU-minutes, past the peak)."""
    b0, b1, b2 = booked
    s0, s1, s2 = 0.0, 0.0, 0.0
    kept = 0
    for q in range(n_open):
        j = ids[q]
        if not math.isnan(end_time[j]):
            b0 = b0 + end_time[j] - arrival[j]
            b1 = b1 + gpu_min[j]
            b2 = b2 + gpu_after[j]
        else:
            ids[kept] = j
            kept += 1
            s0 += now - arrival[j]
            s1 += gpu_min[j]
            s2 += gpu_after[j]
    return kept, b0, b1, b2, s0, s1, s2


def held_minutes(now: float, ids: Sequence[int] | np.ndarray, n_run: int,
                 gpus: Sequence[int] | np.ndarray, phase: Sequence[int] | np.ndarray,
                 phase_start: Floats) -> float:
    """GPU-minutes the running jobs ids[:n_run] (by start) have held in their current phase,
    not yet charged to their gpu_minutes."""
    held = 0.0
    for q in range(n_run):
        j = ids[q]
        if phase[j] != 0:
            held += gpus[j] * (now - phase_start[j])
    return held


def integrals(booked: Triple, open_sums: Triple, held: float) -> Triple:
    """The three integrals: the ended jobs' share, plus the open ones' (and the held phases')."""
    return (booked[0] + open_sums[0], booked[1] + open_sums[1] + held,
            booked[2] + open_sums[2])


def step_terms(now: Triple, last: Triple, wasted: float, lost: float, false_stops: float,
               scale: float) -> Terms:
    """The terms of a step in `RewardTerms` order: the integrals' growth since the last decision
    and the waste charged, over the time scale; the stops' quality lost and false stops."""
    return ((now[0] - last[0]) / scale, (now[1] - last[1]) / scale, wasted / scale, lost,
            false_stops)


def weighted_reward(weights: Sequence[float] | np.ndarray, terms: Terms) -> float:
    """Minus the weighted sum of the terms (weights in `RewardTerms` order)."""
    return -(weights[0] * terms[0] + weights[1] * terms[1] + weights[2] * terms[2]
             + weights[3] * terms[3] + weights[4] * terms[4])


def segment_waste(target: float, eval_index: int, target_work: float, work: float,
                  peak_work: float, peak_progress: float, duration: float, speed: float,
                  eval_minutes: float, gpus: int) -> float:
    """`committed_waste`'s arithmetic on plain numbers (the compiled batch core runs it too)."""
    past = max(0.0, target_work - max(work, peak_work))
    minutes = past * duration / speed       # as Cluster._charge counts them
    if eval_index >= 0 and target > peak_progress:
        minutes += eval_minutes / speed
    return gpus * minutes


def stop_quality_lost(points: Floats, truth: Floats, scores: Floats, progress: Floats) -> float:
    """What a stop gives up: the best true score over the schedule (eval points `points`, true
    scores `truth`) minus the true score of the checkpoint kept, the first best of the observed
    `scores` (taken at `progress`); 0 when kept is none. 0 for a job with no eval points."""
    if len(truth) == 0:
        return 0.0
    best = best_eval(scores, 0, -1)
    kept = true_score_at(points, truth, progress[best]) if best >= 0 else 0.0
    return np.max(truth) - kept
