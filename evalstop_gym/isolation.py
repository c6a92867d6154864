"""The isolated policy runner: an untrusted policy decides in a process of its own.

In one process no object design closes the boundary: a policy can walk `gc.get_objects()` or
the caller's frames (`sys._getframe`) to the live `Cluster` and `Job` records and read their
labels. `IsolatedPolicy` runs the policy in a fresh interpreter (multiprocessing's "spawn", so
nothing of the parent's memory is inherited): the child receives only serialised copies of the
views a policy is shown and returns only its decisions, encoded as JSON (plain strings and ints,
checked here), so nothing it sends back can run code or carry objects into the simulator. Every
object the child can reach was built from views; the jobs, their curves and labels never exist
there. Results are identical to the in-process run (the reference engine asks `schedule` with
the same views the fast path reaches the same answer from). Every wait on the child has a
deadline (`timeout` seconds per decision, default `DEFAULT_TIMEOUT_S`): a policy that does not
answer in time has its process killed and the run fails with `PolicyTimeout`.

Views alone do not hide a job's label from a policy that can recompute or look it up, so a
`sandbox` child (what `simulate(..., private_seeds=True)` and `--private-seeds` use) also:
starts in an empty temporary working directory; on POSIX, when the parent runs as root, drops
to the unprivileged user `nobody` before the policy is unpickled, so it reads only
world-readable files (the runner makes a private sweep's --out readable by its owner alone);
and never receives the seed secret (`private_seeds.SeedSecret`: it stays in the parent, and
its environment variables are removed from the child's environment). The workload seed is then
`SeedSecret.workload_seed(seed)`, 128 bits the policy cannot enumerate, so the installed,
deterministic simulator cannot regenerate the jobs (`generate_workload`) from a guessed seed.

What this does NOT prevent: run as another user than root, the child cannot drop privileges and
reads whatever that user can (a key file, earlier results, the parent's environment through
/proc); every world-readable file stays readable, among them the package's data (the shipped
corpus, unless the package is installed privately: the required `curves.corpus_noise: added`
hides a run's values, but a few noisy evals still match it) and results folders other than
--out; timing (how long the parent takes between calls), the machine's load and the network
are not hidden; a policy may still spawn processes of its own. It is not an operating-system
sandbox: for hostile code use a container or VM as well. Where Python itself is readable by
root alone, a policy as `nobody` imports only what its process loaded before dropping
privileges (numpy, evalstop_gym and its policies; a warning says so).

A policy named by a registered name from the user's own code (`--import mine.py`) is built after
the child imports that code (`imports`), inside the sandbox and within the first answer's
deadline. As `nobody` the child reads only world-readable files, so the user's files are checked
for that before the child starts (`check_readable_by_sandbox`, which reads, never imports). With
private seeds the trusted side never imports the user's files at all: their names are checked
and their digests (the runs' cache key) taken in a sandboxed child too (`sandboxed_sources`).
Without them (`--isolate` alone) the sweep imports them to check names: trusted code only.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import logging
import math
import multiprocessing
import operator
import os
import pickle
import shutil
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

from .experiment import is_file_ref, split_policy, user_target
from .private_seeds import SECRET_ENV, SECRET_FILE_ENV, readable_by_others, warn_once
from .sim.protocols import Action, Allocation, Policy, StopDecision, capabilities
from .sim.view import ClusterView, SchedulerJobView

log = logging.getLogger(__name__)

ALLOCATION_FIELDS = ("start", "preempt", "stop", "kinds")
DEFAULT_TIMEOUT_S = 30.0   # per decision: heuristics answer in microseconds, a model in ms
STARTUP_S = 120.0   # added to the first answer's deadline: a fresh interpreter imports numpy
UNPRIVILEGED_USER = "nobody"
_ENV_LOCK = threading.Lock()


class PolicyProcessError(RuntimeError):
    """The isolated policy raised, died, or answered something that is not a decision."""


class PolicyTimeout(PolicyProcessError):
    """The isolated policy did not answer within its deadline (its process was killed)."""


def check_timeout(timeout: Any) -> float:
    """`timeout` (seconds per decision) as a float > 0; None is the default."""
    if timeout is None:
        return DEFAULT_TIMEOUT_S
    if isinstance(timeout, bool) or not isinstance(timeout, (int, float)) \
            or not math.isfinite(timeout) or timeout <= 0:
        raise ValueError(f"timeout={timeout!r}: expected seconds > 0 an isolated policy may "
                         f"take per decision (default {DEFAULT_TIMEOUT_S:g})")
    return float(timeout)


class Sandbox(NamedTuple):
    """What the child does before it unpickles the policy: chdir, then drop to uid/gid."""

    workdir: str
    uid: int | None = None
    gid: int | None = None


def make_sandbox() -> Sandbox:
    """An empty working directory and, when this process is root on POSIX, `nobody`'s ids."""
    workdir = tempfile.mkdtemp(prefix="evalstop-policy-")
    if os.name != "posix" or os.geteuid() != 0:
        warn_once("private seeds: not running as root, so the isolated policy runs as this "
                  "user and can read whatever it can (see evalstop_gym.isolation)")
        return Sandbox(workdir)
    import pwd

    try:
        user = pwd.getpwnam(UNPRIVILEGED_USER)
    except KeyError:
        shutil.rmtree(workdir)
        raise PolicyProcessError(f"private seeds: this system has no user "
                                 f"{UNPRIVILEGED_USER!r} to run the policy as; create one") \
            from None
    os.chown(workdir, user.pw_uid, user.pw_gid)
    if not readable_by_others(Path(os.__file__)):
        warn_once(f"private seeds: this Python ({os.path.dirname(os.__file__)}) is not "
                  f"readable by {UNPRIVILEGED_USER}, so the policy can import only what its "
                  f"process loaded before dropping privileges (numpy and evalstop_gym); "
                  f"install Python where every user can read it")
    return Sandbox(workdir, user.pw_uid, user.pw_gid)


