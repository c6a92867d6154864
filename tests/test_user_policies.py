"""A user's own detector or base, in a file outside the repository or a module on the path, runs
from the CLI by `--policy file.py:Name-ARGS` or by the name an `--import`ed file registers; bad
names are one-line errors saying what was expected."""

from __future__ import annotations

import os
import re
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalstop_gym.benchmarks.cli import main
from evalstop_gym.policies.registry import (
    DETECTORS,
    PolicyNameError,
    import_user_modules,
    make_base,
    make_detector,
)

ROOT = Path(__file__).resolve().parents[1]
SMALL = ["--seeds", "0", "1", "--set", "workload.n_jobs=30"]

DETECTOR = '''
from evalstop_gym.policies.detector import DetectorBase, stop
from evalstop_gym.policies.registry import register_detector
from evalstop_gym.sim.protocols import CONTINUE


class SlopeStop(DetectorBase):
    """Stops once the last `k` evals fell by more than `drop` in all."""

    def __init__(self, k=3, drop=0.02):
        self.k, self.drop = int(k), float(drop)
        self.name = f"SlopeStop-{k}-{drop:g}"

    def _decide(self, job, cluster):
        s = job.eval_scores
        if len(s) > self.k and s[-1 - self.k] - s[-1] > self.drop:
            return stop("falling")
        return CONTINUE


register_detector("UserSlope", lambda args: SlopeStop(*map(float, args)))
'''

BASE = '''
from evalstop_gym.policies.base import PriorityScheduler


class FewestGPUsFirst(PriorityScheduler):
    """Waiting jobs start smallest demand first; never preempts."""

    name = "FewestGPUsFirst"

    def key(self, job):
        return job.gpus


def fewest():
    return FewestGPUsFirst()
'''


def write(folder: Path, name: str, text: str) -> Path:
    path = folder / name
    path.write_text(textwrap.dedent(text))
    return path


def rows(out: Path) -> dict[str, str]:
    """cell -> its table.md line."""
    table = (out / "table.md").read_text()
    return {line.split("|")[1].strip(): line for line in table.splitlines()
            if line.startswith("|") and "---" not in line}


def test_a_user_file_scores_by_path_beside_evalstop(tmp_path, capsys):
    mine = write(tmp_path, "mine.py", DETECTOR)
    assert main(["run", "e2", *SMALL, "--out", str(tmp_path / "out"),
                 "--policy", f"{mine}:SlopeStop-3-0.02+SRTF-Est",
                 "--policy", f"{mine}:SlopeStop-1-0.5+SRTF-Est"]) == 0
    table = rows(tmp_path / "out" / "e2__workload.n_jobs=30")
    assert "EvalStop-2+SRTF-Est" in table
    # labelled by the file's name, not its folder; two argument sets are two rows
    assert {"mine.py:SlopeStop-3-0.02+SRTF-Est", "mine.py:SlopeStop-1-0.5+SRTF-Est"} <= set(table)
    assert table["mine.py:SlopeStop-3-0.02+SRTF-Est"] != table["mine.py:SlopeStop-1-0.5+SRTF-Est"]


def test_an_imported_file_registers_names_and_bases(tmp_path, capsys):
    write(tmp_path, "mine.py", DETECTOR)
    base = write(tmp_path, "bases.py", BASE)
    import_user_modules([str(tmp_path / "mine.py")])
    assert "UserSlope" in DETECTORS
    assert make_detector("UserSlope-3-0.02").name == "SlopeStop-3.0-0.02"
    assert make_base(f"{base}:fewest").name == "FewestGPUsFirst"
    assert make_base(f"{base}:FewestGPUsFirst").name == "FewestGPUsFirst"


def test_a_module_on_the_path_scores_by_dotted_name(tmp_path, monkeypatch, capsys):
    pkg = tmp_path / "mylab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    write(pkg, "stops.py", DETECTOR)
    monkeypatch.chdir(tmp_path)   # found as `python -m` would find it, from the current folder
    monkeypatch.syspath_prepend(str(tmp_path))
    assert main(["run", "e2", *SMALL, "--out", "out", "--import", "mylab.stops",
                 "--policy", "mylab.stops:SlopeStop-3+FIFO",
                 "--policy", "UserSlope-3+SRTF-Est"]) == 0
    table = rows(tmp_path / "out" / "e2__workload.n_jobs=30")
    assert {"mylab.stops:SlopeStop-3+FIFO", "UserSlope-3+SRTF-Est"} <= set(table)


