"""A gate for tests that interrupt a sweep: they choose the moment, however fast the machine.

`gated_process` starts `evalstop-bench` with a `sitecustomize` on its PYTHONPATH, so every Python
process of the sweep (its joblib workers too) loads the gate: runs not named free, or the n-th
rename of an output file, leave a marker and wait for a release file the test creates.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

GATE = """
import json, os, time
from pathlib import Path

_gate = json.loads(Path(os.environ["EVALSTOP_TEST_GATE"]).read_text())


def _hold(marker):
    Path(_gate["dir"], marker).touch()
    release, deadline = Path(_gate["dir"], "release"), time.monotonic() + 600   # then go on
    while not release.exists() and time.monotonic() < deadline:
        time.sleep(0.01)


if "free_runs" in _gate:
    from evalstop_gym.benchmarks.sweep import runner

    _run_and_save = runner.run_and_save

    def run_and_save(spec, run_dir):
        if spec.filename in _gate["free_runs"]:
            time.sleep(_gate["delay"])
        else:
            _hold("held-" + spec.filename)
        return _run_and_save(spec, run_dir)

    runner.run_and_save = run_and_save

if "hold_output" in _gate:
    _replace, _outputs = os.replace, []

    def replace(src, dst, *args, **kwargs):
        if Path(dst).name in _gate["outputs"]:
            _outputs.append(dst)
            if len(_outputs) == _gate["hold_output"]:
                _hold("held-output")
        return _replace(src, dst, *args, **kwargs)

    os.replace = replace
"""


WAIT_S = 300   # any wait's deadline: a safety net against a hang (CI's own is 90 min)
STARTED: list[subprocess.Popen] = []   # every process a test started here, for `reap`


def start(command: list[str], sigint: Any = signal.SIG_DFL, **kwargs: Any) -> subprocess.Popen:
    """`command` in a session of its own (so `end` stops it and every worker it started), its
    SIGINT disposition `sigint` (default: the default, so a test's SIGINT is a Ctrl-C even when
    pytest was started in the background by a non-interactive shell, which starts it, and so
    its children, with SIGINT ignored); recorded for `reap`."""
    def setup() -> None:   # in the child, before exec
        signal.signal(signal.SIGINT, sigint)

    proc = subprocess.Popen(command, start_new_session=True,
                            preexec_fn=setup if os.name == "posix" else None, **kwargs)
    STARTED.append(proc)
    return proc


def end(proc: subprocess.Popen) -> None:
    """Kills `proc` and whatever is left of its session (joblib's workers), then reaps it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(proc.pid, signal.SIGKILL)
    with contextlib.suppress(ProcessLookupError):
        proc.kill()
    with contextlib.suppress(subprocess.TimeoutExpired):
        proc.communicate(timeout=30)


def reap() -> list[str]:
    """Ends every process `start` started that is still running, or has workers still running;
    returns their commands (a test's own finalizer, so none outlives the test)."""
    alive = []
    for proc in STARTED:
        running = proc.poll() is None
        try:
            os.killpg(proc.pid, 0)
            running = True
        except (ProcessLookupError, PermissionError):
            pass
        if running:
            alive.append(" ".join(map(str, proc.args)))
            end(proc)
    STARTED.clear()
    return alive


def finish(proc: subprocess.Popen, what: str, timeout: float = WAIT_S) -> tuple[str, str]:
    """`proc`'s output once it ends; past `timeout` s it is ended (with its workers) and the
    test fails saying what it waited for."""
    try:
        return proc.communicate(timeout=timeout)
    except subprocess.TimeoutExpired:
        end(proc)
        raise AssertionError(f"{what}: not ended after {timeout:g} s; its processes were "
                             f"killed") from None


def gone(proc: subprocess.Popen, what: str, timeout: float = 60) -> None:
    """Waits until no process of `proc`'s session is left (its workers exit once their parent
    has); past `timeout` s they are killed and the test fails naming `what`."""
    deadline = time.monotonic() + timeout
    while True:
        try:
            os.killpg(proc.pid, 0)
        except ProcessLookupError:
            return
        if time.monotonic() > deadline:
            end(proc)
            raise AssertionError(f"{what}: processes still running {timeout:g} s after it "
                                 f"ended; they were killed")
        time.sleep(0.05)


def gated_process(args: list[str], folder: Path, stderr=subprocess.PIPE,
                  sigint: Any = signal.SIG_DFL, **gate: object) -> subprocess.Popen:
    """`evalstop-bench ARGS` with the gate above; `folder` holds its markers and release file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(GATE)
    (folder / "gate.json").write_text(json.dumps({"dir": str(folder), **gate}))
    env = {**os.environ, "EVALSTOP_TEST_GATE": str(folder / "gate.json"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder),
                                                       os.environ.get("PYTHONPATH")]))}
    return start([sys.executable, "-m", "evalstop_gym.benchmarks.cli", *args],
                 sigint, stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)


def wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    """Until `condition()` holds; fails (rather than hangs) if the process ends first, or after
    WAIT_S, ending the process and its workers."""
    deadline = time.monotonic() + WAIT_S
    while not condition():
        if proc.poll() is not None:
            end(proc)
            raise AssertionError(f"the sweep ended before {what}")
        if time.monotonic() > deadline:
            end(proc)
            raise AssertionError(f"no {what} after {WAIT_S} s; the sweep was killed")
        time.sleep(0.01)
