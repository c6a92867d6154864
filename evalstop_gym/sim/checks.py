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
    return check_points(job.eval_points, milestones)


def check_points(points: np.ndarray, milestones: list[float]) -> list[tuple[float, int]]:
    """The check points of a job evaluated at `points`: (progress, eval index), plus the policy
    milestones that are not eval points, plus completion when no eval falls on 1."""
    checks = [(float(p), i) for i, p in enumerate(points)]
    evals = {round(float(p), 10) for p in points}
    checks += [(m, MILESTONE) for m in milestones if m not in evals]
    checks.sort()
    if not checks or checks[-1][0] < 1.0 - ROUNDING:
        checks.append((1.0, COMPLETION))
    return checks


def check_work(job: Job) -> list[float]:
    """The work done at each of the job's checks (its progress when it is evenly paced)."""
    paced = np.array([job.eval_work is not None])
    rows = np.asarray(job.eval_work)[None, :] if paced[0] else np.zeros((0, 0))
    return work_rows(job.eval_points, rows, paced, np.array([p for p, _ in job.checks]))[0].tolist()


def work_rows(points: np.ndarray, paced_work: np.ndarray, paced: np.ndarray,
              progress: np.ndarray) -> np.ndarray:
    """The work done at check points `progress` by jobs evaluated at `points`, a row per job:
    a job's progress, or where `paced`, read off its row of `paced_work` (the work at each eval
    point, a row per paced job). What both engines store, so they agree to the bit."""
    work = np.tile(progress, (len(paced), 1))
    if paced.any():
        work[np.flatnonzero(paced)] = work_at(points, paced_work, progress)
    return work
