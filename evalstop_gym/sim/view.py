"""The information boundary: what a scheduler may know about a job and about the cluster.

A `SchedulerJobView` is built by copying whitelisted fields out of the hidden job record into
immutable plain values (ints, floats, strings, tuples of floats). It holds no reference to the job,
its curves or its labels, so no attribute path from a view reaches hidden truth.

What a platform knows, and so what a view carries: the job's request (type, GPUs, tenant,
arrival), its state, the wall time it has held GPUs (`attained_minutes`, as billed), the training
progress its trainer reports (steps done / steps planned) and the evals and losses it has logged.
It does not know the job's duration before the job runs: `duration_estimate` is the type's mean.

Once a job has trained, its training rate is observable, on a real platform as here (steps per
second), and it predicts the rest of the run only as well as step times are steady. Step times
drift (`sim/pace.py`: log step time a Brownian motion in progress, volatility 0.3 per unit of
progress for RLHF, whose rollout lengths drift, 0.1 for LoRA and DPO), so the duration a policy
reads off progress and the clock is an estimate, not the truth: BEYOND.md's section "What a policy
can read off the clock" measures it at every check of the default platform, for three
estimates (among them one that knows the pace model), from
`benchmarks/analysis/duration_leak.py`. The error shrinks as a job nears its end, as on a
platform: fewer steps remain.
`tests/test_information_boundary.py` holds medians above 3% (RLHF) and 0.5% (LoRA, DPO) and
the share of checks within 1e-6 under 1%, for all three estimates. With
`step_time_volatility: 0` every step takes the same time and the same formula recovers the
duration to float precision (also tested): that setting is the upper bound of what a platform
could know, not a platform.
Non-clairvoyance holds exactly before a job's first training: its views equal those of any job
with the same request and initial loss (drawn apart from its duration and label).

With `curves.source: corpus` and `curves.corpus_noise: recorded` (the corpus defaults), a job's
evals report its run's logged `eval_score` exactly, and the runs ship with the package: a policy
that matches the prefix of a job's scores against `traces.corpus.load_family` finds the run, and
its label. Use `corpus_noise: added` where that matters (a shared leaderboard).
"""

from __future__ import annotations

from collections.abc import Callable, Hashable
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from .jobs import Job, Phase
from .rules import decline_count
from .transitions import work_after


@dataclass(frozen=True, slots=True)
class SchedulerJobView:
    job_id: int
    tenant: int
    job_type: str                     # "lora", "dpo" or "rlhf"
    gpus: int                         # GPU demand (all-or-nothing)
    arrival_time: float               # minutes
    state: str                        # pending, running, preempted, completed, stopped
    progress: float                   # fraction of training done, 0..1
    loss: float                       # current training loss
    eval_progress: tuple[float, ...]  # progress of each eval observed so far
    eval_scores: tuple[float, ...]    # the scores those evals reported (noisy)
    loss_history: tuple[float, ...]   # training loss at each check point passed
    duration_estimate: float          # non-clairvoyant: the job type's mean duration (minutes)
    attained_minutes: float           # wall minutes the job has held GPUs so far
    n_preemptions: int
    gpu_kind: int = -1                # GPU kind it runs on (-1: not placed, or homogeneous)

    @property
    def remaining_estimate(self) -> float:
        """Estimated minutes of training left: the type's mean duration times (1 - progress)
        (SRTF-Est's key in `rules.priority_key`)."""
        return self.duration_estimate * (1.0 - self.progress)

    @property
    def consecutive_declines(self) -> int:
        """How many of the latest evals were each below the one before."""
        return decline_count(self.eval_scores)


@dataclass(frozen=True, slots=True)
class ClusterView:
    now: float          # minutes since the run started
    total_gpus: int
    free_gpus: int
    n_waiting: int
    n_running: int
    free_by_kind: tuple[int, ...] = ()     # heterogeneous clusters only: free GPUs per kind
    gpus_by_kind: tuple[int, ...] = ()     # GPUs per kind
    kind_speeds: tuple[float, ...] = ()    # speed of each kind relative to the reference GPU


@runtime_checkable
class FoldableHistory(Protocol):
    """A view's history that keeps a running statistic between evals (a live run's, see
    `evalstop_gym.online.HistoryWindow`): `fold(name, params, step, init)` is `step` folded over
    the history from `init`, resumed where the last fold of `name` with the same `params` stopped.
    A detector that can fold asks for this protocol; any other history it reads whole."""

    def fold(self, name: str, params: Hashable, step: Callable[[Any, float], Any],
             init: Any) -> Any: ...


def make_view(job: Job, now: float) -> SchedulerJobView:
    """Copy the whitelisted fields of `job` as of time `now`."""
    phase = job.phase
    progress = job.progress
    attained = job.gpu_minutes / job.gpus
    if phase != Phase.IDLE:
        attained += now - job.phase_start
        if phase == Phase.TRAIN:
            progress = job.reported_progress(current_work(job, now))
    eval_progress, eval_scores, loss_history = _history(job)
    return SchedulerJobView(
        job.job_id, job.tenant, job.job_type, job.gpus, job.arrival, job.state._value_,
        progress, job.loss_at(progress), eval_progress, eval_scores, loss_history,
        float(job.duration_estimate), float(attained), job.n_preemptions, job.kind)


def _history(job: Job) -> tuple[tuple[float, ...], tuple[float, ...], tuple[float, ...]]:
    """The view's history tuples, rebuilt only when observations were appended or replaced."""
    obs = job.observations
    cached = job.view_history
    if cached is not None and cached[0] is obs and cached[1] == len(obs):
        return cached[2]
    evals = [o for o in obs if o.score is not None]
    history = (tuple(float(o.progress) for o in evals),
               tuple(float(o.score) for o in evals),  # type: ignore[arg-type]
               tuple(float(o.loss) for o in obs))
    job.view_history = (obs, len(obs), history)
    return history


def current_work(job: Job, now: float) -> float:
    """The share of the job's training minutes done at `now` (hidden: see pace.py)."""
    return work_after(job.phase, job.work, now - job.phase_start, job.speed, job.duration)


def current_progress(job: Job, now: float) -> float:
    """The progress the job's trainer reports at `now`."""
    if job.phase == Phase.TRAIN:
        return job.reported_progress(current_work(job, now))
    return job.progress