class IsolatedPolicy:
    """A `Policy` whose every call is answered by the wrapped policy in a child process.

    `policy` is a policy name ("EvalStop-2+SRTF-Est"), built in the child, or a picklable policy
    object whose class the child can import. `imports`: the user's files or modules the child
    imports first (`--import`), so the names they register resolve there too. `timeout`: seconds
    the child may take per call (the first call also gets `STARTUP_S`); `sandbox`: harden the
    child (module docstring). Use as a context manager (or call `close`).
    """

    def __init__(self, policy: str | Policy, timeout: float | None = None,
                 sandbox: bool = False, imports: Sequence[str] = ()) -> None:
        self.timeout = check_timeout(timeout)
        self._label = policy if isinstance(policy, str) else str(getattr(
            policy, "name", type(policy).__name__))
        payload = policy if isinstance(policy, str) else self._pickled(policy)
        imports = tuple(imports)
        if sandbox:   # before a process starts: a file nobody can read fails here, in one line
            check_readable_by_sandbox(imports, policy if isinstance(policy, str) else "")
        self._sandbox = make_sandbox() if sandbox else None
        context = multiprocessing.get_context("spawn")
        self._conn, child_end = context.Pipe()
        self._process = context.Process(target=serve,
                                        args=(child_end, payload, self._sandbox, imports),
                                        daemon=True, name="evalstop-isolated-policy")
        self._busy_since: float | None = None   # when the call in flight began (watchdog)
        self._limit = self.timeout + STARTUP_S
        self._expired = threading.Event()
        self._closed = threading.Event()
        with _ENV_LOCK, _without_env(SECRET_ENV, SECRET_FILE_ENV):
            self._process.start()
        child_end.close()
        threading.Thread(target=self._watch, daemon=True, name="evalstop-policy-watchdog").start()
        try:
            name, milestones, sliced = self._call("describe", wait=self._limit)
        except BaseException:
            self.close()
            raise
        self._limit = self.timeout
        if not isinstance(name, str) or not all(isinstance(m, (int, float)) for m in milestones):
            self.close()
            raise PolicyProcessError(f"isolated policy described itself as {name!r}, "
                                     f"{milestones!r}")
        self.name, self.milestones = name, tuple(float(m) for m in milestones)
        if sliced is True:   # the child's base scheduler time-slices (EvalSched): ask it too
            self.time_sliced = self._time_sliced

    def _pickled(self, policy: Policy) -> bytes:
        try:
            return pickle.dumps(policy)
        except Exception as exc:   # lambdas, locks, open files, local classes...
            detail = str(exc).splitlines()[0] if str(exc) else ""
            raise TypeError(f"policy {self._label!r} cannot be sent to its isolated process: it "
                            f"must be picklable (no lambdas, locks or open files, its class "
                            f"importable by name) or given by name "
                            f"({type(exc).__name__}: {detail})") from None

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
        self._closed.set()
        if self._process.is_alive():
            with contextlib.suppress(OSError):
                self._conn.send(("close", ()))
            self._process.join(timeout=5)
            self._kill()
        self._conn.close()
        if self._sandbox is not None:
            shutil.rmtree(self._sandbox.workdir, ignore_errors=True)

    def __enter__(self) -> IsolatedPolicy:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _kill(self) -> None:
        if self._process.is_alive():
            self._process.kill()
            self._process.join()

    def _watch(self) -> None:
        """Kills the child when a call outlives its deadline where the caller cannot see it
        (blocked sending a view the child does not read, or on half a reply)."""
        period = min(1.0, max(0.01, self.timeout / 4))
        while not self._closed.wait(period):
            since = self._busy_since
            if since is not None and time.monotonic() - since > self._limit:
                self._expired.set()
                self._process.kill()

    def _call(self, method: str, *args: Any, wait: float | None = None) -> Any:
        wait = self.timeout if wait is None else wait
        self._busy_since = start = time.monotonic()
        try:
            self._conn.send((method, args))
            if not self._conn.poll(max(0.0, start + wait - time.monotonic())):
                self._expired.set()
            else:
                ok, value = json.loads(self._conn.recv_bytes())
        except (EOFError, OSError, TypeError, ValueError) as exc:
            if not self._expired.is_set():
                raise PolicyProcessError(
                    f"isolated policy {self._label!r} process failed during {method} "
                    f"({type(exc).__name__}: {exc}; exit code {self._process.exitcode})") from None
        finally:
            self._busy_since = None
        if self._expired.is_set():
            self._kill()
            raise PolicyTimeout(f"isolated policy {self._label!r} gave no answer to {method} "
                                f"within its deadline of {wait:g} s (timeout= or "
                                f"--policy-timeout, default {DEFAULT_TIMEOUT_S:g} s per "
                                f"decision); its process was killed")
        if not ok:
            raise PolicyProcessError(f"isolated policy {self._label!r} raised in {method}: {value}")
        return value


