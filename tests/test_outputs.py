"""Outputs that stay small and safe: no ever-growing collated file, no report from missing
inputs, and the absolute path of every tracked file a command writes."""

from __future__ import annotations

from pathlib import Path

import pandas as pd

from evalstop_gym.benchmarks.sweep import pipeline


def experiment_folder(out: Path, name: str, n_jobs: int) -> None:
    """OUT/<name>/ as a sweep leaves it: runs.csv, jobs.csv, summary.csv, table.md."""
    folder = out / name
    folder.mkdir(parents=True)
    ids = {"experiment": name, "cell": "SRTF-Est", "label": "", "policy": "SRTF-Est",
           "base": "SRTF-Est", "detector": "none", "param": "", "value": "", "seed": 1}
    pd.DataFrame([{**ids, "jct": 10.0}]).to_csv(folder / "runs.csv", index=False)
    pd.DataFrame([{**ids, "job_id": j} for j in range(n_jobs)]).to_csv(folder / "jobs.csv",
                                                                        index=False)
    pd.DataFrame([{"cell": "SRTF-Est", "jct": 10.0}]).to_csv(folder / "summary.csv", index=False)
    (folder / "table.md").write_text(f"## {name}\n")


def test_collation_keeps_job_records_per_experiment(tmp_path):
    """OUT/jobs.csv grew with every experiment and every `run` rewrote it: job records stay in
    OUT/<exp>/jobs.csv; runs, summaries and tables are still collated (one row per run/cell)."""
    for name, n_jobs in (("a", 3), ("b", 5)):
        experiment_folder(tmp_path, name, n_jobs)
    pipeline.collate_out(tmp_path)
    assert not (tmp_path / "jobs.csv").exists()
    assert len(pd.read_csv(tmp_path / "runs.csv")) == 2
    assert len(pd.read_csv(tmp_path / "summary.csv")) == 2
    assert (tmp_path / "table.md").read_text() == "## a\n\n## b\n"
    assert [len(pd.read_csv(tmp_path / n / "jobs.csv")) for n in "ab"] == [3, 5]


def test_a_collated_jobs_csv_left_by_an_older_version_is_removed(tmp_path, caplog):
    """It would no longer be updated: a stale file beside fresh ones is worse than none."""
    experiment_folder(tmp_path, "a", 3)
    (tmp_path / "jobs.csv").write_text("experiment,job_id\nold,1\n")
    pipeline.collate_out(tmp_path)
    assert not (tmp_path / "jobs.csv").exists()
    assert "jobs.csv: removed" in caplog.text
    assert (tmp_path / "a" / "jobs.csv").is_file()


def run_beyond(*argv: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "evalstop_gym.benchmarks.report.beyond", *argv],
                          capture_output=True, text=True)


def test_beyond_run_as_a_module_on_an_empty_folder_exits_non_zero(tmp_path):
    """`python -m ...beyond RESULTS` as the user types it (test_cli_safety calls its main): no
    "Means over 0 seeds" shell in place of the real BEYOND.md, one line, a non-zero exit."""
    root = tmp_path / "repo"
    root.mkdir()
    (root / "BEYOND.md").write_text("the real one\n")
    (tmp_path / "empty").mkdir()
    done = run_beyond(str(tmp_path / "empty"), "--root", str(root))
    assert done.returncode == 2
    assert "holds none of e7x, e8x, e2x" in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1 and "wrote" not in done.stdout
    assert (root / "BEYOND.md").read_text() == "the real one\n"


def test_report_names_each_file_it_writes_by_its_absolute_path(tmp_path, monkeypatch, capsys):
    from evalstop_gym.benchmarks.report import reproduction as report

    monkeypatch.chdir(tmp_path)
    report.written(Path("REPRODUCTION.md"))
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path.resolve() / 'REPRODUCTION.md'}"


def test_report_from_no_runs_writes_nothing_and_exits_non_zero(tmp_path, monkeypatch, capsys):
    """A matrix that yields no run (here: none selected) leaves the old report in place."""
    from evalstop_gym.benchmarks import cli
    from evalstop_gym.benchmarks.report import reproduction as report

    monkeypatch.setattr(report, "MATRIX", ())
    target = tmp_path / "REPRODUCTION.md"
    target.write_text("the old report\n")
    argv = ["report", "--out", str(tmp_path / "out"), "--reproduction", str(target),
            "--no-beyond", "--learned", "--calibration"]
    assert cli.main(argv) == 2
    err = capsys.readouterr().err.strip()
    assert "no runs of the matrix" in err and "left as it was" in err and "\n" not in err
    assert target.read_text() == "the old report\n"
