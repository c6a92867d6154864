"""mypy, configured by pyproject.toml's [tool.mypy], finds no error in the package as installed.

`mypy -p evalstop_gym` in the source tree (or on an editable install) cannot see policies/,
benchmarks/ and configs/, which setuptools maps into the package; so mypy checks a copy laid out
as installed (tests/installed_layout.py), with its cache in the temporary folder.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from installed_layout import installed_layout

pytest.importorskip("mypy", reason="mypy is not installed (pip install mypy)")


def mypy(tree: Path) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "mypy", "-p", "evalstop_gym",
               "--config-file", str(tree / "pyproject.toml"),
               "--cache-dir", str(tree / ".mypy_cache")]
    return subprocess.run(command, cwd=tree, capture_output=True, text=True, timeout=900,
                          check=False)


@pytest.fixture(scope="module")
def tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return installed_layout(tmp_path_factory.mktemp("installed"))


def test_the_installed_package_has_no_type_errors(tree: Path) -> None:
    done = mypy(tree)
    print(done.stdout.strip().splitlines()[-1] if done.stdout.strip() else done.stderr)
    assert done.returncode == 0, done.stdout + done.stderr
    assert done.stdout.startswith("Success: no issues found")


@pytest.mark.parametrize("folder", ["policies", "benchmarks"])
def test_a_type_error_in_a_mapped_folder_is_caught(tree: Path, folder: str) -> None:
    """The mapped folders are checked too (the second run reuses the first one's cache)."""
    breach = tree / "evalstop_gym" / folder / "breach.py"
    breach.write_text("def half(n: int) -> int:\n    return n / 2\n")
    try:
        done = mypy(tree)
    finally:
        breach.unlink()
    assert done.returncode == 1, done.stdout + done.stderr
    assert (f"evalstop_gym/{folder}/breach.py:2: error: Incompatible return value type "
            '(got "float", expected "int")') in done.stdout