def _ids(name: str, raw: Any) -> tuple[int, ...]:
    if not isinstance(raw, list) or not all(isinstance(x, int) and not isinstance(x, bool)
                                            for x in raw):
        raise PolicyProcessError(f"isolated policy's allocation.{name} is {raw!r}, not job ids")
    return tuple(raw)


@contextlib.contextmanager
def _without_env(*names: str) -> Iterator[None]:
    """The environment minus `names` while a child is started (it inherits os.environ)."""
    saved = {name: os.environ.pop(name) for name in names if name in os.environ}
    try:
        yield
    finally:
        os.environ.update(saved)


def check_readable_by_sandbox(imports: Sequence[str], policy: str = "") -> None:
    """Refuses (PolicyProcessError, one line saying what to do) a user's file that the sandboxed
    child, run as `nobody` when this process is root, could not read: an `imports` entry or a
    file a policy name names (`mine.py:Name`). Read from the file system only: nothing is
    imported here (a helper nobody cannot read fails in the child, naming it). Same user:
    nothing to check."""
    if os.name != "posix" or os.geteuid() != 0:
        return
    named = [t for t in map(user_target, split_policy(policy) if policy else ()) if t]
    for ref in (*imports, *named):
        path = Path(ref).expanduser()
        if is_file_ref(ref) and path.is_file() and not readable_by_others(path):
            raise PolicyProcessError(
                f"{ref}: {path} is not readable by user {UNPRIVILEGED_USER}, whom a "
                f"private-seeds policy runs as; copy it (and the helpers it imports) to a "
                f"folder every user can read (chmod a+rx on its folders, a+r on the files) "
                f"and name it there")


_PROBED: dict[tuple, dict[str, str]] = {}   # (imports, their bytes) -> name -> its digest


def sandboxed_sources(names: Sequence[str], imports: Sequence[str] = (),
                      timeout: float | None = None) -> dict[str, str]:
    """Each policy name's `user_sources` digest (its runs' cache key), worked out where a
    private policy runs, never in this process: a sandboxed child (as nobody when root, without
    the secret, in an empty folder) imports `imports`, builds every name (a bad one is a
    one-line PolicyProcessError) and answers the digests. Answers are kept per content of the
    named files, so a sweep's cells cost one child."""
    refs = [*imports, *(t for n in names for t in map(user_target, split_policy(n)) if t)]
    key = (tuple(imports), tuple(_bytes_of(ref) for ref in refs))
    known = _PROBED.setdefault(key, {})
    todo = [n for n in dict.fromkeys(names) if n not in known]
    if todo:
        check_readable_by_sandbox(imports)
        for name in todo:
            check_readable_by_sandbox((), name)
        known.update(_probe(todo, tuple(imports), check_timeout(timeout) + STARTUP_S))
    return {n: known[n] for n in names}


def _bytes_of(ref: str) -> str:
    path = Path(ref).expanduser()
    return hashlib.sha256(path.read_bytes()).hexdigest() if path.is_file() else ref


