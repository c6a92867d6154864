"""A run's jobs as arrays: what every `Job` of a workload is made from, a row per job.

The workload is drawn straight into this structure (`evalstop_gym.workloads.draw_workload`), so
the compiled engine can be loaded from it without building a record per job; `jobs_of` makes
the records from it for the reference engine and the scoring, `arrays_of` the other way round
(the compiled engine's packer reads arrays only, `packing.py`). Ragged parts (each job's curve
parameters and its evals) are laid end to end with offsets, as the engine lays out checks.
A source of jobs (synthetic or a trace) gives `Specs`, a source of curves (formulas or the
corpus) `Curves`; `sim.workload.finish_arrays` joins them with the step-time jitter.
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .jobs import JOB_TYPES, Job


class Specs(NamedTuple):
    """What a workload source decides about its jobs before their curves are drawn, a row per
    job in job-id order."""

    tenant: np.ndarray      # int64
    jtype: np.ndarray       # int64: index in JOB_TYPES
    arrival: np.ndarray     # minutes
    duration: np.ndarray    # true training minutes
    gpus: np.ndarray        # int64
    is_hacking: np.ndarray  # the source's label (a corpus run brings its own)


class Curves(NamedTuple):
    """What a curve source draws for the jobs of `Specs`: labels, curves and what evals report."""

    is_hacking: np.ndarray
    peak_progress: np.ndarray
    eval_min: np.ndarray
    loss_params: np.ndarray      # (n, 4)
    curve_ptr: np.ndarray        # (n + 1) offsets into curve_params
    curve_params: np.ndarray
    eval_true: np.ndarray        # (n, evals)
    eval_observed: np.ndarray    # (n, evals)


class WorkloadArrays(NamedTuple):
    """The jobs of one run in job-id order (job k is row k)."""

    tenant: np.ndarray         # int64
    jtype: np.ndarray          # int64: index in JOB_TYPES
    gpus: np.ndarray           # int64
    arrival: np.ndarray        # minutes
    duration: np.ndarray       # true training minutes (hidden)
    dur_est: np.ndarray        # the type's duration estimate (visible)
    eval_min: np.ndarray       # minutes one eval takes
    is_hacking: np.ndarray     # bool (hidden)
    peak_progress: np.ndarray  # true peak's progress (hidden; 1.0 when healthy)
    peak_work: np.ndarray      # share of the training minutes spent by the peak
    paced: np.ndarray          # bool: step time jitters, `eval_work` holds its work
    loss_params: np.ndarray    # (n, 4): the loss curve's parameters (curves.LOSS_PARAMS)
    curve_ptr: np.ndarray      # (n + 1) offsets into curve_params
    curve_params: np.ndarray   # each job's curve parameters, end to end
    schedule: np.ndarray       # int64: index of the job's eval schedule
    sched_ptr: np.ndarray      # (schedules + 1) offsets into points
    points: np.ndarray         # each schedule's eval points (progress), end to end
    ev_ptr: np.ndarray         # (n + 1) offsets of each job's evals (one per eval point)
    eval_true: np.ndarray      # noiseless score at each eval (hidden)
    eval_observed: np.ndarray  # what each eval reports
    eval_work: np.ndarray      # work done at each eval (NaN for a job that is not paced)

    @property
    def n_jobs(self) -> int:
        return len(self.arrival)

    def schedule_points(self, s: int) -> np.ndarray:
        return self.points[self.sched_ptr[s]:self.sched_ptr[s + 1]]

    def eval_points_flat(self) -> np.ndarray:
        """Each job's eval points, end to end (aligned with eval_true: the ev_ptr spans)."""
        job = np.repeat(np.arange(self.n_jobs), np.diff(self.ev_ptr))
        at = np.arange(len(job)) - self.ev_ptr[job]
        return self.points[self.sched_ptr[self.schedule[job]] + at]

    def planned_gpu_minutes(self) -> np.ndarray:
        """`Job.planned_gpu_minutes` of every job (the same float operations)."""
        return self.gpus * (self.duration + np.diff(self.ev_ptr) * self.eval_min)


