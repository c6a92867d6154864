"""Durable outputs: atomic files, one sweep at a time per --out, nothing truncated after a kill."""

from __future__ import annotations

import io
import json
import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import pandas as pd
import pytest
from sweep_gate import end, finish, gated_process, gone, start, wait_for

from evalstop_gym.benchmarks import cli, durable
from evalstop_gym.benchmarks.durable import OutputError, out_lock
from evalstop_gym.benchmarks.sweep import runner
from evalstop_gym.config import CONFIG_DIR
from evalstop_gym.experiment import load_experiment

EXPERIMENT = """
name: durable
title: durable outputs
platform: {defaults}
overrides: {{workload.n_jobs: {n_jobs}, cluster.gpus: 32}}
seeds: [1, 2, 3, 4, 5, 6]
reference: {{base: SRTF-Est, detector: none}}
cells:
  - {{base: SRTF-Est, detector: none}}
  - {{base: SRTF-Est, detector: EvalStop-2}}
"""
OUTPUTS = ("runs.csv", "jobs.csv", "summary.csv", "timing.csv", "table.md")


def experiment(tmp_path: Path, n_jobs: int) -> str:
    path = tmp_path / "durable.yaml"
    path.write_text(EXPERIMENT.format(defaults=CONFIG_DIR / "defaults.yaml", n_jobs=n_jobs))
    return str(path)


def temp_files(out: Path) -> list[Path]:
    return sorted(out.rglob(f"{durable.TMP_PREFIX}*"))


def whole(path: Path, expected: dict[str, bytes]) -> bool:
    """The file equals the uninterrupted sweep's; timing.csv (wall seconds, which differ if a run
    was simulated again) has the same cells and seeds."""
    if path.name != "timing.csv":
        return path.read_bytes() == expected[path.name]
    ids = ["cell", "seed"]
    reference = pd.read_csv(io.BytesIO(expected[path.name]))[ids]
    return pd.read_csv(path)[ids].equals(reference)


@pytest.fixture(scope="module")
def reference(tmp_path_factory) -> tuple[str, Path]:
    """The experiment (12 runs of 800 jobs, about 6 s) and an uninterrupted sweep's --out."""
    root = tmp_path_factory.mktemp("durable")
    exp = experiment(root, 800)
    assert cli.main(["run", exp, "--out", str(root / "reference")]) == 0
    return exp, root / "reference"


def test_atomic_writes_leave_the_old_file_or_the_new_one(tmp_path):
    target = tmp_path / "a" / "table.md"
    durable.write_text(target, "old")
    with pytest.raises(KeyboardInterrupt), durable.atomic_path(target) as tmp:
        tmp.write_text("half of the new")
        raise KeyboardInterrupt
    assert target.read_text() == "old" and not temp_files(tmp_path)
    durable.write_csv(pd.DataFrame({"x": [1, 2]}), target.with_name("t.csv"))
    assert pd.read_csv(target.with_name("t.csv"))["x"].tolist() == [1, 2]


def test_a_second_process_waits_or_refuses_and_stale_files_go_only_under_the_lock(tmp_path):
    out = tmp_path / "out"
    stale = out / "e" / "runs" / ".tmp-left.part.json"
    stale.parent.mkdir(parents=True)
    stale.write_text("{")
    held = tmp_path / "held"
    holder = start(
        [sys.executable, "-c", "import sys, time; from pathlib import Path; from evalstop_gym."
         "benchmarks.durable import out_lock\nwith out_lock(sys.argv[1]):\n Path(sys.argv[2])."
         "touch(); time.sleep(30)", str(out), str(held)])
    try:
        wait_for(held.exists, holder, "the lock held by the other process")
        assert not stale.exists()
        stale.write_text("{")                                # as if its own write were under way
        with pytest.raises(OutputError, match="another sweep is writing to this folder"):
            with out_lock(out, wait=False):
                pass
        assert stale.exists(), "a sweep without the lock must not touch temp files"
    finally:
        end(holder)
    with out_lock(out, wait=False):
        assert not stale.exists()
        with out_lock(out, wait=False):   # re-entrant in one process
            pass


def test_the_worker_saves_its_run_before_handing_it_over(tmp_path):
    """So a Ctrl-C in the parent, which discards results joblib still holds, loses no run."""
    exp = load_experiment(experiment(tmp_path, 10))
    spec = runner.specs(exp)[0]
    payload = runner.run_and_save(spec, tmp_path / "runs")
    saved = json.loads((tmp_path / "runs" / spec.filename).read_text())
    assert payload.pop("saved") is True
    assert "jobs" not in payload, "the parent reads the job records from the file, not the pipe"
    assert saved["digest"] == spec.digest and saved["row"] == json.loads(json.dumps(payload["row"]))