@pytest.mark.parametrize(("args", "needle"), [
    (["--import", "no_such_module_here"], "--import no_such_module_here: no module named "
                                          "'no_such_module_here'; expected a Python file"),
    (["--import", "missing.py"], "--import missing.py: missing.py does not exist; expected"),
    (["--policy", "missing.py:X+FIFO"], "--policy 'missing.py:X': missing.py does not exist"),
    (["--policy", "{mine}:Nope+FIFO"], "defines no 'Nope'; expected a Detector or "
                                       "BaseScheduler class, or a factory"),
    (["--policy", "{mine}:SlopeStop"], "which is not a base scheduler; expected a BaseScheduler"),
    (["--policy", "{mine}:2x+FIFO"], "'2x' is not a Python name; expected"),
    (["--policy", "EvalStop-x+FIFO"], "parameter 'x' must be a whole number; expected "
                                      "EvalStop-K[-K_DPO][-best]: K and K_DPO "
                                      "positive integers"),
    (["--policy", "EvalStop-0+FIFO"], "expected EvalStop-K"),
    (["--policy", "StopAt-x+FIFO"], "expected StopAt-P: P a number in (0, 1)"),
])
def test_bad_user_code_is_one_line_naming_the_option(tmp_path, capsys, args, needle):
    mine = write(tmp_path, "mine.py", DETECTOR)
    args = [a.replace("{mine}", str(mine)) for a in args]
    out = tmp_path / "out"
    assert main(["run", "e2", "--seeds", "0", "--out", str(out), *args]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1 and needle in err, err
    assert "invalid literal" not in err and "Traceback" not in err
    assert not out.exists()   # refused before any work


def test_a_user_file_that_fails_to_import_is_one_line(tmp_path):
    broken = write(tmp_path, "broken.py", "import no_such_dependency_xyz\n")
    with pytest.raises(PolicyNameError, match=r"--import .*broken.py: importing it raised "
                                              r"ModuleNotFoundError"):
        import_user_modules([str(broken)])


def test_an_edited_file_is_imported_afresh(tmp_path):
    """A process that imported the old file (a reused worker) builds from the new one."""
    mine = write(tmp_path, "mine.py", DETECTOR)
    assert make_detector(f"{mine}:SlopeStop-3").name == "SlopeStop-3-0.02"
    mine.write_text(mine.read_text().replace('self.name = f"SlopeStop-', 'self.name = f"Edited-'))
    assert make_detector(f"{mine}:SlopeStop-3").name == "Edited-3-0.02"


def test_an_edited_helper_of_a_user_file_or_module_is_imported_afresh(tmp_path, monkeypatch):
    """The helper a user's file imports from its folder counts as its source: edited, the
    process builds from the new helper, as the cache key (which hashes it) expects."""
    (tmp_path / "slope_helper.py").write_text("SUFFIX = 'v1'\n")
    mine = write(tmp_path, "mine_helped.py", DETECTOR.replace(
        'self.name = f"SlopeStop-{k}-{drop:g}"',
        'from slope_helper import SUFFIX\n        self.name = f"SlopeStop-{SUFFIX}"'))
    assert make_detector(f"{mine}:SlopeStop").name == "SlopeStop-v1"
    (tmp_path / "slope_helper.py").write_text("SUFFIX = 'v2'\n")
    assert make_detector(f"{mine}:SlopeStop").name == "SlopeStop-v2"

    pkg = tmp_path / "helpedlab"
    pkg.mkdir()
    (pkg / "__init__.py").write_text("")
    (pkg / "consts.py").write_text("SUFFIX = 'p1'\n")
    write(pkg, "stops.py", DETECTOR.replace(
        'self.name = f"SlopeStop-{k}-{drop:g}"',
        'from helpedlab.consts import SUFFIX\n        self.name = f"SlopeStop-{SUFFIX}"'))
    monkeypatch.syspath_prepend(str(tmp_path))
    assert make_detector("helpedlab.stops:SlopeStop").name == "SlopeStop-p1"
    (pkg / "consts.py").write_text("SUFFIX = 'p2'\n")
    assert make_detector("helpedlab.stops:SlopeStop").name == "SlopeStop-p2"


def test_readme_extending_path_runs_as_written(tmp_path):
    """README's 'Extending': the file it shows, saved as mine.py, and its commands run from the
    user's folder, each printing the user's row beside EvalStop-2."""
    import subprocess
    import sys

    readme = (ROOT / "README.md").read_text()
    section = readme[readme.index("## Extending"):]
    file_text = re.search(r"```python title=\"mine.py\"\n(.*?)^```", section, re.S | re.M)[1]
    (tmp_path / "mine.py").write_text(file_text)
    shell = re.search(r"```shell\n(.*?)^```", section, re.S | re.M)[1]
    commands = [c for c in shell.splitlines() if c.startswith("evalstop-bench")]
    assert any("--import mine.py" in c for c in commands)
    assert any("mine.py:" in c and "--import" not in c for c in commands)
    bin_dir = str(Path(sys.executable).parent)
    for command in commands:
        done = subprocess.run(["bash", "-c", command], cwd=tmp_path, capture_output=True,
                              text=True, timeout=300,
                              env={**os.environ, "MPLBACKEND": "Agg",
                                   "PATH": f"{bin_dir}:{os.environ.get('PATH', '')}"})
        assert done.returncode == 0, f"{command}\n{done.stderr[-2000:]}"
        assert "EvalStop-2+SRTF-Est" in done.stdout and "SlopeStop" in done.stdout


def test_an_experiment_file_imports_user_code_beside_it(tmp_path):
    """`imports: [mine.py]` and `mine.py:Name` in a YAML resolve beside the YAML, whatever the
    current folder, and reach every worker."""
    folder, elsewhere = tmp_path / "lab", tmp_path / "elsewhere"
    folder.mkdir()
    elsewhere.mkdir()
    write(folder, "mine.py", DETECTOR)
    write(folder, "bases.py", BASE)
    write(folder, "mine_e2.yaml", """
        extends: e2
        imports: [mine.py]
        cells:
          - {base: SRTF-Est}
          - {base: SRTF-Est, detector: EvalStop-2}
          - {base: SRTF-Est, detector: UserSlope-1-0.5}
          - {base: bases.py:fewest, detector: UserSlope-3-0.02}
        """)
    bench = Path(sys.executable).parent / "evalstop-bench"
    done = subprocess.run([str(bench), "run", "../lab/mine_e2.yaml",
                           "--seeds", "0", "1", "--set", "workload.n_jobs=20", "--workers", "2",
                           "--out", "out"],
                          cwd=elsewhere, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MPLBACKEND": "Agg"}, check=False)
    assert done.returncode == 0, done.stderr
    table = rows(next((elsewhere / "out").glob("mine_e2*")))
    assert {"EvalStop-2+SRTF-Est", "UserSlope-1-0.5+SRTF-Est",
            "UserSlope-3-0.02+bases.py:fewest"} <= set(table)
    assert table["UserSlope-1-0.5+SRTF-Est"] != table["EvalStop-2+SRTF-Est"]


def test_an_experiment_file_whose_import_fails_is_one_line(tmp_path, capsys):
    write(tmp_path, "broken.py", "raise RuntimeError('nope')\n")
    path = write(tmp_path, "x.yaml", "extends: e2\nimports: [broken.py]\n")
    assert main(["run", str(path), "--seeds", "0", "--out", str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "x.yaml: imports:" in err and "RuntimeError: nope" in err
    assert not (tmp_path / "out").exists()


def test_report_takes_import_and_registers_before_any_experiment_is_checked(tmp_path, capsys):
    from evalstop_gym.benchmarks.cli import build_parser
    from evalstop_gym.benchmarks.sweep.command import check_sweep_args, run_options

    mine = write(tmp_path, "reportmine.py", DETECTOR.replace("UserSlope", "ReportSlope"))
    args = build_parser().parse_args(["report", "--out", str(tmp_path / "out"),
                                      "--import", str(mine)])
    check_sweep_args(args)   # what `report` does first, before it prepares the experiments
    assert make_detector("ReportSlope-3-0.02").name == "SlopeStop-3.0-0.02"
    assert run_options(args).imports == (str(mine.resolve()),)   # to every worker

    out = tmp_path / "out2"
    assert main(["report", "--out", str(out), "--no-beyond",
                 "--import", str(tmp_path / "absent.py")]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and err.startswith("evalstop-bench report: error: --import ")
    assert "absent.py does not exist" in err and not out.exists()


def tiny_experiment(folder: Path) -> Path:
    from evalstop_gym.config import CONFIG_DIR

    exp = folder / "tiny.yaml"
    exp.write_text(f"name: tiny\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 20, cluster.gpus: 16}\nseeds: [3]\n"
                   "cells:\n  - {base: SRTF-Est}\n")
    return exp


def test_two_user_files_with_one_name_are_two_cells(tmp_path, capsys):
    """a/mine.py and b/mine.py, different code, one class name: two rows labelled by folder and
    file, two run files, each file's own numbers; the same command again reruns nothing."""
    eager = DETECTOR.replace("> self.drop", "> -1.0").replace(
        'register_detector("UserSlope", lambda args: SlopeStop(*map(float, args)))', "")
    (tmp_path / "a").mkdir()
    (tmp_path / "b").mkdir()
    first, second = write(tmp_path / "a", "mine.py", DETECTOR), write(tmp_path / "b", "mine.py",
                                                                      eager)
    out = tmp_path / "out"
    argv = ["run", str(tiny_experiment(tmp_path)), "--out", str(out),
            "--policy", f"{first}:SlopeStop-3-0.02+SRTF-Est",
            "--policy", f"{second}:SlopeStop-3-0.02+SRTF-Est"]
    assert main(argv) == 0
    table = rows(out / "tiny")
    assert table["a/mine.py:SlopeStop-3-0.02+SRTF-Est"] != \
        table["b/mine.py:SlopeStop-3-0.02+SRTF-Est"]
    assert len(list((out / "tiny" / "runs").glob("*.json"))) == 3
    capsys.readouterr()
    assert main(argv) == 0
    assert "(0 new)" in capsys.readouterr().out and rows(out / "tiny") == table


SHADOW = '''
from evalstop_gym.policies import register_detector
from evalstop_gym.policies.stop_at import StopAt

register_detector("EvalStop", lambda args: StopAt(0.99){override})
'''


def test_a_file_registering_a_packaged_name_is_refused_naming_both(tmp_path, capsys):
    shadow = write(tmp_path, "shadow.py", SHADOW.format(override=""))
    assert main(["run", str(tiny_experiment(tmp_path)), "--out", str(tmp_path / "out"),
                 "--import", str(shadow)]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "detector 'EvalStop' is registered by " in err
    assert "eval_stop.py and again by " in err and f"{shadow}: rename one" in err
    assert make_detector("EvalStop-2").name.startswith("EvalStop")   # the packaged one still
    assert not (tmp_path / "out" / "tiny").exists()


def test_override_true_replaces_a_packaged_name_with_a_warning_naming_both(tmp_path, caplog):
    shadow = write(tmp_path, "shadow2.py", SHADOW.format(override=", override=True"))
    import_user_modules([str(shadow)])
    assert make_detector("EvalStop-2").name.startswith("StopAt")
    [warning] = [r.getMessage() for r in caplog.records if "override=True" in r.getMessage()]
    assert "eval_stop.py" in warning and str(shadow) in warning


def test_two_imported_files_registering_one_name_are_refused(tmp_path):
    first = write(tmp_path, "one.py", DETECTOR)
    second = write(tmp_path, "two.py", DETECTOR)
    with pytest.raises(PolicyNameError, match=rf"detector 'UserSlope' is registered by {first} "
                                              rf"and again by {second}: rename one"):
        import_user_modules([str(first), str(second)])
