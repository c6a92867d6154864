"""Shared base for detectors: the stop rules that compose over any base scheduler."""

from __future__ import annotations

from evalstop_gym.sim.protocols import CONTINUE, Action, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

MONITORED = ("rlhf", "dpo")


class DetectorBase:
    """Answers continue/stop per check; subclasses implement `_decide` for monitored jobs."""

    name = "detector"
    milestones: tuple[float, ...] = ()
    types: tuple[str, ...] = MONITORED

    def decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if job.job_type not in self.types:
            return CONTINUE
        return self._decide(job, cluster)

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        raise NotImplementedError

    def on_job_end(self, job: SchedulerJobView) -> None:
        pass

    def reset(self) -> None:
        pass

    def __add__(self, base):
        """`EvalStop(k=2) + SRTFEst()`: this detector composed over a base scheduler."""
        from .composed import ComposedPolicy

        return ComposedPolicy(self, base)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def stop(reason: str) -> StopDecision:
    return StopDecision(Action.STOP, reason)
