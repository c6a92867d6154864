"""ruff (pyproject.toml's [tool.ruff]) finds nothing in the repository, like the tests, in CI."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).parent.parent


def test_ruff_finds_nothing() -> None:
    pytest.importorskip("ruff", reason="ruff is not installed (pip install ruff)")
    done = subprocess.run([sys.executable, "-m", "ruff", "check", "--no-cache", str(REPO)],
                          cwd=REPO, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
