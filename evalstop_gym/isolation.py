"""The isolated policy runner: an untrusted policy decides in a process of its own.

In one process no object design closes the boundary: a policy can walk `gc.get_objects()` or
the caller's frames (`sys._getframe`) to the live `Cluster` and `Job` records and read their
labels. `IsolatedPolicy` runs the policy in a fresh interpreter (multiprocessing's "spawn", so
nothing of the parent's memory is inherited): the child receives only serialised copies of the
views a policy is shown and returns only its decisions, encoded as JSON (plain strings and ints,
checked here), so nothing it sends back can run code or carry objects into the simulator. Every
object the child can reach was built from views; the jobs, their curves and labels never exist
there. Results are identical to the in-process run (the reference engine asks `schedule` with
the same views the fast path reaches the same answer from).

What this does not do: it is not an operating-system sandbox. A policy that reads files (a
sweep's run files hold past labels) or inspects other processes needs OS isolation as well (a
container or another user, no access to --out). Nor does it hide the workload's recipe: the
simulator is installed in the child too and deterministic, so a policy that guesses the
platform config and the seed (the arrival times of the views pin it) can regenerate the jobs,
labels included, with `generate_workload`. A leaderboard needs seeds its entrants cannot
enumerate (drawn privately, not announced).
"""

from __future__ import annotations

import json
import multiprocessing
import operator
from collections.abc import Sequence
from typing import Any

from .sim.cluster import time_sliced_test
from .sim.protocols import Action, Allocation, Policy, StopDecision
from .sim.view import ClusterView, SchedulerJobView

ALLOCATION_FIELDS = ("start", "preempt", "stop", "kinds")


class PolicyProcessError(RuntimeError):
    """The isolated policy raised, died, or answered something that is not a decision."""


class IsolatedPolicy:
    """A `Policy` whose every call is answered by the wrapped policy in a child process.

    `policy` is a policy name ("EvalStop-2+SRTF-Est"), built in the child, or a picklable policy
    object whose class the child can import. Use as a context manager (or call `close`).
    """

    def __init__(self, policy: str | Policy) -> None:
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self._process = context.Process(target=serve, args=(child_end, policy), daemon=True,
                                        name="evalstop-isolated-policy")
        self._process.start()
        child_end.close()
        name, milestones, sliced = self._call("describe")
        if not isinstance(name, str) or not all(isinstance(m, (int, float)) for m in milestones):
            raise PolicyProcessError(f"isolated policy described itself as {name!r}, "
                                     f"{milestones!r}")
        self.name, self.milestones = name, tuple(float(m) for m in milestones)
        if sliced is True:   # the child's base scheduler time-slices (EvalSched): ask it too
            self.time_sliced = self._time_sliced

    def _time_sliced(self, job: SchedulerJobView) -> bool:
        answer = self._call("time_sliced", job)
        if not isinstance(answer, bool):
            raise PolicyProcessError(f"isolated policy answered time_sliced with {answer!r}")
        return answer

    def on_check(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        action, reason = self._call("on_check", job, cluster)
        try:
            return StopDecision(Action(action), str(reason))
        except ValueError:
            raise PolicyProcessError(f"isolated policy answered a check with {action!r}") \
                from None

    def schedule(self, cluster: ClusterView, waiting: Sequence[SchedulerJobView],
                 running: Sequence[SchedulerJobView]) -> Allocation:
        answer = self._call("schedule", cluster, tuple(waiting), tuple(running))
        if not isinstance(answer, dict) or set(answer) - set(ALLOCATION_FIELDS):
            raise PolicyProcessError(f"isolated policy answered a pass with {answer!r}")
        return Allocation(**{k: _ids(k, answer.get(k, [])) for k in ALLOCATION_FIELDS})

    def on_job_end(self, job: SchedulerJobView) -> None:
        self._call("on_job_end", job)

    def reset(self) -> None:
        self._call("reset")

    def close(self) -> None:
        if self._process.is_alive():
            try:
                self._conn.send(("close", ()))
            except OSError:
                pass
            self._process.join(timeout=5)
            if self._process.is_alive():
                self._process.kill()
                self._process.join()
        self._conn.close()

    def __enter__(self) -> IsolatedPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _call(self, method: str, *args: Any) -> Any:
        try:
            self._conn.send((method, args))
            ok, value = json.loads(self._conn.recv_bytes())
        except (EOFError, OSError, ValueError) as exc:
            raise PolicyProcessError(f"isolated policy process failed during {method} "
                                     f"({type(exc).__name__}: {exc})") from None
        if not ok:
            raise PolicyProcessError(f"isolated policy raised in {method}: {value}")
        return value


def _ids(name: str, raw: Any) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in raw):
        raise PolicyProcessError(f"isolated policy's allocation.{name} is {raw!r}, not job ids")
    return tuple(raw)


# ------------------------------------------------------------------ the child's side

def serve(conn: Any, policy: str | Policy) -> None:
    """The child's loop: views in (from the trusted parent), JSON decisions out."""
    if isinstance(policy, str):
        from evalstop_gym.policies import parse_policy

        policy = parse_policy(policy)
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            return
        if method == "close":
            return
        try:
            reply = [True, _answer(policy, method, args)]
        except Exception as exc:  # reported to the parent, which raises PolicyProcessError
            reply = [False, f"{type(exc).__name__}: {exc}"]
        conn.send_bytes(json.dumps(reply).encode())


def _answer(policy: Policy, method: str, args: tuple) -> Any:
    if method == "describe":
        return [policy.name, [float(m) for m in policy.milestones],
                time_sliced_test(policy) is not None]
    if method == "time_sliced":
        return bool(time_sliced_test(policy)(*args))  # type: ignore[misc]
    if method == "on_check":
        decision = policy.on_check(*args)
        return [Action(decision.action).value, str(decision.reason)]
    if method == "schedule":
        allocation = policy.schedule(*args)
        return {k: [operator.index(x) for x in getattr(allocation, k)]
                for k in ALLOCATION_FIELDS}
    if method in ("on_job_end", "reset"):
        getattr(policy, method)(*args)
        return None
    raise ValueError(f"unknown request {method!r}")
