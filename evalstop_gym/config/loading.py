"""Configuration files: strict YAML, `extends` chains, and names resolved beside a file or from
the package.

A file names another (`extends: e2`, `platform: defaults.yaml`) relative to itself; a name not
found there is the packaged file of that name, so a user's file outside the repository can start
from a packaged one. Platform files build a `SimConfig`; experiment files are merged here and
built by evalstop_gym.experiment.
"""

from __future__ import annotations

import contextlib
import os
import re
from collections.abc import Callable, Mapping, Sequence
from functools import partial
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from .schema import SimConfig, check_feasible
from .validation import ConfigError, build

# The packaged experiment and platform files (the repository's configs/, installed as
# evalstop_gym.configs). pip always unpacks a wheel, so this is a directory on disk.
CONFIG_DIR = Path(str(resources.files("evalstop_gym.configs")))


class _StrictLoader(yaml.SafeLoader):
    """safe_load that refuses a key given twice in one mapping (YAML would keep the last)."""

    def construct_mapping(self, node: yaml.MappingNode, deep: bool = False) -> dict:
        self.flatten_mapping(node)
        seen: set[Any] = set()
        for key_node, _ in node.value:
            key = self.construct_object(key_node, deep=True)
            with contextlib.suppress(TypeError):   # unhashable: the base class reports it
                if key in seen:
                    raise yaml.constructor.ConstructorError(
                        None, None, f"key {key!r} given twice", key_node.start_mark)
                seen.add(key)
        return super().construct_mapping(node, deep)


# YAML 1.1 reads 1e-9 (no dot) as text; here it is a number, as in YAML 1.2. The exponent's
# sign is required, so ids such as a Philly cluster's 6214e9 stay text.
_StrictLoader.add_implicit_resolver(
    "tag:yaml.org,2002:float", re.compile(r"^[-+]?(?:[0-9][0-9_]*(?:\.[0-9_]*)?|\.[0-9_]+)"
                                          r"[eE][-+][0-9]+$"), list("-+0123456789."))


def parse_yaml(text: str, where: str) -> Any:
    """YAML text to data; any parse problem is a one-line ConfigError naming `where`."""
    try:
        return yaml.load(text, Loader=_StrictLoader)  # noqa: S506 - a SafeLoader subclass
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark
        at = f" at line {mark.line + 1}, column {mark.column + 1}" if mark else ""
        raise ConfigError(f"{where}: not valid YAML: {exc.problem or exc.context}{at}") \
            from None
    except (yaml.YAMLError, ValueError, OverflowError) as exc:  # e.g. a date 2020-13-01
        raise ConfigError(f"{where}: not valid YAML: {' '.join(str(exc).split())}") from None


def read_yaml(path: Path) -> dict[str, Any]:
    try:
        raw = Path(path).read_bytes()
    except OSError as exc:
        raise ConfigError(f"{path}: cannot read ({exc.strerror})") from None
    try:
        text = raw.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise ConfigError(f"{path}: not UTF-8 text (byte {exc.start}); save it as UTF-8") \
            from None
    data = parse_yaml(text, str(path))
    if data is None:
        return {}
    if not isinstance(data, dict):
        raise ConfigError(f"{path}: expected a mapping at the top level, got "
                          f"{type(data).__name__}")
    return data


def find_config(name: str, beside: Path) -> Path:
    """The YAML file that `name` (a key's value, e.g. `extends` or `platform`) refers to: the
    file beside `beside`, else the packaged one; ".yaml" is added to a name without a suffix."""
    file = name if Path(name).suffix in (".yaml", ".yml") else f"{name}.yaml"
    here = beside / file
    if os.path.isfile(here) or Path(file).is_absolute():   # isfile: False on any OS error
        return here
    if os.path.isfile(CONFIG_DIR / file):
        return CONFIG_DIR / file
    known = ", ".join(p.name for p in sorted(CONFIG_DIR.glob("*.yaml")))
    raise ConfigError(f"{name!r} is neither beside the file ({here}) nor a packaged config "
                      f"(one of {known})")


def extends_chain(path: Path) -> list[tuple[Path, dict[str, Any]]]:
    """Each file of `path`'s `extends` chain with its data, the root first (cycles refused)."""
    chain: list[tuple[Path, dict[str, Any]]] = []
    seen: list[Path] = []
    while True:
        resolved = path.resolve()
        if resolved in seen:
            names = " -> ".join(p.name for p in (*seen, resolved))
            raise ConfigError(f"{path.name}: extends: cycle {names}")
        seen.append(resolved)
        data = read_yaml(path)
        chain.append((path, data))
        if "extends" not in data:
            return chain[::-1]
        parent = data["extends"]
        if not isinstance(parent, str) or not parent or not parent.isprintable():
            raise ConfigError(f"{path.name}: extends: expected a file name, got {parent!r}")
        path = in_file(f"{path.name}: extends", partial(find_config, parent, path.parent))


def merged(chain: Sequence[tuple[Path, Mapping[str, Any]]], files: tuple[str, ...] = (),
           mappings: tuple[str, ...] = (), own: tuple[str, ...] = ()) -> dict[str, Any]:
    """One mapping from an `extends` chain (root first): a later file's key replaces an
    earlier one's, except `mappings` (merged key by key, the later file's keys applied last),
    `files` (names made paths, found from the file that gives them) and `own` (never
    inherited: the last file's alone)."""
    out: dict[str, Any] = {}
    for i, (path, data) in enumerate(chain):
        for key, value in data.items():
            if key == "extends" or (key in own and i < len(chain) - 1):
                continue
            if key in files and isinstance(value, str) and value and value.isprintable():
                value = str(in_file(f"{path.name}: {key}",
                                     partial(find_config, value, path.parent)))
            old = out.get(key)
            if key in mappings and isinstance(old, Mapping) and isinstance(value, Mapping):
                value = {**{k: v for k, v in old.items() if k not in value}, **value}
            out[key] = value
    return out


def load_sim_config(path: Path | str | None = None,
                    overrides: Mapping[str, Any] | None = None) -> SimConfig:
    """Load a platform config YAML (default: configs/defaults.yaml) with dotted overrides.

    A platform file may start from another with `extends: other.yaml` (beside itself, else the
    packaged one) and then give only the dotted keys it changes under `overrides:`.
    """
    path = Path(path) if path is not None else CONFIG_DIR / "defaults.yaml"
    config = _platform(path)
    return check_feasible(config.with_overrides(overrides) if overrides else config)


def _platform(path: Path) -> SimConfig:
    """The platform file's config, its `extends` chain applied in order; a problem in a file is
    reported with its name."""
    (root, data), *children = extends_chain(path)
    config: SimConfig = in_file(root.name, lambda: build(SimConfig, data))
    for child, changes in children:
        unknown = sorted(set(changes) - {"extends", "overrides"}, key=str)
        if unknown:
            raise ConfigError(f"{child.name}: a file with 'extends' takes only 'overrides'; "
                              f"unknown key(s) {', '.join(map(str, unknown))}")
        config = in_file(child.name, partial(config.with_overrides,
                                              changes.get("overrides") or {}))
    return config


def in_file(name: str, make: Callable[[], Any]) -> Any:
    """`make()`, a ConfigError from it prefixed with `name` (the file, or file and key)."""
    try:
        return make()
    except ConfigError as exc:
        raise ConfigError(f"{name}: {exc}") from None
