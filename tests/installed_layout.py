"""The package laid out as it is installed, for tools that read the source tree.

The repository maps policies/, benchmarks/ and configs/ into `evalstop_gym` at install time
(setuptools package-dir), and an editable install hides them from static tools. Import-linter and
mypy therefore run on a copy of the package as installed.
"""

from __future__ import annotations

import shutil
from pathlib import Path

REPO = Path(__file__).parent.parent
MAPPED = ("policies", "benchmarks", "configs")   # installed as evalstop_gym.<name>


def installed_layout(into: Path) -> Path:
    """The package as installed: evalstop_gym/ with the mapped folders inside it."""
    skip = shutil.ignore_patterns("__pycache__", "data", "*.egg-info")
    shutil.copytree(REPO / "evalstop_gym", into / "evalstop_gym", ignore=skip)
    for name in MAPPED:
        shutil.copytree(REPO / name, into / "evalstop_gym" / name, ignore=skip)
    shutil.copy(REPO / "pyproject.toml", into / "pyproject.toml")
    return into
