"""Every command in README.md runs as written: the quick ones are extracted from its code blocks
and run from a scratch folder; the long ones are skipped by name, each with its reason."""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
DATA = Path(__file__).parent / "data"
README = (ROOT / "README.md").read_text()

# command prefix -> why it is not run here (each must still match a README line)
SKIPPED = {
    "pip install": "installs: CI runs both install commands (.ci/run, .ci/wheel_check.sh)",
    "evalstop-bench run all": "the whole E1-E8 matrix",
    "evalstop-bench run e7 --backend dask --scheduler-address": "needs a dask cluster at host",
    "evalstop-bench report": "runs the whole matrix, then writes REPRODUCTION.md",
    "evalstop-bench perf": "a benchmark: times the simulator for minutes",
    "evalstop-bench calibrate": "an Optuna search over the calibrated constants",
    "evalstop-bench train --algo ppo --total-timesteps 120000": "training for 120k steps",
    "evalstop-bench train --algo maskable_ppo": "training for 20k steps",
    "evalstop-bench run e2 --policy \"model:runs/ppo_stop": "needs the 120k-step model",
    "python -m evalstop_gym.benchmarks.perf.env_throughput": "a benchmark: times env steps",
    "evalstop-bench score": "a user's file on the whole suite (tests/test_score.py: a tiny one)",
}
# files a command reads, stood in for by the samples the tests ship
INPUTS = {"my_run/trainer_state.json": DATA / "trainer_state_sample.json",
          "runs.csv": DATA / "eval_logs_sample.csv"}


def blocks(language: str) -> list[str]:
    return re.findall(rf"^```{language}\n(.*?)^```", README, flags=re.S | re.M)


def commands() -> list[str]:
    lines = [line.strip() for block in blocks("bash") for line in block.splitlines()]
    return [line for line in lines if line and not line.startswith("#")]


def quick_commands() -> list[str]:
    return [c for c in commands() if not any(c.startswith(p) for p in SKIPPED)]


def shell(command: str, cwd: Path, timeout: float) -> subprocess.CompletedProcess:
    env = {**os.environ, "MPLBACKEND": "Agg"}
    return subprocess.run(["bash", "-c", command], cwd=cwd, env=env, capture_output=True,
                          text=True, timeout=timeout)


def test_every_skip_names_a_readme_command_and_some_commands_run():
    cmds = commands()
    assert all(any(c.startswith(p) for c in cmds) for p in SKIPPED), "stale SKIPPED entry"
    assert len(quick_commands()) >= 5


@pytest.fixture(scope="module")
def scratch(tmp_path_factory) -> Path:
    """A folder outside the checkout holding the stand-in inputs."""
    where = tmp_path_factory.mktemp("readme")
    for name, source in INPUTS.items():
        (where / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(source, where / name)
    return where


@pytest.mark.parametrize("command", quick_commands())
def test_readme_command_runs_as_written(command, scratch):
    done = shell(command, scratch, timeout=120)
    assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
    if command.startswith("evalstop-bench run"):
        assert "EvalStop-2+SRTF-Est" in done.stdout


def test_readme_python_runs_as_written(scratch):
    """The Environment section's snippets, in order in one interpreter (the second uses the
    first's env); the PPO run saves ppo_stop.zip and prints SB3's log with the episode JCT."""
    code = "\n".join(blocks("python"))
    assert "simulate(" in code and "EpisodeMetricsCallback" in code
    done = subprocess.run([sys.executable, "-c", code], cwd=scratch, capture_output=True,
                          text=True, timeout=180, env={**os.environ, "MPLBACKEND": "Agg"})
    assert done.returncode == 0, done.stderr[-3000:]
    assert (scratch / "ppo_stop.zip").exists()
    logged = done.stdout[done.stdout.index("| episode/"):]   # SB3 prints keys under their prefix
    assert re.search(r"^\|\s+jct\s+\|\s+[0-9.e+]+", logged, flags=re.M)
