"""evalstop-bench: one-line errors with exit code 2, tables printed, subcommand registry."""

from __future__ import annotations

import sys

import pandas as pd
import pytest

from evalstop_gym.benchmarks import cli
from evalstop_gym.config import CONFIG_DIR

TINY = """
name: tiny
title: tiny CLI sweep
platform: {defaults}
overrides: {{workload.n_jobs: 12, cluster.gpus: 16}}
seeds: [3]
reference: {{base: SRTF-Est, detector: none}}
cells:
  - {{base: SRTF-Est, detector: none}}
  - {{base: SRTF-Est, detector: {detector}}}
"""


def tiny(tmp_path, detector="EvalStop-2"):
    path = tmp_path / "tiny.yaml"
    path.write_text(TINY.format(defaults=CONFIG_DIR / "defaults.yaml", detector=detector))
    return str(path)


def one_line_error(capsys) -> str:
    err = capsys.readouterr().err.strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


def test_list_names_every_experiment(capsys):
    assert cli.main(["list"]) == 0
    out = capsys.readouterr().out
    for name in ("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8"):
        assert f"{name} " in out


def test_unknown_experiment_exits_2_naming_it(capsys, tmp_path):
    assert cli.main(["run", "e99", "--out", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert "'e99'" in err and "e2" in err


@pytest.mark.parametrize("argv,needle", [
    (["--seeds", "-1"], "--seeds"),
    (["--workers", "0"], "--workers"),
    (["--set", "workload.n_jobz=3"], "n_jobz"),
    (["--set", "noise.sigma=-1"], "noise.sigma"),
    (["--set", "oops"], "KEY=VALUE"),
])
def test_bad_arguments_exit_2_naming_the_field(argv, needle, capsys, tmp_path):
    assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path / "o"), *argv]) == 2
    assert needle in one_line_error(capsys)


def test_unknown_policy_name_exits_2(capsys, tmp_path):
    assert cli.main(["run", tiny(tmp_path, "EvalStap-2"), "--out", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert "EvalStap-2" in err and "EvalStop" in err


def test_run_prints_the_table_and_writes_the_files(capsys, tmp_path):
    out = tmp_path / "o"
    assert cli.main(["run", tiny(tmp_path), "--out", str(out)]) == 0
    printed = capsys.readouterr().out
    assert "\nEvalStop-2+SRTF-Est " in printed and "wall time" in printed   # terminal table
    for name in ("runs.csv", "jobs.csv", "summary.csv", "table.md"):
        assert (out / "tiny" / name).stat().st_size > 0
        assert name == "jobs.csv" or (out / name).stat().st_size > 0
    assert not (out / "jobs.csv").exists()   # job records are per experiment only


def test_a_subcommand_whose_module_is_missing_is_skipped(monkeypatch, capsys):
    monkeypatch.setitem(cli.SUBCOMMANDS, "ghost",
                        ("evalstop_gym.benchmarks.no_such_module", "absent"))
    parser = cli.build_parser()
    with pytest.raises(SystemExit):
        parser.parse_args(["ghost"])
    assert "invalid choice: 'ghost'" in capsys.readouterr().err


@pytest.mark.slow
def test_report_on_a_tiny_matrix(tmp_path):
    """The whole matrix at 12 jobs and one seed: REPRODUCTION.md gets every experiment's rows."""
    target = tmp_path / "REPRODUCTION.md"
    assert cli.main(["report", "--out", str(tmp_path / "r"), "--seeds", "42", "--set",
                     "workload.n_jobs=12", "--reproduction", str(target)]) == 0
    text = target.read_text()
    for exp in ("E1", "E2", "E3", "E4", "E5", "E6", "E7", "E8"):
        assert f"| {exp} |" in text
    assert "EvalStop-2 precision >= 95%" in text and "calibrated" in text
    beyond = (tmp_path / "BEYOND.md").read_text()   # beside the report, never in the repo
    assert "drop-to-noise" in beyond and (tmp_path / "figures" / "beyond_noise.png").stat().st_size


def test_missing_backend_is_a_one_line_error(capsys, tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "ray", None)  # makes `import ray` fail, installed or not
    assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path), "--backend", "ray"]) == 2
    assert "ray" in one_line_error(capsys)


