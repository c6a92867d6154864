"""Shared machinery for base schedulers: order jobs by a key, then fill the GPUs greedily."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from evalstop_gym.sim.protocols import CONTINUE, Allocation, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView


class PriorityScheduler:
    """A base scheduler defined by a sort key (smaller runs first) and whether it preempts.

    Non-preemptive: waiting jobs are started in key order into the free GPUs, skipping any that do
    not fit (backfilling). Preemptive: running and waiting jobs are ranked together and the
    cluster is refilled from the top; running jobs that fall out are preempted.
    Ties break on arrival time, then job id, so decisions are deterministic.
    """

    name = "priority"
    preemptive = False
    milestones: tuple[float, ...] = ()

    def key(self, job: SchedulerJobView) -> Any:
        raise NotImplementedError

    def _rank(self, jobs: Sequence[SchedulerJobView]) -> list[SchedulerJobView]:
        return sorted(jobs, key=lambda j: (self.key(j), j.arrival_time, j.job_id))

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation:
        if not self.preemptive:
            chosen = _fill(self._rank(waiting), cluster.free_gpus)
            return Allocation(start=tuple(j.job_id for j in chosen))
        keep = {j.job_id for j in _fill(self._rank([*running, *waiting]), cluster.total_gpus)}
        return Allocation(start=tuple(j.job_id for j in self._rank(waiting) if j.job_id in keep),
                          preempt=tuple(j.job_id for j in running if j.job_id not in keep))

    # A base scheduler alone is a complete policy that never stops a job.
    def on_check(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        pass

    def reset(self) -> None:
        pass

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _fill(ranked: Sequence[SchedulerJobView], capacity: int) -> list[SchedulerJobView]:
    chosen = []
    for job in ranked:
        if job.gpus <= capacity:
            chosen.append(job)
            capacity -= job.gpus
    return chosen
