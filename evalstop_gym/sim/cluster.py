"""The simulated platform: GPU allocation, preemption, evals, stop-and-save.

The cluster is driven from outside, one decision at a time: `next_decision()` runs events until the
platform needs an answer, either a `CheckRequest` (a job reached an eval result or a milestone:
continue or stop?) or a `ScheduleRequest` (a scheduling pass: which jobs start, which are
preempted?). The caller answers with `answer_check` or `answer_schedule`. `run(policy)` is that loop
with a policy answering; the Gymnasium env is the same loop with an agent answering, so both paths
execute identical code.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import replace
from typing import Any, NamedTuple

from ..config import SimConfig
from .allocation import checked_allocation
from .checks import check_work, merge_checks
from .gpus import GpuPool
from .jobs import Job, JobState, Observation, Phase
from .kernel import ARRIVAL, PHASE_END, EventQueue, SimulationError
from .protocols import Allocation, Planner, Policy, StopDecision, capabilities, checked_decision
from .shown import ShownJobs
from .transitions import (
    CHECK,
    COMPLETE,
    STOP,
    after_check,
    first_phase,
    phase_after,
    phase_charge,
    phase_minutes,
    sliced_speed,
)
from .view import ClusterView, SchedulerJobView


class CheckRequest(NamedTuple):
    job: SchedulerJobView
    cluster: ClusterView
    is_eval: bool


class ScheduleRequest(NamedTuple):
    cluster: ClusterView
    waiting: tuple[SchedulerJobView, ...]
    running: tuple[SchedulerJobView, ...]


class Cluster:
    """One run of the platform over a fixed list of jobs.

    Every change to a job is noted (`ShownJobs`), so `run` offers a scheduler that has a `plan`
    attribute (see `PriorityScheduler`) only the jobs that changed since its last pass, as plain
    views, instead of every job at every pass.
    """

    def __init__(self, config: SimConfig, jobs: list[Job],
                 milestones: Iterable[float] = ()) -> None:
        self.config = config
        self.jobs = jobs
        self.total_gpus = config.cluster.gpus
        self.free_gpus = self.total_gpus
        self.pool = GpuPool.from_config(config.cluster)   # None: homogeneous
        self.overhead = config.cluster.preemption_overhead_min
        self.queue = EventQueue()
        self.waiting: dict[int, Job] = {}
        self.running: dict[int, Job] = {}
        self.busy_gpu_minutes = 0.0          # integral of allocated GPUs over time
        self._busy_since = 0.0
        self._needs_pass = False
        self._pending: CheckRequest | ScheduleRequest | None = None
        self._pending_job: Job | None = None
        self._finished: list[SchedulerJobView] = []
        self.shown = ShownJobs(jobs)
        self._touch = self.shown.touch
        self._run_seq: dict[int, int] = {}              # start order of the running jobs
        self._starts = 0
        self._lazy = False                               # pending pass built without views
        self._cv_state: tuple | None = None
        self._cv: ClusterView | None = None
        # time slicing: which running jobs get only `share` of their time (`_slice`), taken
        # from the policy's base scheduler (EvalSched) by `adopt`
        self.time_sliced: Callable[[SchedulerJobView], bool] | None = None
        self.share = config.cluster.time_slice_share
        extra = sorted({round(float(m), 10) for m in milestones if 0.0 < m < 1.0})
        largest = max(self.pool.totals) if self.pool else self.total_gpus
        for job in jobs:
            if job.gpus > largest:
                raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs; the cluster "
                                      f"has {largest} of one kind")
            job.checks = merge_checks(job, extra)
            job.check_work = check_work(job)
            self.queue.schedule(job.arrival, ARRIVAL, job.job_id, priority=ARRIVAL)

    # ------------------------------------------------------------------ driving

    @property
    def now(self) -> float:
        return self.queue.now

    @property
    def done(self) -> bool:
        return self._pending is None and not self.queue and not self._needs_pass

    def next_decision(self, views: bool = True) -> CheckRequest | ScheduleRequest | None:
        """Run events until the platform needs an answer; None when every job has ended.

        views=False leaves a scheduling pass's job tuples empty, for a caller that answers it
        with `answer_with_plan` (which views only the jobs that changed)."""
        return self._next(views)

    def _next(self, views: bool) -> CheckRequest | ScheduleRequest | None:
        if self._pending is not None:
            if views and self._lazy:
                self._pending = self._schedule_request()
            return self._pending
        while True:
            if self._needs_pass and self.queue.peek_time() != self.now:
                self._needs_pass = False
                self._pending = self._schedule_request(views)
                return self._pending
            if not self.queue:
                if self.waiting:
                    raise SimulationError(f"{len(self.waiting)} jobs left waiting on an idle "
                                          f"cluster at t={self.now:.1f}: the scheduler never "
                                          "started them")
                return None
            request = self._handle(self.queue.pop())
            if request is not None:
                self._pending = request
                return request

    def answer_check(self, decision: StopDecision) -> None:
        if not isinstance(self._pending, CheckRequest):
            raise SimulationError("answer_check called with no check pending")
        job = self._pending_job
        assert job is not None
        self._pending, self._pending_job = None, None
        follows = after_check(decision.stop, job.next_check, len(job.checks))
        if follows == STOP:
            self._end(job, JobState.STOPPED, reason=decision.reason or "stopped")
        elif follows == COMPLETE:
            self._end(job, JobState.COMPLETED)
        else:
            self._slice(job)
            self._start_phase(job, Phase.TRAIN)

    def answer_schedule(self, allocation: Allocation) -> None:
        if not isinstance(self._pending, ScheduleRequest):
            raise SimulationError("answer_schedule called with no scheduling pass pending")
        self._pending = None
        self._apply(allocation)

    def answer_with_plan(self, planner: Planner) -> None:
        """Answer the pending pass through `planner` (a base scheduler's `plan`), which is shown
        fresh views of only the jobs that changed since its last pass: the same answer as its
        `schedule`, for less work. One planner per run (it keeps an index of the jobs)."""
        if not isinstance(self._pending, ScheduleRequest):
            raise SimulationError("answer_with_plan called with no scheduling pass pending")
        self.answer_schedule(self.shown.plan(planner, self._pending.cluster, self._run_seq,
                                             self._visible))

    def planner_for(self, policy: Any) -> Planner | None:
        """`policy.plan` when it offers one and this cluster can use it (homogeneous GPUs).
        Asking means `policy` allocates here, so the cluster also `adopt`s it."""
        self.adopt(policy)
        return _planner(policy) if self.pool is None else None

    def adopt(self, policy: Any) -> None:
        """Take what the platform does for `policy`'s base scheduler: its time slicing test
        (`time_sliced`, EvalSched's). `run` and `planner_for` call it; a driver answering
        passes with `policy.schedule` itself calls it once before the first decision."""
        self.time_sliced = capabilities(policy).time_sliced

    def run(self, policy: Policy) -> None:
        """Drive the whole run with `policy` answering every request.

        A policy that offers `plan` (a `PriorityScheduler`, or a composition over one) is asked
        through it (`answer_with_plan`).
        """
        planner = self.planner_for(policy)
        while (request := self._next(views=planner is None)) is not None:
            if isinstance(request, CheckRequest):
                self.answer_check(checked_decision(
                    policy.name, policy.on_check(request.job, request.cluster), "on_check"))
            elif planner is not None:
                self.answer_with_plan(planner)
            else:
                self.answer_schedule(policy.schedule(request.cluster, request.waiting,
                                                     request.running))
            if self._finished:
                for view in self.pop_finished():
                    policy.on_job_end(view)

    def _visible(self, job_id: Any) -> Job:
        """A job a planner may be shown: one that has arrived and not ended (waiting or running),
        as a plain scheduling pass would show it; anything else is the planner's error."""
        try:
            job = self.running.get(job_id) or self.waiting.get(job_id)
        except TypeError:   # unhashable
            job = None
        if job is None:
            raise SimulationError(f"planner asked to view job {job_id!r}, which is neither "
                                  "waiting nor running: a planner sees only jobs that have "
                                  "arrived and not ended")
        return job

    def pop_finished(self) -> list[SchedulerJobView]:
        """Views of the jobs that ended since the last call (for detectors that learn from them)."""
        out, self._finished = self._finished, []
        return out

    def cluster_view(self) -> ClusterView:
        by_kind = tuple(self.pool.free) if self.pool is not None else ()
        state = (self.queue.now, self.free_gpus, len(self.waiting), len(self.running), by_kind)
        if state != self._cv_state:   # views are immutable: reuse while nothing changed
            self._cv_state = state
            fresh = ClusterView(state[0], self.total_gpus, *state[1:4])
            if self.pool is not None:
                fresh = replace(fresh, free_by_kind=by_kind,
                                gpus_by_kind=self.pool.totals, kind_speeds=self.pool.speeds)
            self._cv = fresh
        assert self._cv is not None   # built at the first call: _cv_state starts as None
        return self._cv

    def view(self, job_id: int) -> SchedulerJobView:
        return self._view(self.jobs[job_id])

    def _view(self, job: Job) -> SchedulerJobView:
        return self.shown.view(job, self.queue.now)

    # ------------------------------------------------------------------ events

    def _handle(self, event) -> CheckRequest | None:
        job = self.jobs[event.job_id]
        if event.kind == ARRIVAL:
            self.waiting[job.job_id] = job
            self._touch(job.job_id)
            self._needs_pass = True
            return None
        if event.epoch != job.epoch:
            return None  # superseded by a preemption or a stop
        self._touch(job.job_id)
        self._charge(job)
        progress, eval_index = job.checks[job.next_check]
        follows = phase_after(job.phase, eval_index)
        if job.phase == Phase.TRAIN:   # at the check point
            job.progress, job.work = progress, job.check_work[job.next_check]
        if follows == COMPLETE:
            job.next_check += 1
            self._end(job, JobState.COMPLETED)
            return None
        if follows != CHECK:
            self._start_phase(job, Phase(follows))
            return None
        if job.phase == Phase.EVAL:    # its score is known
            return self._check(job, score=float(job.eval_observed[eval_index]))
        return self._check(job, score=None)

    def _check(self, job: Job, score: float | None) -> CheckRequest:
        job.phase = Phase.IDLE
        job.observations.append(Observation(job.progress, self.now, job.loss_at(job.progress),
                                            score))
        job.next_check += 1
        if score is not None:
            self._needs_pass = True  # new information for the scheduler
        self._pending_job = job
        return CheckRequest(self._view(job), self.cluster_view(), score is not None)

    def _start_phase(self, job: Job, phase: Phase) -> None:
        job.phase = phase
        job.phase_start = self.now
        target = job.check_work[job.next_check] if phase == Phase.TRAIN else 0.0
        length = phase_minutes(phase, self.overhead, job.eval_minutes, target, job.work,
                               job.speed, job.duration)
        self.queue.schedule(self.now + length, PHASE_END, job.job_id, job.epoch, PHASE_END)

    def _slice(self, job: Job) -> None:
        """Time slicing, decided at each check: a job `time_sliced` marks keeps its GPUs and
        trains and evaluates at `share` of its speed until its next check (the GPU-minutes it
        holds are charged in full); any other job runs at its full speed."""
        if self.time_sliced is None:
            return
        full = self.pool.speeds[job.kind] if self.pool is not None else 1.0
        job.speed = sliced_speed(full, self.share, self.time_sliced(self._view(job)))

    def _charge(self, job: Job) -> None:
        """Account GPU-minutes of the phase that is ending (or being interrupted) now."""
        elapsed = self.now - job.phase_start
        if elapsed <= 0 or job.phase == Phase.IDLE:
            return
        spent, past_peak, job.work = phase_charge(job.phase, job.gpus, elapsed, job.work,
                                                  job.peak_work, job.speed, job.duration)
        job.gpu_minutes += spent
        job.gpu_minutes_after_peak += past_peak
        if job.phase == Phase.TRAIN:
            job.progress = job.reported_progress(job.work)
        job.phase_start = self.now

    # ------------------------------------------------------------------ scheduling

    def _schedule_request(self, views: bool = True) -> ScheduleRequest:
        """The pass request; with views=False its job tuples are left empty (a planner's pass)."""
        self._lazy = not views
        if not views:
            return ScheduleRequest(self.cluster_view(), (), ())
        view = self._view
        return ScheduleRequest(self.cluster_view(), tuple(view(j) for j in self.waiting.values()),
                               tuple(view(j) for j in self.running.values()))

    def _apply(self, allocation: Allocation) -> None:
        start, preempt, stop = checked_allocation(allocation, self.running, self.waiting,
                                                  self.free_gpus)
        kinds: list[int] = [-1] * len(start)
        if self.pool is not None:
            released = [(self.jobs[j].kind, self.jobs[j].gpus) for j in (*preempt, *stop)
                        if j in self.running]
            kinds = self.pool.place([(j, self.jobs[j].gpus) for j in start],
                                    tuple(allocation.kinds), released)
        for jid in stop:
            self._end(self.jobs[jid], JobState.STOPPED, reason="stopped by scheduler")
        for jid in preempt:
            self._preempt(self.jobs[jid])
        for jid, kind in zip(start, kinds, strict=True):
            self._start(self.jobs[jid], kind)

    def _set_free(self, delta: int, job: Job) -> None:
        if self.pool is not None:
            if delta < 0:
                self.pool.take(job.kind, -delta)
            else:
                self.pool.release(job.kind, delta)
        self.busy_gpu_minutes += (self.total_gpus - self.free_gpus) * (self.now - self._busy_since)
        self._busy_since = self.now
        self.free_gpus += delta
        if not 0 <= self.free_gpus <= self.total_gpus:
            raise SimulationError(f"GPU accounting broke: {self.free_gpus} free of "
                                  f"{self.total_gpus}")

    def _start(self, job: Job, kind: int = -1) -> None:
        del self.waiting[job.job_id]
        self.running[job.job_id] = job
        self._touch(job.job_id)
        self._starts += 1
        self._run_seq[job.job_id] = self._starts
        if self.pool is not None:
            job.kind, job.speed = kind, self.pool.speeds[kind]
        self._set_free(-job.gpus, job)
        job.state = JobState.RUNNING
        if job.first_start is None:
            job.first_start = self.now
        phase = first_phase(job.has_run, self.overhead)
        job.has_run = True
        self._start_phase(job, Phase(phase))

    def _preempt(self, job: Job) -> None:
        self._charge(job)
        self._touch(job.job_id)
        del self.running[job.job_id]
        del self._run_seq[job.job_id]
        self.waiting[job.job_id] = job
        self._set_free(job.gpus, job)
        job.kind = -1
        job.state = JobState.PREEMPTED
        job.phase = Phase.IDLE
        job.epoch += 1
        job.n_preemptions += 1
        self._needs_pass = True

    def _end(self, job: Job, state: JobState, reason: str = "") -> None:
        if job.state.finished:
            raise SimulationError(f"job {job.job_id} ended twice")
        self._charge(job)
        self._touch(job.job_id)
        if job.job_id in self.running:
            del self.running[job.job_id]
            del self._run_seq[job.job_id]
            self._set_free(job.gpus, job)
            job.kind = -1
        else:
            self.waiting.pop(job.job_id, None)
        job.state = state
        job.phase = Phase.IDLE
        job.epoch += 1
        job.end_time = self.now
        job.stop_reason = reason
        self._needs_pass = True
        self._finished.append(self._view(job))


def _planner(policy: Any) -> Planner | None:
    return capabilities(policy).plan
