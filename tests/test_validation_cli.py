"""evalstop-bench: every bad input of issue 13 exits 2 with one line naming what is wrong, before
anything runs; a real bug still shows its traceback."""

from __future__ import annotations

import pytest

from evalstop_gym.benchmarks import cli
from evalstop_gym.benchmarks.sweep import command as sweep_command
from evalstop_gym.benchmarks.sweep import pipeline, runner
from evalstop_gym.benchmarks.usage import parse_overrides


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def fails_cleanly(argv: list[str], capsys) -> str:
    assert cli.main(argv) == 2
    return one_line_error(capsys)


@pytest.mark.parametrize("setting, needle", [
    ("cluster.gpus=.nan", "cluster.gpus: expected a finite whole number, got nan"),
    ("cluster.gpus=.inf", "cluster.gpus: expected a finite whole number, got inf"),
    ("workload.n_jobs=.nan", "workload.n_jobs: expected a finite whole number"),
    ("cluster.gpus=[", "--set 'cluster.gpus=[': not valid YAML"),
    ("trace.start=2020-13-01 00:00:00", "trace.start=2020-13-01 00:00:00': not valid YAML: month"),
    ("cluster.gpus=2", "cluster.gpus: a dpo job needs up to 4 GPUs"),
    ("job_types.rlhf.gpus=[4, 100]", "a rlhf job needs up to 100 GPUs (job_types.rlhf.gpus)"),
    ("workload.n_jobs=1000000000000", "workload.n_jobs: 1000000000000 is above the supported"),
    ("evals.interval=1e-9", "evals.interval: 200 jobs x 1,000,000,002 check points"),
    ("workload.arrival_rate_per_min=1e-300", "workload.arrival_rate_per_min: 1e-300 spreads"),
    ("cluster.gpus=1e+12", "cluster.gpus: 1000000000000 is above the supported maximum"),
    ("cluster.gpus=1e12", "cluster.gpus: expected a whole number, got '1e12'"),
    ("workload.n_tenants=1e+12", "workload.n_tenants: 1000000000000 is above the supported"),
    ("cluster.gpus=true", "cluster.gpus: expected a whole number, got True"),
    ("workload.mix={lora: 0.5, lora: 0.5}", "key 'lora' given twice"),
])
def test_bad_settings_exit_2_naming_the_field(setting, needle, capsys, tmp_path):
    err = fails_cleanly(["run", "e2", "--out", str(tmp_path), "--set", setting], capsys)
    assert needle in err


def test_a_valid_datetime_setting_is_accepted():
    """YAML reads it as a datetime; the text field takes it as the same text."""
    overrides = parse_overrides(["trace.start=2017-11-07 00:00:00"])
    exp = pipeline.prepare("philly", overrides)
    assert exp.config.trace.start == "2017-11-07 00:00:00"


def test_an_out_folder_that_cannot_be_made_exits_2(capsys, tmp_path):
    err = fails_cleanly(["run", "e2", "--seeds", "1", "--set", "workload.n_jobs=3",
                         "--out", "/proc/x"], capsys)
    assert err.endswith("/proc/x: cannot create this folder (No such file or directory)")
    (tmp_path / "file").write_text("")
    err = fails_cleanly(["run", "e2", "--seeds", "1", "--out", str(tmp_path / "file" / "o")],
                        capsys)
    assert err.endswith(f"{tmp_path / 'file'} is a file, not a folder; choose another path")


def test_a_non_finite_detector_parameter_exits_2(capsys, tmp_path):
    err = fails_cleanly(["run", "e2", "--out", str(tmp_path), "--policy", "CUSUM-nan-3+SRTF-Est"],
                        capsys)
    assert "detector 'CUSUM-nan-3': parameter 'nan' must be a finite number" in err


def test_an_unreachable_dask_scheduler_exits_2(capsys, tmp_path, monkeypatch):
    pytest.importorskip("dask.distributed")
    monkeypatch.setattr(runner, "CONNECT_S", 1)
    err = fails_cleanly(["run", "e2", "--seeds", "1", "--set", "workload.n_jobs=3", "--out",
                         str(tmp_path), "--backend", "dask", "--scheduler-address",
                         "tcp://127.0.0.1:1"], capsys)
    assert "dask cluster at tcp://127.0.0.1:1: cannot connect within 1 s" in err


def test_a_real_bug_keeps_its_traceback(monkeypatch, tmp_path):
    """Only the project's own error types become one-line exits."""
    def broken(*args, **kwargs):
        raise ZeroDivisionError("a bug")

    monkeypatch.setattr(sweep_command, "prepare", broken)
    with pytest.raises(ZeroDivisionError, match="a bug"):
        cli.main(["run", "e2", "--out", str(tmp_path)])


def test_a_policy_that_is_already_a_cell_exits_2(capsys, tmp_path):
    err = fails_cleanly(["run", "e2", "--out", str(tmp_path), "--policy", "SRTF-Est"], capsys)
    assert "are the same cell 'SRTF-Est'" in err
