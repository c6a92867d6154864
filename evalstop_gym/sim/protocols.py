"""What the cluster asks of a policy, and the shape of the answers.

A base scheduler answers "which waiting jobs start, which running jobs are preempted"; a detector
answers "continue or stop" for one job when it reaches a check (an eval result, or a progress
milestone the detector asked for), with a short reason. A `Policy` is what the cluster talks to:
a base scheduler alone, or a detector composed over one.

Beyond those, a policy may offer optional capabilities, each declared below as a protocol:
an incremental scheduling pass (`Planned`), time slicing (`TimeSliced`), a compiled form
(`CompiledKey` for a base scheduler, `CompiledRule` for a detector), what a detector watches and
reads (`Monitoring`), and composition (`Composed`). `capabilities(policy)` is the one place that
answers them, for any policy, composition or detector; every consumer asks it.
"""

from __future__ import annotations

import enum
from collections.abc import Callable, Generator, Sequence
from typing import Any, NamedTuple, Protocol, runtime_checkable

from .rules import NativeSpec
from .view import ClusterView, SchedulerJobView
from .workload import JOB_TYPES


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


class PolicyAnswerError(TypeError):
    """A policy or detector answered something that is not what its protocol returns."""


def checked_decision(owner: str, decision: object, method: str = "decide") -> StopDecision:
    """`decision` when it is a StopDecision; anything else (None, 'stop', 1, True, a tuple, a
    dict) is a one-line PolicyAnswerError naming `owner` and what `method` must return."""
    if isinstance(decision, StopDecision) and isinstance(decision.action, Action):
        return decision
    shown = repr(decision)
    shown = shown if len(shown) <= 60 else f"{shown[:57]}..."
    raise PolicyAnswerError(f"{owner!r}: {method} returned {shown} ({type(decision).__name__}); "
                            f"expected a StopDecision: CONTINUE, or stop('reason') from "
                            f"evalstop_gym.policies.detector")


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


# ---------------------------------------------------------------------------- capabilities


@runtime_checkable
class Composed(Protocol):
    """A detector over a base scheduler (`policies.ComposedPolicy`)."""

    detector: Detector
    base: BaseScheduler


@runtime_checkable
class Planned(Protocol):
    """A base scheduler with an incremental pass (`Planner`); None when it offers none."""

    plan: Planner | None


@runtime_checkable
class TimeSliced(Protocol):
    """A scheduler whose running jobs the platform may run at their slice share (EvalSched)."""

    def time_sliced(self, job: SchedulerJobView) -> bool: ...


@runtime_checkable
class CompiledKey(Protocol):
    """A base scheduler whose key is a `rules` KEY_* code (None: none) and whose pass is the
    plain priority pass, preemptive or not; `key_rises_at_checks` declares that a running job's
    key may rise at a check (it reads the history), so the compiled pass must re-key it there;
    `key_rises_while_running` that it rises as the job runs, so every pass re-keys them all."""

    native_key: int | None
    preemptive: bool
    key_rises_at_checks: bool
    key_rises_while_running: bool


@runtime_checkable
class CompiledRule(Protocol):
    """A detector whose rule is a `rules` RULE_*: `native_rule()` gives its `NativeSpec` fields
    (None: none) and `reason` its stop reason from the one number the rule reports."""

    def native_rule(self) -> dict[str, Any] | None: ...

    def reason(self, job_type: str, value: float) -> str: ...


@runtime_checkable
class Monitoring(Protocol):
    """The job types a detector may stop, and what it reads: "evals", "loss", "progress",
    "runs" (it learns from ended runs through `on_job_end`)."""

    types: tuple[str, ...]
    needs: tuple[str, ...]


@runtime_checkable
class PeerJudged(Protocol):
    """A detector that judges a run only against ended peer runs (MedianPruner): it can never
    stop a run until `has_peers` says enough of them have ended."""

    def has_peers(self, job_type: str) -> bool: ...


class Capabilities(NamedTuple):
    """What a policy (or a detector alone) offers beyond the protocol's six members."""

    plan: Planner | None                                      # the base's incremental pass
    time_sliced: Callable[[SchedulerJobView], bool] | None     # the platform's slicing test
    native: NativeSpec | None                                  # its compiled form
    reason: Callable[[str, float], str] | None                 # compiled stops' reasons
    types: tuple[str, ...]                                     # job types it may stop
    needs: tuple[str, ...]                                     # what it reads
    learns: bool                                               # it learns from ended runs
    has_peers: Callable[[str], bool] | None                    # PeerJudged: enough peers?


def capabilities(policy: object) -> Capabilities:
    """The capabilities of a policy, a composition (its detector's and its base's) or a detector.

    A compiled form belongs to the class that declares it (`native_key`, `native_rule` in the
    class's own body): a subclass may change the key, the pass or the rule, so it inherits none.
    """
    detector: object | None
    base: object | None
    if isinstance(policy, Composed):
        detector, base = policy.detector, policy.base
    elif isinstance(policy, Detector) and not isinstance(policy, BaseScheduler):
        detector, base = policy, None
    else:
        detector, base = None, policy
    plan = base.plan if isinstance(base, Planned) else None
    sliced = next((part.time_sliced for part in (policy, base) if isinstance(part, TimeSliced)),
                  None)
    native = None
    if isinstance(base, CompiledKey) and _own(base, "native_key") and base.native_key is not None:
        native = NativeSpec(key=base.native_key, preemptive=base.preemptive,
                            time_sliced=sliced is not None,
                            rekeys_at_checks=base.key_rises_at_checks,
                            rekeys_at_passes=base.key_rises_while_running)
    rule = (detector.native_rule() if isinstance(detector, CompiledRule)
            and _own(detector, "native_rule") else None)
    if detector is not None:
        native = None if native is None or rule is None else native._replace(**rule)
    monitors = next((p for p in (detector, policy) if isinstance(p, Monitoring)), None)
    needs = monitors.needs if monitors is not None else ("evals",)
    return Capabilities(
        plan if callable(plan) else None, sliced, native,
        detector.reason if native is not None and isinstance(detector, CompiledRule) else None,
        monitors.types if monitors is not None else JOB_TYPES, needs, "runs" in needs,
        detector.has_peers if isinstance(detector, PeerJudged) else None)


def _own(obj: object, name: str) -> bool:
    return name in vars(type(obj))
