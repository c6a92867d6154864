"""A detector composed over a base scheduler: stop decisions first, then allocation.

As in the paper's Algorithm 1, a job the detector stops is terminated (its GPUs released, its best
checkpoint kept) before the base scheduler runs, so the base sees the updated cluster. What the
composition offers beyond that (the base's incremental pass and time slicing, a compiled form
when both parts have one) is read off its two parts by `sim.protocols.capabilities`.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstop_gym.sim.protocols import (
    Allocation,
    BaseScheduler,
    Detector,
    StopDecision,
    checked_decision,
)
from evalstop_gym.sim.view import ClusterView, SchedulerJobView


class ComposedPolicy:
    """A detector over a base scheduler: `detector + base`, or the name "Detector+Base".

    The paper's Algorithm 1: jobs the detector stops are terminated (GPUs freed, best
    checkpoint kept) before the base scheduler allocates, so any detector composes with any base.
    """

    def __init__(self, detector: Detector, base: BaseScheduler):
        self.detector = detector
        self.base = base
        self.name = f"{detector.name}+{base.name}"
        self.milestones = tuple(detector.milestones)

    def on_check(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        return checked_decision(self.detector.name, self.detector.decide(job, cluster))

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation:
        return self.base.schedule(cluster, waiting, running)

    def on_job_end(self, job: SchedulerJobView) -> None:
        self.detector.on_job_end(job)

    def reset(self) -> None:
        self.detector.reset()
        self.base.reset()

    def __repr__(self) -> str:
        return f"ComposedPolicy({self.detector!r}, {self.base!r})"
