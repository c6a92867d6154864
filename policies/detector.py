"""Shared base for detectors: the stop rules that compose over any base scheduler."""

from __future__ import annotations

from typing import Any

from evalstop_gym.sim.protocols import CONTINUE, Action, StopDecision, capabilities
from evalstop_gym.sim.view import ClusterView, SchedulerJobView
from evalstop_gym.sim.workload import JOB_TYPES

from .composed import ComposedPolicy

MONITORED = ("rlhf", "dpo")


class DetectorBase:
    """Answers continue/stop per check; subclasses implement `_decide` for monitored jobs."""

    name = "detector"
    milestones: tuple[float, ...] = ()
    types: tuple[str, ...] = MONITORED

    @property
    def needs(self) -> tuple[str, ...]:
        """What it reads: "evals", "loss" (training loss), "progress", "runs" (learns from ended
        runs). A property, so a subclass may answer per instance; most set a class attribute."""
        return ("evals",)

    def decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if job.job_type not in self.types:
            return CONTINUE
        return self._decide(job, cluster)

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        raise NotImplementedError

    def native_rule(self) -> dict[str, Any] | None:
        """This rule as `sim.rules.NativeSpec` fields, for the compiled engine; None: none.

        A rule qualifies only if it decides from the job's view alone, by a `sim.rules`
        function, and learns nothing from ended jobs; only the class that declares it has it
        (`sim.protocols.capabilities`). Such a rule also gives `reason(job_type, value)`: its
        stop reason, from the one number the compiled rule reports (`rules.stop_value`).
        """
        return None

    def on_job_end(self, job: SchedulerJobView) -> None:
        pass

    def reset(self) -> None:
        pass

    def __add__(self, base):
        """`EvalStop(k=2) + SRTFEst()`: this detector composed over a base scheduler."""
        return ComposedPolicy(self, base)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self.name!r})"


def learns_from_runs(detector: Any) -> bool:
    """Whether `detector` learns from ended runs (`on_job_end`), as its `needs` declares
    (`sim.protocols.capabilities`); None (NoStop) learns nothing."""
    return detector is not None and capabilities(detector).learns


def monitored(types: tuple[str, ...], k: dict[str, int] | None = None) -> tuple[int, ...]:
    """Per job type (in `JOB_TYPES` order): its k from `k` (or 1) if in `types`, else 0."""
    return tuple((k or {}).get(t, 1) if t in types else 0 for t in JOB_TYPES)


def stop(reason: str) -> StopDecision:
    return StopDecision(Action.STOP, reason)