def test_policy_flag_adds_a_cell_to_the_experiment(tmp_path, capsys):
    out = tmp_path / "o"
    assert cli.main(["run", tiny(tmp_path), "--out", str(out), "--policy",
                     "EvalStop-3+FIFO"]) == 0
    runs = pd.read_csv(out / "runs.csv")
    assert {"EvalStop-3"} <= set(runs["detector"]) and "FIFO" in set(runs["base"])
    capsys.readouterr()
    assert cli.main(["run", tiny(tmp_path), "--out", str(out), "--policy", "Nope+FIFO"]) == 2
    assert "Nope" in one_line_error(capsys)


def test_engine_flag_runs_either_engine_to_the_same_files(capsys, tmp_path, monkeypatch):
    """--engine python and --engine native write identical runs; a bad EVALSTOP_ENGINE is a
    one-line error naming the allowed engines."""
    monkeypatch.setenv("EVALSTOP_ENGINE", "fast")   # restored after the test, whatever runs set
    assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path / "x")]) == 2
    assert "auto, native, python" in one_line_error(capsys)
    for engine in ("python", "native"):
        assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path / engine),
                         "--engine", engine]) == 0
    capsys.readouterr()
    assert ((tmp_path / "python" / "runs.csv").read_bytes()
            == (tmp_path / "native" / "runs.csv").read_bytes())


def test_engine_and_isolate_options_leave_the_callers_environment_as_it_was(tmp_path):
    """`main` called in process (tests, notebooks) must not make later runs isolated or pinned."""
    import os

    before = {k: os.environ.get(k) for k in ("EVALSTOP_ENGINE", "EVALSTOP_ISOLATE")}
    assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path / "o"), "--engine", "python",
                     "--isolate"]) == 0
    assert {k: os.environ.get(k) for k in before} == before


def test_engine_and_isolate_travel_with_each_run_spec(tmp_path, monkeypatch):
    """--engine and --isolate reach the run itself (any worker), and never its digest."""
    from evalstop_gym.benchmarks.sweep import runner
    from evalstop_gym.experiment import load_experiment

    seen = []
    real = runner.simulate

    def spy(config, policy, seed, engine=None, isolated=False):
        seen.append((engine, isolated))
        return real(config, policy, seed, engine, isolated=isolated)

    monkeypatch.setattr(runner, "simulate", spy)
    assert cli.main(["run", tiny(tmp_path), "--out", str(tmp_path / "o"), "--engine", "python",
                     "--isolate"]) == 0
    assert seen and set(seen) == {("python", True)}
    exp = load_experiment(tiny(tmp_path))
    plain = runner.specs(exp)
    isolated = runner.specs(exp, options=runner.RunOptions("python", True))
    assert [s.digest for s in plain] == [s.digest for s in isolated]


def test_report_and_run_walk_out_for_stale_temp_files_once(tmp_path, monkeypatch):
    """OUT's lock is taken at the command's entry; the experiments' and collation's own locks
    nest in it, so a killed sweep's temp files are looked for once per command, not per step."""
    from evalstop_gym.benchmarks import durable
    from evalstop_gym.benchmarks.report import reproduction as report
    from evalstop_gym.benchmarks.sweep import pipeline

    walks: list = []
    real = durable.remove_stale
    monkeypatch.setattr(durable, "remove_stale", lambda out: walks.append(out) or real(out))
    exp_path = tiny(tmp_path)

    def fake_report(args):   # report's shape: several experiments, then one collation
        for seeds in ([3], [4]):
            pipeline.run_experiment(pipeline.prepare(exp_path), args.out, seeds)
        pipeline.collate_out(args.out)
        return 0

    monkeypatch.setattr(report, "main", fake_report)
    out = tmp_path / "r"
    (out / "tiny").mkdir(parents=True)
    (out / "tiny" / f"{durable.TMP_PREFIX}left-by-a-kill.csv").write_text("x")
    assert cli.main(["report", "--out", str(out)]) == 0
    assert len(walks) == 1 and not list(out.rglob(f"{durable.TMP_PREFIX}*"))
    assert (out / "runs.csv").exists()
    walks.clear()
    assert cli.main(["run", exp_path, "--out", str(out)]) == 0
    assert len(walks) == 1
    assert cli.main(["report", "--out", str(tmp_path / "bad"), "--workers", "0"]) == 2
    assert not (tmp_path / "bad").exists(), "a bad value fails before OUT is created"


