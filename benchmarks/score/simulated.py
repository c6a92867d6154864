"""A policy on the suite's simulated tasks: each task a sweep of one cell per policy.

Every (task, policy, seed) is one run of the sweep runner (`sweep.runner`), so scoring inherits
what `evalstop-bench run` guarantees: each run saved in `OUT/<task>/runs/` the moment it ends and
keyed by a digest of its config, policy, seed, code and the user's sources (a rerun does only
what is missing or stale), joblib workers, `--isolate` and `--private-seeds`. The runs of every
task go to the workers together, so two workers stay busy however few seeds a task has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import joblib
import pandas as pd
from tqdm.auto import tqdm

from evalstop_gym.experiment import Cell, Experiment, load_experiment, split_policy

from .. import durable
from ..sweep.pipeline import prepared_cells
from ..sweep.runner import (
    RunOptions,
    RunSpec,
    backend_context,
    collate,
    guard_out,
    missing,
    run_and_save,
    specs,
)
from .suite import Suite, Task

RUN_COLUMNS = ("recall", "recall_early", "fpr", "jct", "wasted_frac")


def policy_cell(spec: str, base: str) -> Cell:
    """'TrendTest-0.05' -> the detector over the suite's base; 'X+FIFO' -> X over FIFO;
    'none' -> the base alone (NoStop)."""
    detector, given = split_policy(spec) if "+" in spec else (spec, base)
    return Cell(base=given, detector=detector)


def task_experiment(task: Task, suite: Suite, policies: Sequence[str],
                    options: RunOptions) -> Experiment:
    """The task as an experiment of one cell per policy, named by the task (its runs' folder),
    its names checked before any run."""
    exp = load_experiment(task.experiment).with_overrides(task.overrides)
    cells = tuple(policy_cell(p, suite.base) for p in policies)
    exp = dataclasses.replace(exp, name=task.id, title=task.id, seeds=suite.seeds, cells=cells,
                              reference={}, extra_references={}, is_sweep=False).checked()
    return prepared_cells(exp, options, "--import")


def run_tasks(suite: Suite, policies: Sequence[str], out: Path, workers: int,
              options: RunOptions) -> pd.DataFrame:
    """One row per (task, policy, seed) with the run's metrics; runs missing from `out` are
    run first. Policies are named as given (a user's file by the path given)."""
    exps = [task_experiment(t, suite, policies, options) for t in suite.simulated]
    todo = {exp.name: specs(exp, suite.seeds, options) for exp in exps}
    with durable.out_lock(out):
        guard_out(out, [s for group in todo.values() for s in group], options)
        loaded: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in todo}
        pending = [s for name, group in todo.items()   # run files are named alike in each task
                   for s in missing(group, out / name / "runs", loaded[name])]
        for name in todo:   # a worker saves into its task's folder; runs of many tasks at once
            (out / name / "runs").mkdir(parents=True, exist_ok=True)
        _execute_all(pending, out, workers)
        frames = []
        for exp in exps:
            runs = collate(todo[exp.name], out / exp.name / "runs", loaded[exp.name])[0]
            names = dict(zip([c.key for c in exp.cells], policies, strict=True))
            frames.append(runs.assign(task=exp.name, policy=runs["cell"].map(names)))
    rows = pd.concat(frames, ignore_index=True)
    return rows[["task", "policy", "seed", *RUN_COLUMNS]]


def _execute_all(pending: Sequence[RunSpec], out: Path, workers: int) -> None:
    """Every task's pending runs through one joblib pool, each saved by its worker in its task's
    folder the moment it ends (`runner.run_and_save`: a Ctrl-C loses no finished run)."""
    if not pending:
        return
    with backend_context("loky", workers, None) as n_jobs:
        done = joblib.Parallel(n_jobs=n_jobs, return_as="generator_unordered")(
            joblib.delayed(run_and_save)(spec, out / spec.experiment / "runs")
            for spec in pending)
        for _ in tqdm(done, total=len(pending), desc="simulated runs", unit="run"):
            pass
