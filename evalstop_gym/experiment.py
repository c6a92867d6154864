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

A file anywhere may start from another with `extends: e2`: the parent's keys apply unless the
file gives them (its `overrides` are merged, its name is never inherited). Names in `extends` and
`platform` are files beside the file that gives them, else the packaged ones.

A file may bring the user's own code: `imports:` lists Python files or modules, imported (by the
sweep that runs it, a layer above this module) before its cells are checked, so the detectors and
bases they register resolve by name, and by every worker too (`Experiment.imports`). A cell may
also name a class in a file, `mine.py:SlopeStop-3`. A relative file path is found beside the file
that gives it, else in the current folder; the imports of every file of an `extends` chain apply.

The file's keys are declared as the platform's fields are (`ExperimentFile`, with `_f`), so the
config's one validation mechanism checks both.
"""

from __future__ import annotations

import os
import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from functools import partial
from pathlib import Path
from typing import Annotated, Any

from . import config as cfg
from .config import (
    CONFIG_DIR,
    ConfigError,
    SimConfig,
    Validated,
    _f,
    allow,
    build,
    extends_chain,
    find_config,
    in_file,
    load_sim_config,
    merged,
)

PAPER_SEEDS = (42, 123, 456, 789, 1024)  # the paper's five seeds, the default of every experiment
REFERENCE_KEYS = ("base", "detector", "label", "value")
SAFE_NAME = re.compile(r"(?!.*\.\.)[A-Za-z0-9][A-Za-z0-9_.+=-]*")   # one plain path part


MODEL_PREFIX = "model:"   # not user code: a saved SB3 model (policies.learned)


def is_user_ref(name: str) -> bool:
    """Whether a policy name reads `target:Name[-args]` (a file or module, then a name). Names
    are parsed here, below the policies, so that experiment files read them as policies do."""
    target, sep, attr = name.rpartition(":")
    return bool(sep and target and attr) and not name.startswith(MODEL_PREFIX)


def is_file_ref(ref: str) -> bool:
    return ref.endswith(".py") or "/" in ref or os.sep in ref


def user_target(name: str) -> str | None:
    """The file or module of a `target:Name[-args]` policy name, else None."""
    return name.rpartition(":")[0] if is_user_ref(name) else None


def absolute_ref(ref: str) -> str:
    """A user module as every process imports it alike: a file by its absolute path."""
    return str(Path(ref).expanduser().resolve()) if is_file_ref(ref) else ref.strip()


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
    imports: tuple[str, ...] = ()   # the user's modules its names need (files: absolute paths);
    #                                 imported by `benchmarks.pipeline.prepare` and every worker

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


# ------------------------------------------------------------------ the file's schema
# What an experiment file may hold, declared as the platform's fields are (evalstop_gym.config):
# each key's type and allowed values, so one mechanism checks both and every message names the
# file, the key path and what is allowed.

Scalar = int | float | str | None   # a swept value or an x-coordinate
Overrides = Mapping[str, Any]        # dotted config keys to values, checked by the platform
Reference = Annotated[Mapping[str, Scalar], allow(keys=REFERENCE_KEYS)]


@dataclass(frozen=True)
class CellSpec(Validated):
    """One entry of `cells`: a base scheduler, optionally a detector, a label and overrides."""

    base: str = _f(doc="base scheduler, e.g. SRTF-Est")
    detector: str = _f("none", doc="stop detector, e.g. EvalStop-2; none: the base alone")
    label: str = _f("", doc="the cell's name in tables (default: its policy)")
    overrides: Overrides = _f(factory=dict, doc="dotted config keys for this cell alone")
    param: str = _f("", doc="name of the cell's x-coordinate (e.g. E5's k); sets no config")
    value: Scalar = _f(None, doc="the cell's x-coordinate")


def _one_mapping_per_value(s: SweepSpec) -> tuple[str, str] | None:
    if s.overrides is None or len(s.overrides) == len(s.values):
        return None
    return "overrides", (f"expected a list of {len(s.values)} mappings, one per value, got "
                         f"{len(s.overrides)}")


@dataclass(frozen=True)
class SweepSpec(Validated):
    """`sweep`: every cell at each value of one config parameter (or of one named quantity,
    with one set of overrides per value)."""

    rules = (_one_mapping_per_value,)

    param: str = _f(doc="the dotted config key swept (with `overrides`: only its name)")
    values: tuple[Scalar, ...] = _f(min_items=1, doc="the values, in table order")
    overrides: tuple[Overrides, ...] | None = _f(None, doc="one mapping of dotted keys per value")


@dataclass(frozen=True)
class ExperimentFile(Validated):
    """An experiment file as written (after its `extends` chain is merged)."""

    root = True

    name: str = _f(pattern=SAFE_NAME, pattern_doc="a plain folder name (letters, digits and "
                   "_ . + = -, no '..'); it names the output folder under --out")
    cells: tuple[CellSpec, ...] = _f(min_items=1, doc="the cells run at every seed")
    title: str = _f("", doc="one line for tables and figures")
    description: str = _f("", doc="free text")
    extends: str = _f("", doc="an experiment this one starts from (beside this file, else "
                      "packaged, e.g. e2): its keys apply unless given here, overrides merged")
    platform: str = _f("defaults.yaml", doc="platform file (beside this file, else packaged)")
    overrides: Overrides | None = _f(None, doc="dotted config keys applied to the platform")
    seeds: tuple[int, ...] | None = _f(None, 0, None, min_items=1, distinct=True,
                                       doc="seeds of every cell (default: the paper's five)")
    reference: Reference | None = _f(None, doc="the cell significance tests compare against")
    extra_references: Mapping[str, Reference] | None = _f(None, doc="further named references")
    sweep: SweepSpec | None = _f(None, doc="one config parameter crossed with every cell")
    imports: tuple[str, ...] | None = _f(None, min_items=1, doc="Python files (beside this "
                                         "file, else the current folder) or modules imported "
                                         "first: the names they register resolve in cells")


# ------------------------------------------------------------------ loading

def experiment_path(name: str | Path) -> Path:
    path = Path(name)
    if path.suffix in (".yaml", ".yml"):
        return path
    return CONFIG_DIR / f"{name}.yaml"


def read_experiment(path: Path) -> dict[str, Any]:
    """The file's data with its `extends` chain merged: a parent's keys apply unless the file
    gives them, `overrides` merged key by key, `platform` found from the file that names it
    (beside it, else packaged); the name is always the file's own (default: its stem)."""
    chain = [(p, located(p, d)) for p, d in extends_chain(path)]
    data = merged(chain, files=("platform",), mappings=("overrides",), own=("name",))
    given = [d["imports"] for _, d in chain if "imports" in d]
    if given and all(isinstance(g, list) for g in given):   # else the schema names the bad one
        data["imports"] = list(dict.fromkeys(r for g in given for r in g))
    data.setdefault("name", path.stem)
    if "platform" not in data:
        data["platform"] = str(find_config("defaults.yaml", path.parent))
    return data