def test_a_sweep_killed_during_its_output_writes_leaves_no_truncated_file(tmp_path, reference):
    """SIGKILL the CLI in the middle of its output writes (its runs are already on disk), once
    before the first output's rename and once before the third's, the new file written but not
    yet in place; every output present after each kill and after the rerun is whole."""
    exp, out = reference[0], tmp_path / "out"
    shutil.copytree(reference[1], out)
    folder = out / "durable"
    expected = {name: (folder / name).read_bytes() for name in OUTPUTS}
    for nth_write in (1, 3):
        for name in OUTPUTS:
            (folder / name).unlink(missing_ok=True)
        gate = tmp_path / f"gate{nth_write}"
        proc = gated_process(["run", exp, "--out", str(out)], gate, hold_output=nth_write,
                             outputs=list(OUTPUTS))
        wait_for((gate / "held-output").exists, proc, "an output write")
        assert [p for p in folder.iterdir() if p.name.startswith(durable.TMP_PREFIX)]
        os.kill(proc.pid, signal.SIGKILL)
        finish(proc, "the killed sweep")
        present = [name for name in expected if (folder / name).exists()]
        assert len(present) == nth_write - 1
        for name in present:
            assert whole(folder / name, expected), name
    assert cli.main(["run", exp, "--out", str(out)]) == 0
    assert not temp_files(out)
    assert all(whole(folder / name, expected) for name in expected)


def test_two_concurrent_sweeps_on_one_out_lose_no_run_and_corrupt_no_file(tmp_path, reference):
    """The second, started while the first holds the folder, waits for it and then finds every
    run done. The first is held after its first run until the second says it is waiting."""
    exp, out = reference[0], tmp_path / "shared"
    gate = tmp_path / "gate"
    free = runner.specs(load_experiment(exp))[0].filename
    first = gated_process(["run", exp, "--out", str(out)], gate, free_runs=[free], delay=0.0)
    wait_for((out / "durable" / "runs" / free).exists, first, "the first run")
    second_err = tmp_path / "second.err"
    with open(second_err, "w") as err:
        second = start([sys.executable, "-m", "evalstop_gym.benchmarks.cli", "run", exp,
                        "--out", str(out)], stdout=subprocess.PIPE, stderr=err, text=True)
        waiting = "another sweep is writing to this folder; waiting"
        wait_for(lambda: waiting in second_err.read_text(), second, "the second sweep waiting")
        (gate / "release").touch()
        results = [finish(p, f"sweep {i}") for i, p in enumerate((first, second), 1)]
    assert [p.returncode for p in (first, second)] == [0, 0], (results, second_err.read_text())
    assert "12 runs (12 new)" in results[0][0] and "12 runs (0 new)" in results[1][0]
    for name in ("runs.csv", "jobs.csv", "summary.csv", "table.md"):
        for folder in ("", "durable")[name == "jobs.csv":]:   # job records: per experiment
            a = (reference[1] / folder / name).read_bytes()
            assert (out / folder / name).read_bytes() == a, f"{folder}/{name}"
    assert len(list((out / "durable" / "runs").glob("*.json"))) == 12
    assert not temp_files(out)


@pytest.mark.parametrize("delay", [0.0, 1.0], ids=["fast-runs", "slow-runs"])
def test_ctrl_c_keeps_every_finished_run(tmp_path, reference, delay):
    """SIGINT a parallel sweep once two runs are saved and the others are held: it exits 130,
    every run file on disk is whole and none saved before the interrupt is lost; the rerun
    completes the same outputs. The held runs make the moment the test's own, fast or slow."""
    exp, out = reference[0], tmp_path / "out"
    runs, gate = out / "durable" / "runs", tmp_path / "gate"
    free = [s.filename for s in runner.specs(load_experiment(exp))[:2]]
    proc = gated_process(["run", exp, "--out", str(out), "--workers", "2"], gate,
                         free_runs=free, delay=delay)

    def run_files() -> set[Path]:
        return {p for p in runs.glob("*.json") if not p.name.startswith(durable.TMP_PREFIX)}

    wait_for(lambda: {p.name for p in run_files()} == set(free)
             and any(gate.glob("held-*")), proc, "two saved runs and a held one")
    saved = run_files()
    proc.send_signal(signal.SIGINT)
    _, err = finish(proc, "the interrupted sweep", timeout=120)
    gone(proc, "the interrupted sweep's workers")   # none outlives it
    assert proc.returncode == 130, err[-2000:]
    assert "finished runs are kept" in err
    after = run_files()
    assert saved == after
    for path in after:
        assert json.loads(path.read_text())["digest"]   # whole JSON, never a partial write
    assert cli.main(["run", exp, "--out", str(out)]) == 0
    assert not temp_files(out)
    expected = {name: (reference[1] / "durable" / name).read_bytes() for name in OUTPUTS}
    assert all(whole(out / "durable" / name, expected) for name in OUTPUTS)


def test_ctrl_c_stops_a_sweep_started_with_sigint_ignored(tmp_path, reference):
    """A shell that runs `evalstop-bench run ... &` starts it with SIGINT ignored; the CLI
    installs its own handler, so a SIGINT still interrupts it (exit 130), keeping its runs."""
    exp, gate = reference[0], tmp_path / "gate"
    proc = gated_process(["run", exp, "--out", str(tmp_path / "out")], gate, free_runs=[],
                         delay=0.0, sigint=signal.SIG_IGN)
    wait_for(lambda: any(gate.glob("held-*")), proc, "a held run")
    proc.send_signal(signal.SIGINT)
    _, err = finish(proc, "the sweep started with SIGINT ignored", timeout=60)
    assert proc.returncode == 130, err[-2000:]
    assert "interrupted; finished runs are kept" in err
