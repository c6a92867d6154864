"""`--import` reaches the isolated policy's process: the names a user's file registers resolve
there too, and a file the sandboxed policy (run as nobody) cannot read is refused up front."""

from __future__ import annotations

import json
import os
import pwd
import tempfile
import textwrap
from pathlib import Path

import pytest

from evalstop_gym.benchmarks import cli
from evalstop_gym.isolation import IsolatedPolicy, PolicyProcessError, check_readable_by_sandbox
from evalstop_gym.private_seeds import SECRET_ENV
from evalstop_gym.simulate import simulate

NEEDS_ROOT = pytest.mark.skipif(os.name != "posix" or os.geteuid() != 0,
                                reason="the sandbox drops to nobody only when run as root")

REGISTERS = '''
from evalstop_gym.policies import register_detector
from evalstop_gym.policies.stop_at import StopAt

register_detector("IsoUserStop", lambda args: StopAt(float(args[0])))
'''


def user_file(folder: Path, name: str = "isomine.py") -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(REGISTERS))
    return path


def experiment(folder: Path, detector: str = "IsoUserStop-0.5") -> Path:
    from evalstop_gym.config import CONFIG_DIR

    exp = folder / "iso.yaml"
    exp.write_text(f"name: iso\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 15, cluster.gpus: 16}\nseeds: [4]\n"
                   "cells:\n  - {base: SRTF-Est}\n"
                   f"  - {{base: SRTF-Est, detector: {detector}}}\n")
    return exp


def test_an_imported_name_builds_in_the_isolated_process(tmp_path, small_config):
    mine = str(user_file(tmp_path))
    here = simulate(small_config, "IsoUserStop-0.5+SRTF-Est", 3, imports=[mine])
    there = simulate(small_config, "IsoUserStop-0.5+SRTF-Est", 3, isolated=True, imports=[mine])
    assert repr(here.metrics) == repr(there.metrics)
    assert here.metrics["n_stopped"] > 0   # the user's detector did decide
    with pytest.raises(PolicyProcessError, match="IsoUserStop"):   # the child needs the import
        with IsolatedPolicy("IsoUserStop-0.5+SRTF-Est"):
            pass


def test_imports_given_as_one_text_is_one_line_before_any_process(small_config):
    from evalstop_gym.policies import PolicyNameError

    with pytest.raises(PolicyNameError, match=r"^--import 'mine.py': expected a list of Python "
                                              r"files or module names, e.g. \['mine.py'\]$"):
        simulate(small_config, "EvalStop-2+SRTF-Est", 3, isolated=True, imports="mine.py")


def test_the_cli_runs_imports_isolated_with_the_same_results(tmp_path):
    mine, exp = str(user_file(tmp_path)), str(experiment(tmp_path))
    assert cli.main(["run", exp, "--out", str(tmp_path / "plain"), "--import", mine]) == 0
    assert cli.main(["run", exp, "--out", str(tmp_path / "isolated"), "--import", mine,
                     "--isolate"]) == 0
    folder = Path(exp).stem                        # job records stay per experiment
    for name in ("runs.csv", f"{folder}/runs.csv", f"{folder}/jobs.csv"):
        plain, isolated = (tmp_path / d / name for d in ("plain", "isolated"))
        assert plain.read_bytes() == isolated.read_bytes()


@pytest.fixture
def private_lab(tmp_path, monkeypatch) -> Path:
    """A private sweep's setting: a seed secret, and a folder only its owner (root) can read."""
    monkeypatch.setenv(SECRET_ENV, "sweep secret")
    folder = tmp_path / "lab"
    folder.mkdir(mode=0o700)
    return folder


