"""Shared machinery for base schedulers: order jobs by a key, then fill the GPUs greedily."""

from __future__ import annotations

from collections.abc import Generator, Sequence
from typing import Any

from evalstop_gym.sim.protocols import CONTINUE, Allocation, Planner, StopDecision
from evalstop_gym.sim.rules import priority_key
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .priority_index import PriorityIndex


class PriorityScheduler:
    """A base scheduler defined by a sort key (smaller runs first) and whether it preempts.

    The paper's schedulers declare their key as a `sim.rules` code (`native_key`), which is also
    their compiled form (see `sim.protocols.capabilities`); others override `key`.

    Non-preemptive: waiting jobs are started in key order into the free GPUs, skipping any that do
    not fit (backfilling). Preemptive: running and waiting jobs are ranked together and the
    cluster is refilled from the top; running jobs that fall out are preempted.
    Ties break on arrival time, then job id, so decisions are deterministic.

    `incremental = True` declares that the key of a waiting job depends only on its (frozen) view
    and that a running job's key never increases between two of its checks or phase changes. The
    cluster may then drive the scheduler through `plan`, which gives the very same allocations
    from a `PriorityIndex` kept up to date with job changes, at a cost per pass that does not grow
    with the number of queued jobs. The index ranks keys as the compiled engine does, as float
    pairs: such a key must be a number or a (major, minor) pair of numbers (another key is a
    TypeError at the first pass; leave `incremental` False and `schedule` ranks any key).
    """

    name = "priority"
    preemptive = False
    incremental = False
    milestones: tuple[float, ...] = ()
    native_key: int | None = None   # `key` as a `sim.rules` KEY_* code
    key_rises_at_checks = False     # its key reads the history: it may rise at a check
    key_rises_while_running = False  # it grows as the job runs (so not `incremental`)
    _index: PriorityIndex | None = None

    def key(self, job: SchedulerJobView) -> Any:
        """`rules.priority_key` of the declared code, (major, minor): the compiled engine's."""
        if self.native_key is None:
            raise NotImplementedError(f"{type(self).__name__}: set native_key or override key")
        return priority_key(self.native_key, job.arrival_time, job.duration_estimate,
                            job.progress, job.loss_history, job.eval_scores,
                            job.gpus * job.attained_minutes)

    def _rank(self, jobs: Sequence[SchedulerJobView]) -> list[SchedulerJobView]:
        return sorted(jobs, key=lambda j: (self.key(j), j.arrival_time, j.job_id))

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation:
        if cluster.free_by_kind:
            return self._schedule_kinds(cluster, waiting, running)
        if not self.preemptive:
            chosen = _fill(self._rank(waiting), cluster.free_gpus)
            return Allocation(start=tuple(j.job_id for j in chosen))
        keep = {j.job_id for j in _fill(self._rank([*running, *waiting]), cluster.total_gpus)}
        return Allocation(start=tuple(j.job_id for j in self._rank(waiting) if j.job_id in keep),
                          preempt=tuple(j.job_id for j in running if j.job_id not in keep))

    def _schedule_kinds(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                        running: Sequence[SchedulerJobView]) -> Allocation:
        """The same policy on a heterogeneous cluster: each job fills one kind, fastest first.

        Running jobs stay on the kind they hold (no migration); a preemptive pass refills every
        kind from the top of the ranking, so a running job that no longer fits is preempted.
        """
        if not self.preemptive:
            chosen = _fill_kinds(self._rank(waiting), cluster, list(cluster.free_by_kind))
            return Allocation(start=tuple(j.job_id for j, _ in chosen),
                              kinds=tuple(k for _, k in chosen))
        chosen = _fill_kinds(self._rank([*running, *waiting]), cluster,
                             list(cluster.gpus_by_kind))
        kept = {j.job_id for j, _ in chosen}
        starts = [(j, k) for j, k in chosen if j.state != "running"]
        return Allocation(start=tuple(j.job_id for j, _ in starts),
                          preempt=tuple(j.job_id for j in running if j.job_id not in kept),
                          kinds=tuple(k for _, k in starts))

    @property
    def plan(self) -> Planner | None:
        """The cluster's optional fast path (see the class docstring); None when not declared."""
        return self._plan if self.incremental else None

    def _plan(self, cluster: ClusterView, changes: Sequence[tuple[SchedulerJobView, int]],
              restart: bool) -> Generator[int, SchedulerJobView, Allocation]:
        """Sync the index with the jobs that changed, then allocate (yielding ids to re-view)."""
        if restart or self._index is None:
            self._index = PriorityIndex(self.key, self.preemptive)
        for view, run_seq in changes:
            self._index.update(view, run_seq)
        return (yield from self._index.allocate(cluster))

    # A base scheduler alone is a complete policy that never stops a job.
    def on_check(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        return CONTINUE

    def on_job_end(self, job: SchedulerJobView) -> None:
        pass

    def reset(self) -> None:
        self._index = None

    def __repr__(self) -> str:
        return f"{type(self).__name__}()"


def _fill_kinds(ranked: Sequence[SchedulerJobView], cluster: ClusterView,
                capacity: list[int]) -> list[tuple[SchedulerJobView, int]]:
    """Greedy fill per GPU kind: a running job keeps its kind, others take the fastest with room."""
    order = sorted(range(len(capacity)), key=lambda k: (-cluster.kind_speeds[k], k))
    chosen = []
    for job in ranked:
        if job.state == "running":
            fits = [job.gpu_kind] if capacity[job.gpu_kind] >= job.gpus else []
        else:
            fits = [k for k in order if capacity[k] >= job.gpus][:1]
        if fits:
            capacity[fits[0]] -= job.gpus
            chosen.append((job, fits[0]))
    return chosen


def _fill(ranked: Sequence[SchedulerJobView], capacity: int) -> list[SchedulerJobView]:
    chosen = []
    for job in ranked:
        if job.gpus <= capacity:
            chosen.append(job)
            capacity -= job.gpus
    return chosen
