"""What the cluster shows its schedulers of the jobs: views, cached while unchanged, and a log
of changes so that a planner is shown only the jobs changed since its last pass.

A view is immutable, so an idle job's view is reused until the job changes (every change is
`touch`ed); a job in a phase is viewed afresh, since its attained service grows with the clock.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from .jobs import Job, Phase
from .protocols import Allocation, Planner
from .view import ClusterView, SchedulerJobView, make_view


class ShownJobs:
    """The change log (one job id per entry) and the views built from it, for one run."""

    def __init__(self, jobs: list[Job]) -> None:
        self.jobs = jobs
        self._log: list[int] = []                        # ids of jobs as they change
        self._cursor = 0                                 # log length at the planner's last pass
        self._stamp = [-1] * len(jobs)                   # log length at each job's last change
        self._views: dict[int, tuple[int, SchedulerJobView]] = {}  # idle jobs' views

    def touch(self, job_id: int) -> None:
        """Note that a job changed (its cached view is stale; planners must re-view it)."""
        self._stamp[job_id] = len(self._log)
        self._log.append(job_id)

    def view(self, job: Job, now: float) -> SchedulerJobView:
        """`make_view` at now, reusing the last view of a job idle and unchanged since."""
        if job.phase != Phase.IDLE:
            return make_view(job, now)
        stamp = self._stamp[job.job_id]
        cached = self._views.get(job.job_id)
        if cached is not None and cached[0] == stamp:
            return cached[1]
        view = make_view(job, now)
        self._views[job.job_id] = (stamp, view)
        return view

    def plan(self, planner: Planner, cluster: ClusterView, run_seq: dict[int, int],
             visible: Callable[[Any], Job]) -> Allocation:
        """Ask `planner` for this pass, with fresh views of the jobs changed since its last
        (`run_seq`: the running jobs' start order; `visible`: the job a planner may view)."""
        start, self._cursor = self._cursor, len(self._log)
        now = cluster.now
        changes = [(self.view(self.jobs[jid], now), run_seq.get(jid, -1))
                   for jid in dict.fromkeys(self._log[start:])]
        gen = planner(cluster, changes, start == 0)
        try:
            jid = next(gen)
            while True:
                jid = gen.send(self.view(visible(jid), now))
        except StopIteration as done:
            return done.value
