"""Experiments as data: a platform config, overrides, seeds, and the cells to run.

An experiment file (`configs/e2.yaml`) names its platform (`defaults.yaml`), the overrides that
make it this experiment, the seeds, the reference cell that significance tests compare against,
and its cells (a base scheduler and a detector, optionally with their own overrides). An optional
`sweep` crosses every cell with each value of one config parameter.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .config import CONFIG_DIR, ConfigError, SimConfig, load_sim_config, read_yaml

EXPERIMENT_KEYS = {"name", "title", "platform", "overrides", "seeds", "reference", "cells",
                   "sweep", "description"}
CELL_KEYS = {"base", "detector", "label", "overrides"}


@dataclass(frozen=True)
class Cell:
    base: str
    detector: str = "none"
    label: str = ""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    param: str = ""
    value: Any = None

    @property
    def policy(self) -> str:
        """'EvalStop-2+SRTF-Est', or 'SRTF-Est' for a base scheduler alone."""
        return self.base if self.detector == "none" else f"{self.detector}+{self.base}"

    @property
    def key(self) -> str:
        """A unique, file-name-safe id of the cell within its experiment."""
        parts = [self.label or self.policy]
        if self.param:
            parts.append(f"{self.param}={self.value}")
        return "__".join(parts).replace("/", "_").replace(" ", "_")


@dataclass(frozen=True)
class Experiment:
    name: str
    title: str
    config: SimConfig
    seeds: tuple[int, ...]
    cells: tuple[Cell, ...]
    reference: Mapping[str, Any] = field(default_factory=dict)

    def cell_config(self, cell: Cell) -> SimConfig:
        overrides = dict(cell.overrides)
        if cell.param:
            overrides[cell.param] = cell.value
        return self.config.with_overrides(overrides) if overrides else self.config

    def is_reference(self, cell: Cell) -> bool:
        return bool(self.reference) and all(
            getattr(cell, k) == v for k, v in self.reference.items())


def experiment_path(name: str | Path) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    return CONFIG_DIR / f"{name}.yaml"


def list_experiments() -> list[str]:
    """Names of the experiment files in configs/ (every YAML with `cells`)."""
    names = []
    for path in sorted(CONFIG_DIR.glob("*.yaml")):
        if "cells" in read_yaml(path):
            names.append(path.stem)
    return names


def load_experiment(name: str | Path) -> Experiment:
    path = experiment_path(name)
    if not path.exists():
        known = ", ".join(list_experiments())
        raise ConfigError(f"experiment {str(name)!r}: no file {path}; known: {known}")
    data = read_yaml(path)
    unknown = sorted(set(data) - EXPERIMENT_KEYS)
    if unknown:
        raise ConfigError(f"{path.name}: unknown key(s) {', '.join(unknown)}; allowed: "
                          f"{', '.join(sorted(EXPERIMENT_KEYS))}")
    platform = path.parent / data.get("platform", "defaults.yaml")
    config = load_sim_config(platform, data.get("overrides") or {})
    seeds = tuple(int(s) for s in data.get("seeds", (42, 123, 456, 789, 1024)))
    cells = tuple(_cells(path.name, data))
    for cell in cells:  # validate every cell's overrides now, not mid-sweep
        Experiment(path.stem, "", config, seeds, ()).cell_config(cell)
    return Experiment(name=str(data.get("name", path.stem)), title=str(data.get("title", "")),
                      config=config, seeds=seeds, cells=cells,
                      reference=dict(data.get("reference") or {}))


def _cells(where: str, data: Mapping[str, Any]) -> list[Cell]:
    raw = data.get("cells")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: cells: expected a non-empty list")
    cells = []
    for i, item in enumerate(raw):
        unknown = sorted(set(item) - CELL_KEYS)
        if unknown:
            raise ConfigError(f"{where}: cells[{i}]: unknown key(s) {', '.join(unknown)}; "
                              f"allowed: {', '.join(sorted(CELL_KEYS))}")
        if "base" not in item:
            raise ConfigError(f"{where}: cells[{i}]: missing 'base'")
        cells.append(Cell(base=item["base"], detector=item.get("detector", "none"),
                          label=item.get("label", ""), overrides=item.get("overrides") or {}))
    sweep = data.get("sweep")
    if not sweep:
        return cells
    if set(sweep) != {"param", "values"}:
        raise ConfigError(f"{where}: sweep: expected exactly 'param' and 'values'")
    return [Cell(c.base, c.detector, c.label, c.overrides, sweep["param"], v)
            for v in sweep["values"] for c in cells]
