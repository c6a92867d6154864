"""Griffe extension: load the subpackages that setuptools' `package-dir` maps elsewhere.

The repository keeps `policies/`, `benchmarks/` and `configs/` at its top level and the wheel
installs them as `evalstop_gym.policies`, ... (pyproject's `[tool.setuptools.package-dir]`).
Griffe reads the source tree, where `evalstop_gym/` has no such folders, so without this the API
pages of `evalstop_gym.policies` would not resolve. The mapping is read from pyproject.toml, so a
new mapped folder needs no change here.
"""

from __future__ import annotations

from pathlib import Path

import griffe

try:
    import tomllib
except ModuleNotFoundError:  # Python 3.10: the backport (pip install tomli)
    import tomli as tomllib


def package_dirs(pyproject: Path) -> dict[str, Path]:
    """Dotted package name -> its folder, from `[tool.setuptools.package-dir]`."""
    data = tomllib.loads(pyproject.read_text(encoding="utf-8"))
    mapping = data.get("tool", {}).get("setuptools", {}).get("package-dir", {})
    return {name: pyproject.parent / folder for name, folder in mapping.items()}


class PackageDir(griffe.Extension):
    """Attach each mapped subpackage of a loaded top-level package as its member."""

    def on_package(self, *, pkg: griffe.Module, loader: griffe.GriffeLoader, **kwargs) -> None:
        pyproject = Path(pkg.filepath).parent.parent / "pyproject.toml"
        if not pyproject.is_file():
            return
        for name, folder in package_dirs(pyproject).items():
            parent, _, sub = name.rpartition(".")
            init = folder / "__init__.py"
            if parent != pkg.path or sub in pkg.members or not init.is_file():
                continue
            # griffe has no public call for "load this folder as a submodule"; _load_module is
            # the one its own submodule walk uses (the docs test builds the site, so a change
            # in griffe shows there).
            module = loader._load_module(sub, init, submodules=True, parent=pkg)
            pkg.set_member(sub, module)
            loader.expand_exports(module)

    # griffe before 2 named this hook on_package_loaded; the member check above makes a second
    # call a no-op
    on_package_loaded = on_package
