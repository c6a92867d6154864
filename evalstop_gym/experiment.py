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
is compared with; a reference naming neither `base` nor `label` is matched on the cell's own base
(E4: each combination against its base alone). `extra_references` names further comparisons (E6:
against the 15% row).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from . import config as cfg
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

    def is_reference(self, cell: Cell, reference: Mapping[str, Any] | None = None) -> bool:
        """Whether `cell` is the reference (or the given one): every field it names matches."""
        ref = self.reference if reference is None else reference
        return bool(ref) and all(getattr(cell, k) == v for k, v in ref.items())

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
        return replace(self, cells=(*self.cells, *extra)).checked()   # no duplicate cell

    def with_overrides(self, overrides: Mapping[str, Any]) -> Experiment:
        """The same experiment on a modified platform (tests: fewer jobs), validated."""
        if not overrides:
            return self
        return replace(self, config=self.config.with_overrides(overrides)).checked()

    def checked(self) -> Experiment:
        """Itself, once every cell is distinct and its config builds and is feasible (bad
        overrides fail before a run)."""
        seen: dict[str, int] = {}
        for i, cell in enumerate(self.cells):
            if cell.key in seen:
                raise ConfigError(f"{self.name}: cells[{seen[cell.key]}] and cells[{i}] are the "
                                  f"same cell {cell.key!r} (each would overwrite the other's "
                                  f"runs); remove one or give it a label")
            seen[cell.key] = i
            try:
                cfg.check_feasible(self.cell_config(cell))
            except ConfigError as exc:
                raise ConfigError(f"{self.name}: cell {cell.key}: {exc}") from None
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
    where = path.name
    unknown = sorted(set(data) - EXPERIMENT_KEYS, key=str)
    if unknown:
        raise ConfigError(f"{where}: unknown key(s) {', '.join(map(str, unknown))}; allowed: "
                          f"{', '.join(sorted(EXPERIMENT_KEYS))}")
    for key in ("title", "description"):
        _text(where, key, data.get(key, ""))
    platform = path.parent / _text(where, "platform", data.get("platform", "defaults.yaml"))
    overrides = _mapping(where, "overrides", data.get("overrides"))
    try:
        config = load_sim_config(platform, overrides)
    except ConfigError as exc:
        raise ConfigError(f"{where}: {exc}") from None
    extra = _mapping(where, "extra_references", data.get("extra_references"))
    exp = Experiment(name=_folder_name(where, data.get("name", path.stem)),
                     title=data.get("title", ""), config=config,
                     seeds=_seeds(where, data.get("seeds")), cells=tuple(_cells(where, data)),
                     reference=_reference(where, "reference", data.get("reference")),
                     extra_references={k: _reference(where, f"extra_references.{k}", v)
                                       for k, v in extra.items()},
                     is_sweep=bool(data.get("sweep")))
    named = {"reference": exp.reference,
             **{f"extra_references.{k}": v for k, v in exp.extra_references.items()}}
    for label, ref in named.items():
        if ref and not any(exp.is_reference(c, ref) for c in exp.cells):
            raise ConfigError(f"{where}: {label}: {ref!r} matches no cell; its fields must "
                              f"equal those of one of the cells")
    return exp.checked()


SAFE_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.+=-]*")


def _folder_name(where: str, raw: Any) -> str:
    """The experiment's name, which is its output folder under --out: one plain path part."""
    if not isinstance(raw, str) or not SAFE_NAME.fullmatch(raw) or ".." in raw:
        raise ConfigError(f"{where}: name: {raw!r} is not a plain folder name (letters, digits "
                          f"and _ . + = -, no '..'); it names the output folder under --out")
    return raw


def _text(where: str, key: str, raw: Any) -> str:
    if not isinstance(raw, str) or not raw.isprintable():
        raise ConfigError(f"{where}: {key}: expected printable text, got {raw!r}")
    return raw


def _mapping(where: str, key: str, raw: Any) -> dict[str, Any]:
    """A mapping with text keys (None: empty)."""
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or not all(isinstance(k, str) for k in raw):
        raise ConfigError(f"{where}: {key}: expected a mapping with text keys, got {raw!r}")
    return dict(raw)