def test_version_names_the_installed_distribution(capsys):
    from importlib.metadata import version

    with pytest.raises(SystemExit) as stop:
        cli.main(["--version"])
    assert stop.value.code == 0
    assert capsys.readouterr().out.strip() == f"evalstop-bench {version('evalstop-gym')}"


@pytest.mark.parametrize("argv", [["-v", "list"], ["list", "-v"], ["list", "--verbose"]])
def test_the_verbose_flag_is_accepted_before_or_after_the_subcommand(argv):
    assert cli.build_parser().parse_args(argv).verbose is True
    assert cli.build_parser().parse_args(["list"]).verbose is False


def test_only_the_named_subcommand_gets_its_options():
    """The top-level parser lists every subcommand; only the one that runs imports its module."""
    parser = cli.build_parser(["list"])
    choices = parser._subparsers._group_actions[0].choices
    assert {"run", "report", "train", "perf"} <= set(choices)
    assert not any(a.dest == "total_timesteps" for a in choices["train"]._actions)
    assert parser.parse_args(["list"]).handler is not None


HEAVY_MODULES = ("torch", "stable_baselines3", "matplotlib", "pandas")
IMPORTED = """
import sys
{code}
print("\\nimported:" + ",".join(m for m in {modules!r} + {own!r} if m in sys.modules))
"""


def modules_after(code: str) -> set[str]:
    import subprocess

    own = tuple(f"evalstop_gym.benchmarks.{m}" for m in (
        "rl.train", "report.reproduction", "perf.engine", "sweep.pipeline", "sweep.runner",
        "sweep.calibrate", "detectors.replay"))
    script = IMPORTED.format(code=code, modules=HEAVY_MODULES, own=own)
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True,
                          check=True)
    return set(filter(None, done.stdout.rpartition("imported:")[2].strip().split(",")))


def test_importing_the_cli_loads_no_heavy_module():
    assert modules_after("import evalstop_gym.benchmarks.cli") == set()


def test_top_level_help_imports_no_subcommand():
    code = ("from evalstop_gym.benchmarks import cli\ntry:\n    cli.main(['--help'])\n"
            "except SystemExit:\n    pass")
    assert modules_after(code) == set()


def test_a_subcommands_help_imports_only_that_subcommand():
    code = ("from evalstop_gym.benchmarks import cli\ntry:\n    cli.main(['perf', '--help'])\n"
            "except SystemExit:\n    pass")
    loaded = modules_after(code)
    assert "evalstop_gym.benchmarks.perf.engine" in loaded
    assert not loaded & {"evalstop_gym.benchmarks.rl.train",
                         "evalstop_gym.benchmarks.report.reproduction", "torch",
                         "stable_baselines3"}


def test_run_s_help_imports_the_sweep_machinery_but_no_learning_library():
    code = ("from evalstop_gym.benchmarks import cli\ntry:\n    cli.main(['run', '--help'])\n"
            "except SystemExit:\n    pass")
    loaded = modules_after(code)
    assert {"evalstop_gym.benchmarks.sweep.pipeline",
            "evalstop_gym.benchmarks.sweep.runner"} <= loaded
    assert not loaded & {"torch", "stable_baselines3",
                         "evalstop_gym.benchmarks.report.reproduction"}