def refused(capsys, args: list[str], path: Path) -> str:
    """The one-line error of a private isolated run refused because nobody cannot read `path`."""
    assert cli.main(["run", *args, "--isolate", "--private-seeds"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and f"{path} is not readable by user nobody" in err
    return err


@NEEDS_ROOT
def test_a_file_nobody_cannot_read_is_refused_before_out_with_what_to_do(tmp_path, capsys,
                                                                         private_lab):
    mine = user_file(private_lab, "isohidden.py")
    out = tmp_path / "out"
    err = refused(capsys, [str(experiment(tmp_path)), "--out", str(out), "--import", str(mine)],
                  mine)
    assert "copy it" in err and "every user can read" in err
    assert not out.exists()
    with pytest.raises(PolicyProcessError, match="not readable by user nobody"):
        check_readable_by_sandbox([], f"{mine}:StopAt-0.5+SRTF-Est")   # a named file too


@NEEDS_ROOT
def test_a_readable_file_runs_as_nobody_with_private_seeds(monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "sweep secret")
    with tempfile.TemporaryDirectory(prefix="evalstop-user-") as name:   # readable by all
        shared = Path(name)
        shared.chmod(0o755)
        mine = user_file(shared, "isoshared.py")
        mine.chmod(0o644)
        out = shared / "out"
        assert cli.main(["run", str(experiment(shared)), "--out", str(out), "--import",
                         str(mine), "--isolate", "--private-seeds", "--policy-timeout",
                         "60"]) == 0
        assert len(list((out / "iso" / "runs").glob("*.json"))) == 2


@NEEDS_ROOT
def test_an_experiment_files_unreadable_import_fails_before_any_run(tmp_path, capsys,
                                                                    private_lab):
    mine = user_file(private_lab, "isolab.py")
    exp = experiment(private_lab)
    exp.write_text(exp.read_text() + "imports: [isolab.py]\n")
    out = tmp_path / "out"
    refused(capsys, [str(exp), "--out", str(out)], mine)
    assert not list(out.glob("*/runs/*.json"))


LEAKS = '''
import json, os
from evalstop_gym.policies import register_detector
from evalstop_gym.policies.stop_at import StopAt

with open({log!r}, "a") as fh:   # what its import-time code could see, and as whom it ran
    fh.write(json.dumps([os.getuid(), os.getpid(), dict(os.environ)]) + "\\n")


class LeakStop(StopAt):
    pass


register_detector("LeakStop", lambda args: LeakStop(float(args[0])))
'''


@pytest.fixture
def world_readable():
    """A folder every user can read (the sandboxed child, as nobody, imports from it)."""
    with tempfile.TemporaryDirectory(prefix="evalstop-user-") as name:
        shared = Path(name)
        shared.chmod(0o755)
        yield shared


def leaky_file(folder: Path) -> tuple[Path, Path]:
    log = folder / "imported.jsonl"
    log.touch()
    log.chmod(0o666)   # nobody may append
    mine = folder / "isoleak.py"
    mine.write_text(LEAKS.format(log=str(log)))
    mine.chmod(0o644)
    return mine, log


def imported_by(log: Path, at_least: int = 1) -> list[list]:
    lines = [json.loads(line) for line in log.read_text().splitlines()]
    assert len(lines) >= at_least, "the user's file was never imported"
    return lines


def assert_only_sandboxed(lines: list[list], secret: str) -> None:
    for uid, pid, env in lines:
        assert pid != os.getpid(), "the user's file ran in the trusted process"
        assert secret not in json.dumps(env) and SECRET_ENV not in env
        if os.geteuid() == 0:
            assert uid == pwd.getpwnam("nobody").pw_uid


def test_private_seeds_import_the_users_files_in_the_sandbox_only(world_readable, monkeypatch):
    """--import FILE and --policy FILE.py:Name under --private-seeds: the file's import-time code
    never runs in evalstop-bench's process, never as its user, never with the secret; the parent
    keys the runs by the digests the sandbox reports."""
    monkeypatch.setenv(SECRET_ENV, "the sweep's secret")
    mine, log = leaky_file(world_readable)
    out = world_readable / "out"
    exp = experiment(world_readable, "LeakStop-0.5")
    args = ["run", str(exp), "--out", str(out), "--import", str(mine),
            "--policy", "LeakStop-0.6+SRTF-Est", "--policy", f"{mine}:LeakStop-0.5+FIFO",
            "--isolate", "--private-seeds", "--policy-timeout", "60"]
    assert cli.main(args) == 0
    assert_only_sandboxed(imported_by(log), "the sweep's secret")
    assert len(list((out / "iso" / "runs").glob("*.json"))) == 4
    log.write_text("")
    assert cli.main(args) == 0   # the same code: every run is cached, nothing is imported here
    assert_only_sandboxed(imported_by(log, at_least=0), "the sweep's secret")
    mine.write_text(mine.read_text() + "\n# edited\n")
    assert cli.main(args) == 0   # edited: its cells run again (in the sandbox)
    assert_only_sandboxed(imported_by(log), "the sweep's secret")


def test_simulate_with_private_seeds_imports_the_users_file_in_the_sandbox_only(
        world_readable, small_config):
    from evalstop_gym.private_seeds import SeedSecret

    mine, log = leaky_file(world_readable)
    result = simulate(small_config, f"{mine}:LeakStop-0.5+SRTF-Est", 3, isolated=True,
                      private_seeds=SeedSecret("api secret"), imports=[str(mine)])
    assert result.metrics["n_stopped"] > 0
    assert_only_sandboxed(imported_by(log), "api secret")


def test_a_bad_name_from_a_private_users_file_is_one_line(world_readable, capsys, monkeypatch):
    monkeypatch.setenv(SECRET_ENV, "s")
    mine, _ = leaky_file(world_readable)
    assert cli.main(["run", str(experiment(world_readable, "LeakStop-0.5")), "--out",
                     str(world_readable / "out"), "--import", str(mine), "--policy",
                     f"{mine}:NoSuchStop-1+FIFO", "--isolate", "--private-seeds"]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "NoSuchStop" in err and "sandbox" in err
    assert not (world_readable / "out" / "iso").exists()