def located(path: Path, data: dict[str, Any]) -> dict[str, Any]:
    """`data` of the file `path` with its relative user file paths (`imports`, cells'
    `mine.py:Name`) made absolute: beside the file, else in the current folder. Values of the
    wrong type are left to the schema, which names them."""
    def beside(ref: str) -> str | None:
        for folder in (path.parent, Path.cwd()):
            candidate = folder / Path(ref).expanduser()
            if candidate.is_file():
                return str(candidate.resolve())
        return None

    out = dict(data)
    imports = data.get("imports")
    if isinstance(imports, list):
        out["imports"] = list(imports)
        for i, ref in enumerate(imports):
            if isinstance(ref, str) and is_file_ref(ref):
                found = beside(ref)
                if found is None:
                    raise ConfigError(f"{path.name}: imports[{i}]: {ref!r} is neither beside "
                                      f"the file ({path.parent / ref}) nor in the current "
                                      f"folder ({Path.cwd() / ref})")
                out["imports"][i] = found
    cells = data.get("cells")
    if isinstance(cells, list):
        out["cells"] = [_cell_located(c, beside) for c in cells]
    return out


def _cell_located(cell: Any, beside: Callable[[str], str | None]) -> Any:
    """A cell whose `base`/`detector` names `mine.py:Name` with the file's absolute path."""
    if not isinstance(cell, dict):
        return cell
    out = dict(cell)
    for key in ("base", "detector"):
        name = cell.get(key)
        if not isinstance(name, str):
            continue
        target = user_target(name)
        if target and is_file_ref(target) and not os.path.isabs(target):
            found = beside(target)
            if found is not None:
                out[key] = f"{found}:{name[len(target) + 1:]}"
    return out


def is_experiment(path: Path) -> bool:
    """Whether a YAML file is an experiment (it or a file it extends has `cells`), not a
    platform."""
    return any("cells" in data for _, data in extends_chain(path))


def list_experiments() -> list[str]:
    """Names of the experiment files in configs/ (every YAML with `cells`)."""
    return [path.stem for path in sorted(CONFIG_DIR.glob("*.yaml")) if is_experiment(path)]


def load_experiment(name: str | Path) -> Experiment:
    path = experiment_path(name)
    if not path.exists():
        known = ", ".join(list_experiments())
        raise ConfigError(f"experiment {str(name)!r}: no file {path}; known: {known}")
    where = path.name
    spec: ExperimentFile = in_file(where, partial(build, ExperimentFile, read_experiment(path),
                                              root=""))
    config = in_file(where, partial(load_sim_config, Path(spec.platform), spec.overrides or {}))
    imports = tuple(absolute_ref(ref) for ref in spec.imports or ())
    cells = [Cell(c.base, c.detector, c.label, c.overrides, c.param, c.value, sets_config=False)
             for c in spec.cells]
    exp = Experiment(name=spec.name, title=spec.title, config=config,
                     seeds=spec.seeds or PAPER_SEEDS,
                     cells=tuple(_swept(cells, spec.sweep) if spec.sweep else cells),
                     reference=spec.reference or {},
                     extra_references=spec.extra_references or {},
                     is_sweep=spec.sweep is not None, imports=imports)
    named = {"reference": exp.reference,
             **{f"extra_references.{k}": v for k, v in exp.extra_references.items()}}
    for label, ref in named.items():
        if ref and not any(exp.is_reference(c, ref) for c in exp.cells):
            raise ConfigError(f"{where}: {label}: {ref!r} matches no cell; its fields must "
                              f"equal those of one of the cells")
    return exp.checked()


def _swept(cells: list[Cell], sweep: SweepSpec) -> list[Cell]:
    """Every cell at every sweep value, value-major (the order tables and figures use)."""
    extras = sweep.overrides or ({},) * len(sweep.values)
    return [Cell(c.base, c.detector, c.label, {**c.overrides, **extra}, sweep.param, v,
                 sets_config=sweep.overrides is None)
            for v, extra in zip(sweep.values, extras, strict=True) for c in cells]


def platform_config(config: str | Path | SimConfig) -> SimConfig:
    """A platform from a SimConfig, "defaults", an experiment name ("e2"), or a YAML path
    (an experiment file gives its platform with the experiment's overrides)."""
    if isinstance(config, SimConfig):
        return config
    if str(config) == "defaults":
        return load_sim_config()
    path = experiment_path(config)
    if path.exists() and not is_experiment(path):
        return load_sim_config(path)
    return load_experiment(config).config
