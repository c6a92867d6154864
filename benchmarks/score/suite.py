"""A scoring suite as data: tasks, test seeds and reference values, fixed by a digest.

A suite is a YAML file (`suites/evalstop-v1.yaml`) and the references measured for it (the JSON
beside it, written by `evalstop-bench score --measure-references`). Its digest hashes both, so a
score file that records it says exactly what it was scored on; a packaged version's digest is
pinned in `PINNED`, and a packaged suite whose content no longer matches is refused: a change to
tasks, seeds or references is a new version, never a silent edit of an old one.
"""

from __future__ import annotations

import hashlib
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from ..scoring.tasks import Task
from ..usage import UsageError

SUITES_DIR = Path(__file__).parent / "suites"
REAL_DENSITIES = ("native", "5%", "10%", "15%")   # corpus.scoring.DENSITIES' names
MEASURES = ("informedness",)
# each packaged version's digest: editing its tasks, seeds or references needs a new version
PINNED = {"evalstop-v1": "c9f1bf32484cc100"}


@dataclass(frozen=True)
class Suite:
    name: str
    base: str
    seeds: tuple[int, ...]
    measure: str
    real_split: str
    candidates: tuple[str, ...]
    real_runs: int | None               # the first N public runs of the split (tests); None: all
    tasks: tuple[Task, ...]
    references: dict[str, dict[str, Any]]   # task id -> {"value": ..., "source": ..., ...}
    path: Path

    @property
    def digest(self) -> str:
        """What a score depends on in the suite: its definition and its reference values."""
        return digest_of(definition(self), self.references)

    @property
    def simulated(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if not t.is_real)

    @property
    def real(self) -> tuple[Task, ...]:
        return tuple(t for t in self.tasks if t.is_real)

    @property
    def references_path(self) -> Path:
        return references_path(self.path)

    def reference(self, task: Task) -> dict[str, Any]:
        """The task's reference, or a one-line error saying how to measure it."""
        if task.id not in self.references:
            raise UsageError(f"suite {self.name}: task {task.id!r} has no reference value; run "
                             f"`evalstop-bench score --measure-references --suite {self.path}`")
        return self.references[task.id]


def references_path(path: Path) -> Path:
    return path.with_name(path.stem + ".references.json")


def definition(suite: Suite) -> dict[str, Any]:
    """The suite's fields that define it (everything but the references and its location)."""
    return {"name": suite.name, "base": suite.base, "seeds": list(suite.seeds),
            "measure": suite.measure, "real_split": suite.real_split,
            "candidates": list(suite.candidates), "real_runs": suite.real_runs,
            "tasks": [{"id": t.id, "experiment": t.experiment, "overrides": t.overrides,
                       "real": t.real} for t in suite.tasks]}


def digest_of(*parts: Any) -> str:
    blob = json.dumps(parts, sort_keys=True, separators=(",", ":"))
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def suite_path(name: str | Path) -> Path:
    """A packaged suite by name (evalstop-v1), else a YAML file of the user's."""
    packaged = SUITES_DIR / f"{name}.yaml"
    if str(name) in PINNED and packaged.is_file():
        return packaged
    path = Path(name)
    if path.suffix in (".yaml", ".yml") and path.is_file():
        return path
    raise UsageError(f"--suite {name}: expected a packaged suite ({', '.join(PINNED)}) or a "
                     f"YAML file")


def _task(i: int, raw: Any, where: str) -> Task:
    if not isinstance(raw, dict) or not isinstance(raw.get("id"), str):
        raise UsageError(f"{where}: tasks[{i}]: expected a mapping with an 'id'")
    real, experiment = str(raw.get("real", "")), str(raw.get("experiment", ""))
    if bool(real) == bool(experiment):
        raise UsageError(f"{where}: tasks[{i}] ({raw['id']}): give one of 'experiment' "
                         f"(simulated) or 'real' (public runs)")
    if real and real not in REAL_DENSITIES:
        raise UsageError(f"{where}: tasks[{i}].real {real!r}: expected one of "
                         f"{', '.join(REAL_DENSITIES)}")
    return Task(raw["id"], experiment, dict(raw.get("overrides") or {}), real)


def load_suite(name: str | Path) -> Suite:
    """The suite and its references, checked; a packaged one must match its pinned digest."""
    path = suite_path(name)
    raw = yaml.safe_load(path.read_text())
    where = path.name
    seeds = tuple(int(s) for s in raw.get("seeds") or ())
    if not seeds or any(s < 0 for s in seeds) or len(set(seeds)) != len(seeds):
        raise UsageError(f"{where}: seeds: expected distinct whole numbers >= 0")
    if raw.get("measure") not in MEASURES:
        raise UsageError(f"{where}: measure {raw.get('measure')!r}: expected one of "
                         f"{', '.join(MEASURES)}")
    tasks = tuple(_task(i, t, where) for i, t in enumerate(raw.get("tasks") or ()))
    if len({t.id for t in tasks}) != len(tasks) or not tasks:
        raise UsageError(f"{where}: tasks: expected at least one, each id once")
    refs_file = references_path(path)
    refs = json.loads(refs_file.read_text()) if refs_file.is_file() else {}
    suite = Suite(str(raw["name"]), str(raw.get("base", "SRTF-Est")), seeds, raw["measure"],
                  str(raw.get("real_split", "test")),
                  tuple(raw.get("reference_candidates") or ()), raw.get("real_runs"), tasks,
                  refs, path)
    pinned = PINNED.get(suite.name)
    if path.parent == SUITES_DIR and pinned not in (None, suite.digest):
        raise UsageError(f"suite {suite.name}: its content changed (digest {suite.digest}, "
                         f"pinned {pinned}); a changed suite is a new version: copy it under a "
                         f"new name")
    return suite
