"""Runs that watch rather than stop: a probe (the Bayes oracle recording its posteriors) over a
task's config and seed, saved and resumed as the policy runs are.

A probe is a picklable function `(config, base, seed) -> list of row dicts`; each (task, seed)
is one run, written atomically into `OUT/<task>/probes/` by its worker the moment it ends and
keyed by a digest of the task's config, the base, the seed, the probe's name and the package's
code, so a rerun does only what is missing or stale.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
from tqdm.auto import tqdm

from evalstop_gym.config import SimConfig, to_dict

from .. import durable
from ..sweep.runner import DEFAULT_OPTIONS, backend_context, code_digest, json_default, read_run
from .tasks import Task, task_experiment

Probe = Callable[[SimConfig, str, int], list[dict[str, Any]]]


def task_config(task: Task, base: str) -> SimConfig:
    """The config a task's runs simulate (its experiment with its overrides)."""
    exp = task_experiment(task, base, (0,), ["none"], DEFAULT_OPTIONS)
    return exp.cell_config(exp.cells[0])


def probe_digest(probe: Probe, config: SimConfig, base: str, seed: int) -> str:
    name = f"{probe.__module__}.{probe.__qualname__}"
    blob = json.dumps([to_dict(config), base, seed, name, code_digest()], sort_keys=True,
                      default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def probe_and_save(probe: Probe, config: SimConfig, base: str, seed: int, path: Path,
                   digest: str) -> list[dict[str, Any]]:
    """The probe's rows, its file written by the worker the moment the run ends."""
    rows = probe(config, base, seed)
    durable.write_json(path, {"digest": digest, "rows": rows}, default=json_default)
    return rows


def run_probes(probe: Probe, tasks: Sequence[Task], base: str, seeds: Sequence[int], out: Path,
               workers: int) -> pd.DataFrame:
    """The probe's rows of every (task, seed), with `task` and `seed` columns, in task then seed
    order; runs saved in `out` are read back while their digest holds."""
    configs = {t.id: task_config(t, base) for t in tasks}
    cells = [(t.id, s) for t in tasks for s in seeds]
    digests = [probe_digest(probe, configs[t], base, s) for t, s in cells]
    paths = [out / t / "probes" / f"{probe.__name__}__seed{s}.json" for t, s in cells]
    rows: list[list[dict[str, Any]] | None] = []
    for path, digest in zip(paths, digests, strict=True):
        saved = read_run(path)
        rows.append(saved["rows"] if saved is not None and saved.get("digest") == digest
                    else None)
    todo = [i for i, r in enumerate(rows) if r is None]
    for i in todo:
        paths[i].parent.mkdir(parents=True, exist_ok=True)
    with backend_context("loky", workers, None) as n_jobs, \
            tqdm(total=len(cells), initial=len(cells) - len(todo), desc="oracle runs",
                 unit="run") as bar:
        done = joblib.Parallel(n_jobs=n_jobs, return_as="generator")(
            joblib.delayed(probe_and_save)(probe, configs[cells[i][0]], base, cells[i][1],
                                           paths[i], digests[i]) for i in todo)
        for i, result in zip(todo, done, strict=True):
            rows[i] = result
            bar.update()
    return pd.DataFrame([{"task": t, "seed": s, **row}
                         for (t, s), found in zip(cells, rows, strict=True)
                         for row in found or ()])
