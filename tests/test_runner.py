"""Sweeps: one file per run, resumable after a crash or a kill, identical results."""

from __future__ import annotations

import os
import signal
import subprocess
from pathlib import Path

import pytest
from sweep_gate import finish, gated_process, wait_for

from evalstop_gym.benchmarks.sweep import runner
from evalstop_gym.benchmarks.sweep.runner import run_sweep
from evalstop_gym.config import CONFIG_DIR
from evalstop_gym.experiment import load_experiment

TINY = """
name: tiny
title: tiny test sweep
platform: {defaults}
overrides: {{workload.n_jobs: {n_jobs}, cluster.gpus: 16}}
seeds: [1, 2]
reference: {{base: SRTF-Est, detector: none}}
sweep: {{param: noise.sigma, values: [0.02, 0.08]}}
cells:
  - {{base: SRTF-Est, detector: none}}
  - {{base: SRTF-Est, detector: EvalStop-2}}
  - {{base: FIFO, detector: StopAt-0.65}}
"""


def tiny_yaml(tmp_path: Path, n_jobs: int = 15) -> Path:
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(defaults=CONFIG_DIR / "defaults.yaml", n_jobs=n_jobs))
    return path


def test_sweep_writes_one_file_per_run_and_a_row_per_cell_and_seed(tmp_path):
    exp = load_experiment(tiny_yaml(tmp_path))
    result = run_sweep(exp, tmp_path / "out")
    assert len(list((tmp_path / "out" / "tiny" / "runs").glob("*.json"))) == 12
    assert len(result.runs) == 12 and result.n_ran == 12
    assert {"experiment", "cell", "base", "detector", "param", "value", "seed", "jct",
            "fpr_all", "n_stopped"} <= set(result.runs.columns)
    assert set(result.jobs.columns) >= {"experiment", "cell", "seed", "job_id", "is_hacking"}
    assert len(result.jobs) == 12 * 15
    again = run_sweep(exp, tmp_path / "out")
    assert again.n_ran == 0 and again.runs.equals(result.runs)


def test_a_sweep_parses_each_run_file_once(tmp_path, monkeypatch):
    """missing() keeps the payloads it checked, so collate reads only the files run since."""
    exp = load_experiment(tiny_yaml(tmp_path))
    first = run_sweep(exp, tmp_path / "out")
    run_dir = tmp_path / "out" / "tiny" / "runs"
    (run_dir / runner.specs(exp)[0].filename).unlink()
    real, reads = runner.read_run, []
    monkeypatch.setattr(runner, "read_run", lambda path: reads.append(path.name) or real(path))
    again = run_sweep(exp, tmp_path / "out")
    assert again.n_ran == 1 and again.runs.equals(first.runs) and again.jobs.equals(first.jobs)
    assert sorted(reads) == sorted([p.name for p in run_dir.glob("*.json")]
                                   + [runner.specs(exp)[0].filename])


def test_changed_config_reruns_only_stale_runs(tmp_path):
    exp = load_experiment(tiny_yaml(tmp_path))
    run_sweep(exp, tmp_path / "out")
    changed = run_sweep(exp.with_overrides({"workload.n_jobs": 12}), tmp_path / "out")
    assert changed.n_ran == 12 and len(changed.jobs) == 12 * 12


def test_injected_failure_then_resume_equals_uninterrupted(tmp_path, monkeypatch):
    exp = load_experiment(tiny_yaml(tmp_path))
    clean = run_sweep(exp, tmp_path / "clean").runs
    real, calls = runner.run_one, []

    def flaky(spec):
        calls.append(spec)
        if len(calls) == 5:
            raise RuntimeError("injected crash")
        return real(spec)

    monkeypatch.setattr(runner, "run_one", flaky)
    with pytest.raises(RuntimeError, match="injected"):
        run_sweep(exp, tmp_path / "crashed")
    assert len(list((tmp_path / "crashed" / "tiny" / "runs").glob("*.json"))) == 4
    monkeypatch.setattr(runner, "run_one", real)
    resumed = run_sweep(exp, tmp_path / "crashed")
    assert resumed.n_ran == 8
    assert resumed.runs.equals(clean)


def test_killed_subprocess_resumes_to_the_same_runs_csv(tmp_path):
    """SIGKILL a CLI sweep once two runs are on disk and the next is held; a rerun finishes the
    rest, same CSV."""
    yaml_path = tiny_yaml(tmp_path, n_jobs=60)
    out = tmp_path / "killed"
    run_dir = out / "tiny" / "runs"
    exp = load_experiment(yaml_path)
    free = [s.filename for s in runner.specs(exp)[:2]]
    gate = tmp_path / "gate"
    proc = gated_process(["run", str(yaml_path), "--out", str(out)], gate, free_runs=free,
                         delay=0.0, stderr=subprocess.DEVNULL)

    def saved() -> set[str]:   # whole run files; a write in progress is a .tmp-* file beside them
        return {p.name for p in run_dir.glob("*.json") if not p.name.startswith(".tmp-")}

    wait_for(lambda: saved() == set(free) and any(gate.glob("held-*")), proc,
             "two saved runs and a held one")
    os.kill(proc.pid, signal.SIGKILL)
    finish(proc, "the killed sweep")
    assert saved() == set(free)
    resumed = run_sweep(exp, out)
    assert resumed.n_ran == 10
    assert not list(run_dir.glob(".tmp-*"))
    clean = run_sweep(exp, tmp_path / "clean")
    resumed.runs.to_csv(tmp_path / "a.csv", index=False)
    clean.runs.to_csv(tmp_path / "b.csv", index=False)
    assert (tmp_path / "a.csv").read_bytes() == (tmp_path / "b.csv").read_bytes()


def test_two_sweeps_with_one_seed_write_identical_runs_csv(tmp_path):
    """Determinism end to end: the same experiment run twice from scratch, byte-equal files."""
    from evalstop_gym.benchmarks import cli

    exp = str(tiny_yaml(tmp_path))
    for out in ("a", "b"):
        assert cli.main(["run", exp, "--out", str(tmp_path / out), "--seeds", "7"]) == 0
    for name in ("runs.csv", "tiny/jobs.csv", "summary.csv"):
        assert (tmp_path / "a" / name).read_bytes() == (tmp_path / "b" / name).read_bytes()


def test_run_digest_covers_the_simulator_source(tmp_path, monkeypatch):
    """Runs made by other simulator or policy code are stale, like runs of another config."""
    exp = load_experiment(tiny_yaml(tmp_path))
    before = runner.specs(exp)[0].digest
    monkeypatch.setattr(runner, "code_digest", lambda: "other code")
    assert runner.specs(exp)[0].digest != before