def one_schedule(points: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """The schedule fields of `n` jobs that all evaluate at `points`."""
    return {"schedule": np.zeros(n, np.int64), "sched_ptr": np.array([0, len(points)], np.int64),
            "points": points, "ev_ptr": np.arange(n + 1, dtype=np.int64) * len(points)}


def jobs_of(w: WorkloadArrays) -> list[Job]:
    """The job records of `w`, field for field what the drawing of the run made: jobs that share
    a schedule share its points array, a job's evals are views of the flat arrays."""
    schedules = [w.schedule_points(s) for s in range(len(w.sched_ptr) - 1)]
    ev, cp = w.ev_ptr.tolist(), w.curve_ptr.tolist()
    curve = w.curve_params.tolist()
    jobs = []
    for k, (tenant, jtype, gpus, arrival, dur_est, duration, hacking, peak, eval_min, loss,
            sched) in enumerate(zip(
                w.tenant.tolist(), w.jtype.tolist(), w.gpus.tolist(), w.arrival.tolist(),
                w.dur_est.tolist(), w.duration.tolist(), w.is_hacking.tolist(),
                w.peak_progress.tolist(), w.eval_min.tolist(), w.loss_params.tolist(),
                w.schedule.tolist(), strict=True)):
        lo, hi = ev[k], ev[k + 1]
        jobs.append(Job(
            job_id=k, tenant=tenant, job_type=JOB_TYPES[jtype], gpus=gpus, arrival=arrival,
            duration_estimate=dur_est, duration=duration, is_hacking=hacking,
            peak_progress=peak, eval_points=schedules[sched], eval_true=w.eval_true[lo:hi],
            eval_observed=w.eval_observed[lo:hi], eval_minutes=eval_min,
            loss_params=tuple(loss), curve_params=tuple(curve[cp[k]:cp[k + 1]])))
    for k, peak_work in zip(np.flatnonzero(w.paced).tolist(),
                            w.peak_work[w.paced].tolist(), strict=True):
        jobs[k].set_pace(w.eval_work[ev[k]:ev[k + 1]], peak_work)
    return jobs


def arrays_of(jobs: list[Job]) -> WorkloadArrays:
    """`jobs` as arrays (the inverse of `jobs_of`); jobs share a schedule when they share
    the points array, as the packer groups them."""
    where: dict[int, int] = {}
    schedules: list[np.ndarray] = []
    for job in jobs:
        if id(job.eval_points) not in where:
            where[id(job.eval_points)] = len(schedules)
            schedules.append(np.asarray(job.eval_points, np.float64))
    n_evals = np.array([len(j.eval_points) for j in jobs], np.int64)
    n_curve = np.array([len(j.curve_params) for j in jobs], np.int64)

    def flat(values: list) -> np.ndarray:
        return np.concatenate(values).astype(np.float64) if values else np.zeros(0)

    return WorkloadArrays(
        tenant=np.array([j.tenant for j in jobs], np.int64),
        jtype=np.array([JOB_TYPES.index(j.job_type) for j in jobs], np.int64),
        gpus=np.array([j.gpus for j in jobs], np.int64),
        arrival=np.array([j.arrival for j in jobs], np.float64),
        duration=np.array([j.duration for j in jobs], np.float64),
        dur_est=np.array([j.duration_estimate for j in jobs], np.float64),
        eval_min=np.array([j.eval_minutes for j in jobs], np.float64),
        is_hacking=np.array([j.is_hacking for j in jobs], np.bool_),
        peak_progress=np.array([j.peak_progress for j in jobs], np.float64),
        peak_work=np.array([j.peak_work for j in jobs], np.float64),
        paced=np.array([j.eval_work is not None for j in jobs], np.bool_),
        loss_params=np.array([j.loss_params for j in jobs], np.float64).reshape(len(jobs), 4),
        curve_ptr=np.concatenate([[0], np.cumsum(n_curve)]).astype(np.int64),
        curve_params=flat([np.asarray(j.curve_params, np.float64) for j in jobs]),
        schedule=np.array([where[id(j.eval_points)] for j in jobs], np.int64),
        sched_ptr=np.concatenate([[0], np.cumsum([len(p) for p in schedules])]).astype(np.int64),
        points=flat(schedules),
        ev_ptr=np.concatenate([[0], np.cumsum(n_evals)]).astype(np.int64),
        eval_true=flat([j.eval_true for j in jobs]),
        eval_observed=flat([j.eval_observed for j in jobs]),
        eval_work=flat([j.eval_work if j.eval_work is not None
                        else np.full(len(j.eval_points), np.nan) for j in jobs]))
