"""The hidden job record: true duration, curves, labels, and the runtime state the cluster keeps.

Nothing outside `evalstop_gym.sim` and the scoring code reads this record. Policies see jobs only
through `SchedulerJobView`, which is copied from it field by field.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass, field
from typing import NamedTuple

import numpy as np

from .checkpoint import best_eval, true_score_at
from .curves import exp_loss
from .pace import progress_between, work_at

JOB_TYPES = ("lora", "dpo", "rlhf")


class JobState(str, enum.Enum):
    PENDING = "pending"        # arrived, never run
    RUNNING = "running"        # holds its GPUs (training, evaluating or restarting)
    PREEMPTED = "preempted"    # waiting again, keeps its progress
    COMPLETED = "completed"    # reached progress 1.0
    STOPPED = "stopped"        # terminated early by a stop decision

    @property
    def finished(self) -> bool:
        return self in (JobState.COMPLETED, JobState.STOPPED)

    @property
    def waiting(self) -> bool:
        return self in (JobState.PENDING, JobState.PREEMPTED)


STATES = tuple(JobState)   # a state's code in the compiled engine is its index here


class Phase(enum.IntEnum):
    IDLE = 0
    RESTART = 1   # paying the preemption overhead
    TRAIN = 2     # advancing progress toward the next check point
    EVAL = 3      # evaluating at a check point; progress frozen


class Observation(NamedTuple):
    """One check the job went through: what a scheduler legitimately learnt there."""

    progress: float
    time: float
    loss: float
    score: float | None  # None at a policy milestone (no eval run there)


@dataclass(slots=True, eq=False)
class Job:
    # --- identity and demand (visible through the view)
    job_id: int
    tenant: int
    job_type: str
    gpus: int
    arrival: float
    duration_estimate: float
    # --- hidden truth
    duration: float
    is_hacking: bool
    peak_progress: float
    eval_points: np.ndarray      # progress fractions where an eval runs
    eval_true: np.ndarray        # noiseless score at each eval point
    eval_observed: np.ndarray    # score the eval reports (true + noise)
    eval_minutes: float
    loss_params: tuple[float, float, float, float]
    curve_params: tuple[float, ...]
    eval_work: np.ndarray | None = None   # share of `duration` spent by each eval point (pace.py)
    peak_work: float = field(default=-1.0, init=False)  # share spent by the peak (set_pace)
    # --- runtime state
    state: JobState = JobState.PENDING
    progress: float = 0.0   # as the trainer reports it (steps done / steps planned)
    work: float = 0.0       # share of `duration` trained: what the clock advances (pace.py)
    checks: list[tuple[float, int]] = field(default_factory=list)  # (progress, eval index or kind)
    check_work: list[float] = field(default_factory=list)          # the work at each check
    next_check: int = 0
    phase: Phase = Phase.IDLE
    phase_start: float = 0.0
    epoch: int = 0
    has_run: bool = False
    first_start: float | None = None
    end_time: float | None = None
    gpu_minutes: float = 0.0
    gpu_minutes_after_peak: float = 0.0
    n_preemptions: int = 0
    kind: int = -1          # GPU kind it runs on, in a heterogeneous cluster
    speed: float = 1.0      # that kind's speed: progress per minute is speed / duration
    observations: list[Observation] = field(default_factory=list)
    stop_reason: str = ""
    # --- cache of the view's history tuples (see view._history); not part of the job's state
    view_history: tuple | None = field(default=None, repr=False)
    loss_memo: tuple[float, float] | None = field(default=None, repr=False)  # see loss_at

    def __post_init__(self) -> None:
        self.set_pace(self.eval_work)

    def set_pace(self, eval_work: np.ndarray | None, peak_work: float | None = None) -> None:
        """Spread the training minutes over progress as `eval_work` says (None: evenly);
        `peak_work`, when given, is `work_at(peak_progress)` computed already."""
        self.eval_work = eval_work
        self.peak_work = self.work_at(self.peak_progress) if peak_work is None else peak_work

    def work_at(self, progress: float) -> float:
        """Share of the training minutes spent by `progress`."""
        if self.eval_work is None:
            return float(progress)
        return float(work_at(self.eval_points, self.eval_work, np.float64(progress)))

    def loss_at(self, progress: float) -> float:
        """True training loss at `progress`; the last answer is kept, as a check and the view
        built right after it ask for the same point."""
        memo = self.loss_memo
        if memo is not None and memo[0] == progress:
            return memo[1]
        loss = float(exp_loss(np.float64(progress), *self.loss_params))
        self.loss_memo = (progress, loss)
        return loss

    @property
    def observed_scores(self) -> list[float]:
        return [o.score for o in self.observations if o.score is not None]

    def true_score_at(self, progress: float) -> float:
        """Noiseless eval score of the checkpoint taken at `progress` (one of the eval points)."""
        return float(true_score_at(self.eval_points, self.eval_true, progress))

    def best_checkpoint(self) -> tuple[float, float] | None:
        """(score, progress) of the best eval observed so far: what stop-and-save keeps."""
        evals = self.observed_evals()
        best = best_eval([score for score, _ in evals])
        return evals[best] if best >= 0 else None

    def observed_evals(self) -> list[tuple[float, float]]:
        """(score, progress) of each eval observed so far (milestones carry none), in order."""
        return [(o.score, o.progress) for o in self.observations if o.score is not None]

    @property
    def planned_gpu_minutes(self) -> float:
        return self.gpus * (self.duration + len(self.eval_points) * self.eval_minutes)

    def reported_progress(self, work: float) -> float:
        """The progress the trainer reports once `work` is done, between the job's checks."""
        if self.eval_work is None:
            return work
        c, checks = self.next_check, self.checks
        if c >= len(checks):
            return checks[-1][0]
        prev_p, prev_w = (checks[c - 1][0], self.check_work[c - 1]) if c else (0.0, 0.0)
        return progress_between(work, prev_p, prev_w, checks[c][0], self.check_work[c])
