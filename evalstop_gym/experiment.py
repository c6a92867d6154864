"""Experiments as data: a platform config, overrides, seeds, and the cells to run.

An experiment file (`configs/e2.yaml`) names its platform (`defaults.yaml`), the overrides that
make it this experiment, the seeds, the reference cell that significance tests compare against,
and its cells (a base scheduler and a detector, optionally with their own overrides). An optional
`sweep` crosses every cell with each value of one config parameter; a sweep may instead give one
set of `overrides` per value (for quantities, like a workload mix, that span several keys), and
then `param` only names the swept quantity. A cell may also carry its own `param`/`value` as an
x-coordinate (E5's k) without touching the config.

Reference cells: `reference` is a mapping of cell fields (base, detector, label, value). In a
sweep experiment a reference without `value` is matched at the same sweep value as the cell it
is compared with. `extra_references` names further comparisons (E6: against the 15% row).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from .config import CONFIG_DIR, ConfigError, SimConfig, load_sim_config, read_yaml

EXPERIMENT_KEYS = {"name", "title", "platform", "overrides", "seeds", "reference", "cells",
                   "sweep", "description", "extra_references"}
PAPER_SEEDS = (42, 123, 456, 789, 1024)  # the paper's five seeds, the default of every experiment
CELL_KEYS = {"base", "detector", "label", "overrides", "param", "value"}
REFERENCE_KEYS = {"base", "detector", "label", "value"}
SWEEP_KEYS = {"param", "values", "overrides"}


def split_policy(spec: str) -> tuple[str, str]:
    """'EvalStop-2+SRTF-Est' -> ('EvalStop-2', 'SRTF-Est'); 'SRTF-Est' -> ('none', 'SRTF-Est')."""
    detector, _, base = spec.rpartition("+")
    return detector or "none", base


@dataclass(frozen=True)
class Cell:
    base: str
    detector: str = "none"
    label: str = ""
    overrides: Mapping[str, Any] = field(default_factory=dict)
    param: str = ""
    value: Any = None
    sets_config: bool = True  # False: `param` is only a name for the x-coordinate

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
    extra_references: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    is_sweep: bool = False

    def cell_config(self, cell: Cell) -> SimConfig:
        overrides = dict(cell.overrides)
        if cell.param and cell.sets_config:
            overrides[cell.param] = cell.value
        return self.config.with_overrides(overrides) if overrides else self.config

    def is_reference(self, cell: Cell) -> bool:
        return bool(self.reference) and all(
            getattr(cell, k) == v for k, v in self.reference.items())

    def with_policies(self, specs: Sequence[str]) -> Experiment:
        """Extra cells, e.g. a saved model 'model:ppo.zip+SRTF-Est', at every sweep point."""
        points: dict[str, Cell] = {}
        for cell in self.cells:  # one template cell per sweep point (or one in all)
            key = repr((cell.param, cell.value, cell.overrides)) if self.is_sweep else ""
            points.setdefault(key, cell)
        extra = []
        for spec in specs:
            detector, base = split_policy(spec)
            for template in points.values():
                if self.is_sweep:
                    extra.append(replace(template, base=base, detector=detector, label=""))
                else:
                    extra.append(Cell(base=base, detector=detector))
        return replace(self, cells=(*self.cells, *extra))

    def with_overrides(self, overrides: Mapping[str, Any]) -> Experiment:
        """The same experiment on a modified platform (tests: fewer jobs), validated."""
        if not overrides:
            return self
        return replace(self, config=self.config.with_overrides(overrides)).checked()

    def checked(self) -> Experiment:
        """Itself, once every cell's config has been built (bad overrides fail before a run)."""
        for cell in self.cells:
            self.cell_config(cell)
        return self


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
    exp = Experiment(name=str(data.get("name", path.stem)), title=str(data.get("title", "")),
                     config=config, seeds=_seeds(path.name, data.get("seeds")),
                     cells=tuple(_cells(path.name, data)),
                     reference=_reference(path.name, "reference", data.get("reference")),
                     extra_references={k: _reference(path.name, f"extra_references.{k}", v)
                                       for k, v in (data.get("extra_references") or {}).items()},
                     is_sweep=bool(data.get("sweep")))
    return exp.checked()


def _seeds(where: str, raw: Any) -> tuple[int, ...]:
    if raw is None:
        return PAPER_SEEDS
    if not isinstance(raw, list) or not raw or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in raw):
        raise ConfigError(f"{where}: seeds: expected a non-empty list of whole numbers >= 0, "
                          f"got {raw!r}")
    return tuple(raw)


def _reference(where: str, name: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or set(raw) - REFERENCE_KEYS:
        raise ConfigError(f"{where}: {name}: expected a mapping with keys among "
                          f"{', '.join(sorted(REFERENCE_KEYS))}, got {raw!r}")
    return dict(raw)


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
                          label=item.get("label", ""), overrides=item.get("overrides") or {},
                          param=item.get("param", ""), value=item.get("value"),
                          sets_config=False))
    sweep = data.get("sweep")
    return _swept(where, cells, sweep) if sweep else cells


def _swept(where: str, cells: list[Cell], sweep: Mapping[str, Any]) -> list[Cell]:
    """Every cell at every sweep value, value-major (the order tables and figures use)."""
    if not {"param", "values"} <= set(sweep) or set(sweep) - SWEEP_KEYS:
        raise ConfigError(f"{where}: sweep: expected 'param', 'values' and optionally "
                          f"'overrides' (one mapping per value)")
    values, per_value = list(sweep["values"]), sweep.get("overrides")
    if per_value is not None and (not isinstance(per_value, list)
                                  or len(per_value) != len(values)):
        raise ConfigError(f"{where}: sweep.overrides: expected a list of {len(values)} "
                          f"mappings, one per value")
    out = []
    for i, v in enumerate(values):
        extra = per_value[i] if per_value else {}
        for c in cells:
            out.append(Cell(c.base, c.detector, c.label, {**c.overrides, **extra},
                            sweep["param"], v, sets_config=per_value is None))
    return out


def platform_config(config: str | Path | SimConfig) -> SimConfig:
    """A platform from a SimConfig, "defaults", an experiment name ("e2"), or a YAML path
    (an experiment file gives its platform with the experiment's overrides)."""
    if isinstance(config, SimConfig):
        return config
    if str(config) == "defaults":
        return load_sim_config()
    path = experiment_path(config)
    if path.exists() and "cells" not in read_yaml(path):
        return load_sim_config(path)
    return load_experiment(config).config
