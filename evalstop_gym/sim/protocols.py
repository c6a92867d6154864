"""What the cluster asks of a policy, and the shape of the answers.

A base scheduler answers "which waiting jobs start, which running jobs are preempted"; a detector
answers "continue or stop" for one job when it reaches a check (an eval result, or a progress
milestone the detector asked for), with a short reason. A `Policy` is what the cluster talks to:
a base scheduler alone, or a detector composed over one.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

from .view import ClusterView, SchedulerJobView


class Action(str, enum.Enum):
    CONTINUE = "continue"
    STOP = "stop"


class StopDecision(NamedTuple):
    action: Action
    reason: str = ""

    @property
    def stop(self) -> bool:
        return self.action is Action.STOP


CONTINUE = StopDecision(Action.CONTINUE)


class Allocation(NamedTuple):
    """Applied in this order: stop, preempt, start. Job ids only.

    `kinds`, on a heterogeneous cluster, names the GPU kind of each started job (same order as
    `start`); left empty, each goes to the fastest kind with room.
    """

    start: tuple[int, ...] = ()
    preempt: tuple[int, ...] = ()
    stop: tuple[int, ...] = ()
    kinds: tuple[int, ...] = ()


# The optional fast path of a base scheduler (see `policies.base.PriorityScheduler.plan`): given
# the cluster, fresh views of the jobs changed since its last pass (with each running job's start
# order, -1 if not running) and whether this is the first pass, it yields job ids it needs
# re-viewed and returns the allocation.
Planner = Callable[[ClusterView, Sequence[tuple[SchedulerJobView, int]], bool],
                   Generator[int, SchedulerJobView, Allocation]]


@runtime_checkable
class BaseScheduler(Protocol):
    name: str

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation: ...

    def reset(self) -> None: ...


@runtime_checkable
class Detector(Protocol):
    name: str
    milestones: tuple[float, ...]   # extra progress points (besides evals) it wants to be asked at

    def decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision: ...

    def on_job_end(self, job: SchedulerJobView) -> None: ...

    def reset(self) -> None: ...


@runtime_checkable
class Policy(Protocol):
    name: str
    milestones: tuple[float, ...]

    def on_check(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision: ...

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation: ...

    def on_job_end(self, job: SchedulerJobView) -> None: ...

    def reset(self) -> None: ...
