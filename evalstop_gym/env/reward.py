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
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from ..config import RewardConfig
from ..sim.cluster import Cluster
from ..sim.jobs import Job


class RewardTerms(NamedTuple):
    jobs_in_system: float = 0.0
    gpu_minutes: float = 0.0
    wasted_gpu_minutes: float = 0.0
    quality_lost: float = 0.0
    false_stop: float = 0.0

    def __add__(self, other: tuple) -> RewardTerms:
        return RewardTerms(*(a + b for a, b in zip(self, other, strict=True)))

    def weighted(self, cfg: RewardConfig) -> float:
        return -(cfg.jobs_in_system * self.jobs_in_system + cfg.gpu_minutes * self.gpu_minutes
                 + cfg.wasted_gpu_minutes * self.wasted_gpu_minutes
                 + cfg.quality_lost * self.quality_lost + cfg.false_stop * self.false_stop)


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
        self._admitted = 0                  # jobs of _arrivals already in _open or booked
        self._open: list[Job] = []          # arrived jobs whose end is not yet booked
        self._booked = (0.0, 0.0, 0.0)      # the integrals' share from ended jobs (final)
        self._last = (0.0, 0.0, 0.0)        # integrals at the previous decision point
        self.total = RewardTerms()

    def step(self, stopped: list[Job], continued: list[Job]) -> RewardTerms:
        """Terms accrued since the previous call, plus those charged to this step's decisions."""
        integrals = self._integrals(self.cluster.now)
        jobs_d, gpu_d, wasted_d = (b - a for a, b in zip(self._last, integrals, strict=True))
        self._last = integrals
        if self.wasted_on_decision:
            wasted_d = sum(committed_waste(j) for j in continued)
        terms = RewardTerms(jobs_d / self.scale, gpu_d / self.scale, wasted_d / self.scale,
                            sum(quality_lost(j) for j in stopped),
                            float(sum(not j.is_hacking for j in stopped)))
        self.total = self.total + terms
        return terms

    def _integrals(self, now: float) -> tuple[float, float, float]:
        """Up to `now`: job-minutes in system, GPU-minutes held, GPU-minutes past true peaks."""
        while self._admitted < len(self._arrivals) and \
                self._arrivals[self._admitted].arrival <= now:
            self._open.append(self._arrivals[self._admitted])
            self._admitted += 1
        for j in self._open:
            if j.end_time is not None:  # ended: its totals are final
                self._booked = (self._booked[0] + j.end_time - j.arrival,
                                self._booked[1] + j.gpu_minutes,
                                self._booked[2] + j.gpu_minutes_after_peak)
        self._open = [j for j in self._open if j.end_time is None]
        held = sum(j.gpus * (now - j.phase_start) for j in self.cluster.running.values()
                   if j.phase)   # the current phase, not yet charged to gpu_minutes
        return (self._booked[0] + sum(now - j.arrival for j in self._open),
                self._booked[1] + sum(j.gpu_minutes for j in self._open) + held,
                self._booked[2] + sum(j.gpu_minutes_after_peak for j in self._open))


def committed_waste(job: Job) -> float:
    """GPU-minutes past the true peak of the job's next segment (training, then its eval)."""
    if job.next_check >= len(job.checks):
        return 0.0
    target, eval_index = job.checks[job.next_check]
    return segment_waste(target, eval_index, job.check_work[job.next_check], job.work,
                         job.peak_work, job.peak_progress, job.duration, job.speed,
                         job.eval_minutes, job.gpus)


def segment_waste(target: float, eval_index: int, target_work: float, work: float,
                  peak_work: float, peak_progress: float, duration: float, speed: float,
                  eval_minutes: float, gpus: int) -> float:
    """`committed_waste`'s arithmetic on plain numbers (the compiled batch core runs it too)."""
    past = max(0.0, target_work - max(work, peak_work))
    minutes = past * duration / speed       # as Cluster._charge counts them
    if eval_index >= 0 and target > peak_progress:
        minutes += eval_minutes / speed
    return gpus * minutes


def quality_lost(job: Job) -> float:
    """Best true score over the schedule minus the true score of the kept checkpoint (0 if none)."""
    if len(job.eval_true) == 0:
        return 0.0
    best = job.best_checkpoint()
    kept = job.true_score_at(best[1]) if best is not None else 0.0
    return lost_quality(float(np.max(job.eval_true)), kept)


def lost_quality(best_true: float, kept_true: float) -> float:
    """What a stop gives up: the schedule's best true score minus the kept checkpoint's."""
    return best_true - kept_true
