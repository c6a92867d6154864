"""`--import` reaches the isolated policy's process: the names a user's file registers resolve
there too, and a file the sandboxed policy (run as nobody) cannot read is refused up front."""

from __future__ import annotations

import os
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


def experiment(folder: Path) -> Path:
    from evalstop_gym.config import CONFIG_DIR

    exp = folder / "iso.yaml"
    exp.write_text(f"name: iso\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 15, cluster.gpus: 16}\nseeds: [4]\n"
                   "cells:\n  - {base: SRTF-Est}\n"
                   "  - {base: SRTF-Est, detector: IsoUserStop-0.5}\n")
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
