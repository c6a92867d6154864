"""A gate for tests that interrupt a sweep: they choose the moment, however fast the machine.

`gated_process` starts `evalstop-bench` with a `sitecustomize` on its PYTHONPATH, so every Python
process of the sweep (its joblib workers too) loads the gate: runs not named free, or the n-th
rename of an output file, leave a marker and wait for a release file the test creates.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
from pathlib import Path

GATE = """
import json, os, time
from pathlib import Path

_gate = json.loads(Path(os.environ["EVALSTOP_TEST_GATE"]).read_text())


def _hold(marker):
    Path(_gate["dir"], marker).touch()
    release, deadline = Path(_gate["dir"], "release"), time.monotonic() + 600
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


def gated_process(args: list[str], folder: Path, stderr=subprocess.PIPE,
                  **gate: object) -> subprocess.Popen:
    """`evalstop-bench ARGS` with the gate above; `folder` holds its markers and release file."""
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "sitecustomize.py").write_text(GATE)
    (folder / "gate.json").write_text(json.dumps({"dir": str(folder), **gate}))
    env = {**os.environ, "EVALSTOP_TEST_GATE": str(folder / "gate.json"),
           "PYTHONPATH": os.pathsep.join(filter(None, [str(folder),
                                                       os.environ.get("PYTHONPATH")]))}
    return subprocess.Popen([sys.executable, "-m", "evalstop_gym.benchmarks.cli", *args],
                            stdout=subprocess.PIPE, stderr=stderr, text=True, env=env)


def wait_for(condition, proc: subprocess.Popen, what: str) -> None:
    """Until `condition()` holds; fails (rather than hangs) if the process ends first."""
    deadline = time.monotonic() + 300   # a safety net against a hang, not a timing assumption
    while not condition():
        assert proc.poll() is None, f"the sweep ended before {what}"
        assert time.monotonic() < deadline, f"no {what} after 300 s"
        time.sleep(0.01)
