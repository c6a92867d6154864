"""The layering in pyproject.toml's [tool.importlinter] holds, and would catch a breach.

The repository maps policies/, benchmarks/ and configs/ into `evalstop_gym` at install time, which
a plain `lint-imports` in the source tree cannot see. So each test lays the package out as it is
installed (tests/installed_layout.py: a copy in a temporary folder) and runs import-linter on it.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
from installed_layout import installed_layout

pytest.importorskip("importlinter", reason="import-linter is not installed (pip install "
                                           "import-linter)")

LINT = ("import sys; from importlinter.cli import lint_imports_command; "
        "sys.exit(lint_imports_command())")


def lint_imports(tree: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(tree)}
    return subprocess.run([sys.executable, "-c", LINT, "--no-cache"], cwd=tree, env=env,
                          capture_output=True, text=True, timeout=300, check=False)


def test_the_import_contracts_are_kept(tmp_path: Path) -> None:
    done = lint_imports(installed_layout(tmp_path))
    assert done.returncode == 0, done.stdout + done.stderr
    assert "0 broken" in done.stdout and "BROKEN" not in done.stdout


def test_the_simulator_importing_a_policy_breaks_the_layers(tmp_path: Path) -> None:
    """An upward import (sim -> policies), as a breach would be written, fails the check."""
    tree = installed_layout(tmp_path)
    breach = tree / "evalstop_gym" / "sim" / "breach.py"
    breach.write_text("from evalstop_gym.policies import FIFO  # noqa: F401\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "evalstop_gym.sim is not allowed to import evalstop_gym.policies" in done.stdout
    assert "evalstop_gym.sim.breach -> evalstop_gym.policies" in done.stdout


def test_the_simulator_importing_pandas_breaks_the_forbidden_contract(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    (tree / "evalstop_gym" / "sim" / "breach.py").write_text("import pandas  # noqa: F401\n")
    done = lint_imports(tree)
    assert done.returncode != 0
    assert "evalstop_gym.sim.breach -> pandas" in done.stdout


# Every direct import a -> b such that b leads back to a. The package's own __init__ is left
# out: `import evalstop_gym.policies` counts as importing it, a circle Python never walks.
CIRCLES = ("import grimp; g = grimp.build_graph('evalstop_gym'); "
           "[g.remove_import(importer=a, imported='evalstop_gym') for a in list(g.modules) "
           "if 'evalstop_gym' in g.find_modules_directly_imported_by(a)]; "
           "print('\\n'.join(f'{a} -> {b}' for a in sorted(g.modules) "
           "for b in sorted(g.find_modules_directly_imported_by(a)) "
           "if b != a and g.find_shortest_chain(importer=b, imported=a, as_packages=False)))")


def import_circles(tree: Path) -> list[str]:
    done = subprocess.run([sys.executable, "-c", CIRCLES], cwd=tree, capture_output=True,
                          env={**os.environ, "PYTHONPATH": str(tree)}, text=True, timeout=300,
                          check=True)
    return [line for line in done.stdout.splitlines() if line]


def test_no_module_imports_one_that_imports_it_back(tmp_path: Path) -> None:
    assert import_circles(installed_layout(tmp_path)) == []


def test_a_circle_between_two_modules_is_caught(tmp_path: Path) -> None:
    tree = installed_layout(tmp_path)
    traces = tree / "evalstop_gym" / "traces"
    (traces / "circle_a.py").write_text("def f():\n    from .circle_b import g\n    return g\n")
    (traces / "circle_b.py").write_text("from .circle_a import f\n\n\ndef g():\n    return f\n")
    assert "evalstop_gym.traces.circle_a -> evalstop_gym.traces.circle_b" in import_circles(tree)