def _probe(names: Sequence[str], imports: tuple[str, ...], wait: float) -> dict[str, str]:
    context = multiprocessing.get_context("spawn")
    conn, child_end = context.Pipe(duplex=False)
    sandbox = make_sandbox()
    process = context.Process(target=probe_child, args=(child_end, sandbox, imports,
                                                          tuple(names)),
                              daemon=True, name="evalstop-user-code-probe")
    try:
        with _ENV_LOCK, _without_env(SECRET_ENV, SECRET_FILE_ENV):
            process.start()
        child_end.close()
        if not conn.poll(wait):
            raise PolicyTimeout(f"the sandboxed import of {', '.join(imports or names)} gave "
                                f"no answer within {wait:g} s; its process was killed")
        try:
            ok, value = json.loads(conn.recv_bytes())
        except (EOFError, OSError, ValueError):
            ok, value = False, f"its process died (exit code {process.exitcode})"
    finally:
        if process.is_alive():
            process.kill()
        process.join()
        conn.close()
        shutil.rmtree(sandbox.workdir, ignore_errors=True)
    if not ok or not isinstance(value, dict):
        raise PolicyProcessError(f"{value} (imported in the policy's sandbox"
                                 + (f", as user {UNPRIVILEGED_USER}" if sandbox.uid is not None
                                    else "") + ")")
    return {str(k): str(v) for k, v in value.items()}


# ------------------------------------------------------------------ the child's side

def serve(conn: Any, payload: str | bytes, sandbox: Sandbox | None = None,
          imports: Sequence[str] = ()) -> None:
    """The child's loop: views in (from the trusted parent), JSON decisions out. The sandbox
    is entered before the user's code is imported and the policy unpickled, so no policy code
    runs with the parent's rights."""
    try:
        if sandbox is not None:
            enter(sandbox)
        if imports:
            from evalstop_gym.policies.registry import import_user_modules

            import_user_modules(imports)
        policy, error = build(payload), ""
    except Exception as exc:   # every request is answered with the reason, the first ends it
        policy, error = None, f"{type(exc).__name__}: {exc}"
    while True:
        try:
            method, args = conn.recv()
        except EOFError:
            return
        if method == "close":
            return
        try:
            if policy is None:
                raise RuntimeError(f"the policy could not be set up in its process ({error}); "
                                   f"it must be picklable and its class importable by name"
                                   + (f" by user {UNPRIVILEGED_USER}" if sandbox and sandbox.uid
                                      is not None else ""))
            reply = [True, _answer(policy, method, args)]
        except Exception as exc:  # reported to the parent, which raises PolicyProcessError
            reply = [False, f"{type(exc).__name__}: {exc}"]
        conn.send_bytes(json.dumps(reply).encode())


def probe_child(conn: Any, sandbox: Sandbox, imports: Sequence[str],
                names: Sequence[str]) -> None:
    """`sandboxed_sources`' child: in the sandbox, import the user's code, build each name and
    answer its digest (or the first error, in one line)."""
    try:
        enter(sandbox)
        from evalstop_gym.policies import parse_policy
        from evalstop_gym.policies.registry import import_user_modules, user_sources

        import_user_modules(imports)
        digests = {}
        for name in names:
            parse_policy(name)
            digests[name] = user_sources(split_policy(name), imports)
        reply = [True, digests]
    except Exception as exc:
        reply = [False, " ".join(str(exc).split()) or type(exc).__name__]
    conn.send_bytes(json.dumps(reply).encode())


def enter(sandbox: Sandbox) -> None:
    """Work in the empty directory; drop to the unprivileged ids (groups first, uid last)."""
    import evalstop_gym.policies  # noqa: F401  trusted, loaded while the child still can

    os.chdir(sandbox.workdir)
    os.environ.update(HOME=sandbox.workdir, TMPDIR=sandbox.workdir)
    if sandbox.uid is not None and sandbox.gid is not None:
        os.setgroups([])
        os.setgid(sandbox.gid)
        os.setuid(sandbox.uid)


def build(payload: str | bytes) -> Policy:
    if isinstance(payload, str):
        from evalstop_gym.policies import parse_policy

        return parse_policy(payload)
    return pickle.loads(payload)


def _answer(policy: Policy, method: str, args: tuple) -> Any:
    if method == "describe":
        return [policy.name, [float(m) for m in policy.milestones],
                capabilities(policy).time_sliced is not None]
    if method == "time_sliced":
        return bool(capabilities(policy).time_sliced(*args))  # type: ignore[misc]
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
