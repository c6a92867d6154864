"""A job's check points: where it stops to be evaluated or asked (its evals, a policy's milestones,
its completion), and the work done at each, which both engines store so they agree to the bit.
"""

from __future__ import annotations

import numpy as np

from .jobs import Job
from .pace import work_at
from .rules import ROUNDING
from .transitions import COMPLETION, MILESTONE


def merge_checks(job: Job, milestones: list[float]) -> list[tuple[float, int]]:
    """The job's check points: its evals, plus policy milestones that are not eval points."""
    checks = [(float(p), i) for i, p in enumerate(job.eval_points)]
    evals = {round(float(p), 10) for p in job.eval_points}
    checks += [(m, MILESTONE) for m in milestones if m not in evals]
    checks.sort()
    if not checks or checks[-1][0] < 1.0 - ROUNDING:
        checks.append((1.0, COMPLETION))
    return checks


def check_work(job: Job) -> list[float]:
    """The work done at each of the job's checks (its progress when it is evenly paced)."""
    return check_work_rows([job], np.array([p for p, _ in job.checks]))[0].tolist()


def check_work_rows(jobs: list[Job], progress: np.ndarray) -> np.ndarray:
    """The work done at check points `progress` by each of `jobs` (which share eval points), a
    row per job: what both engines store, so they agree to the bit."""
    work = np.tile(progress, (len(jobs), 1))
    paced = [(k, job.eval_work) for k, job in enumerate(jobs) if job.eval_work is not None]
    if paced:
        work[[k for k, _ in paced]] = work_at(jobs[0].eval_points,
                                              np.stack([w for _, w in paced]), progress)
    return work