def _scalar_value(where: str, key: str, raw: Any) -> Any:
    if raw is not None and not isinstance(raw, (str, int, float)):
        raise ConfigError(f"{where}: {key}: expected a number, text or nothing, got {raw!r}")
    return raw


def _seeds(where: str, raw: Any) -> tuple[int, ...]:
    if raw is None:
        return PAPER_SEEDS
    if not isinstance(raw, list) or not raw or not all(
            isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in raw) \
            or len(set(raw)) != len(raw):
        raise ConfigError(f"{where}: seeds: expected a non-empty list of distinct whole numbers "
                          f">= 0, got {raw!r}")
    return tuple(raw)


def _reference(where: str, name: str, raw: Any) -> dict[str, Any]:
    if raw is None:
        return {}
    if not isinstance(raw, Mapping) or set(raw) - REFERENCE_KEYS:
        raise ConfigError(f"{where}: {name}: expected a mapping with keys among "
                          f"{', '.join(sorted(REFERENCE_KEYS))}, got {raw!r}")
    return {k: _scalar_value(where, f"{name}.{k}", v) for k, v in raw.items()}


def _cells(where: str, data: Mapping[str, Any]) -> list[Cell]:
    raw = data.get("cells")
    if not isinstance(raw, list) or not raw:
        raise ConfigError(f"{where}: cells: expected a non-empty list")
    cells = [_cell(where, f"cells[{i}]", item) for i, item in enumerate(raw)]
    sweep = data.get("sweep")
    return _swept(where, cells, sweep) if sweep is not None else cells


def _cell(where: str, name: str, item: Any) -> Cell:
    if not isinstance(item, Mapping):
        raise ConfigError(f"{where}: {name}: expected a mapping with at least 'base', "
                          f"got {item!r}")
    unknown = sorted(set(item) - CELL_KEYS, key=str)
    if unknown:
        raise ConfigError(f"{where}: {name}: unknown key(s) {', '.join(map(str, unknown))}; "
                          f"allowed: {', '.join(sorted(CELL_KEYS))}")
    if "base" not in item:
        raise ConfigError(f"{where}: {name}: missing 'base'")
    text = {k: _text(where, f"{name}.{k}", item.get(k, d))
            for k, d in (("base", ""), ("detector", "none"), ("label", ""), ("param", ""))}
    return Cell(**text, overrides=_mapping(where, f"{name}.overrides", item.get("overrides")),
                value=_scalar_value(where, f"{name}.value", item.get("value")),
                sets_config=False)


def _swept(where: str, cells: list[Cell], sweep: Any) -> list[Cell]:
    """Every cell at every sweep value, value-major (the order tables and figures use)."""
    if not isinstance(sweep, Mapping) or not {"param", "values"} <= set(sweep) \
            or set(sweep) - SWEEP_KEYS:
        raise ConfigError(f"{where}: sweep: expected a mapping with 'param', 'values' and "
                          f"optionally 'overrides' (one mapping per value)")
    param = _text(where, "sweep.param", sweep["param"])
    values = sweep["values"]
    if not isinstance(values, list) or not values:
        raise ConfigError(f"{where}: sweep.values: expected a non-empty list, got {values!r}")
    values = [_scalar_value(where, f"sweep.values[{i}]", v) for i, v in enumerate(values)]
    per_value = sweep.get("overrides")
    if per_value is not None and (not isinstance(per_value, list)
                                  or len(per_value) != len(values)):
        raise ConfigError(f"{where}: sweep.overrides: expected a list of {len(values)} "
                          f"mappings, one per value")
    extras = [_mapping(where, f"sweep.overrides[{i}]", o)
              for i, o in enumerate(per_value or [{}] * len(values))]
    return [Cell(c.base, c.detector, c.label, {**c.overrides, **extra}, param, v,
                 sets_config=per_value is None)
            for v, extra in zip(values, extras, strict=True) for c in cells]


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
