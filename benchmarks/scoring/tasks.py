"""Scoring tasks: each a simulated experiment with overrides, every policy run on every seed.

Every (task, policy, seed) is one run of the sweep runner (`sweep.runner`), so scoring inherits
what `evalstop-bench run` guarantees: each run saved in `OUT/<task>/runs/` the moment it ends and
keyed by a digest of its config, policy, seed, code and the user's sources (a rerun does only
what is missing or stale), joblib workers, `--isolate` and `--private-seeds`. The runs of every
task go to the workers together, so two workers stay busy however few seeds a task has.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, NamedTuple

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

RUN_COLUMNS = ("recall", "recall_early", "fpr", "jct", "wasted_frac")


@dataclass(frozen=True)
class Task:
    """One task: a simulated experiment with overrides, or the public runs at one density."""

    id: str
    experiment: str = ""                              # simulated: the packaged experiment
    overrides: dict[str, Any] = field(default_factory=dict)
    real: str = ""                                    # real: the density of the public replay

    @property
    def is_real(self) -> bool:
        return bool(self.real)


class TaskRuns(NamedTuple):
    runs: pd.DataFrame   # one row per (task, policy, seed): the run's metrics
    jobs: pd.DataFrame   # one row per job of every run: its record (`metrics.job_records`)


def policy_cell(spec: str, base: str) -> Cell:
    """'TrendTest-0.05' -> the detector over `base`; 'X+FIFO' -> X over FIFO; 'none' -> the
    base alone (NoStop)."""
    detector, given = split_policy(spec) if "+" in spec else (spec, base)
    return Cell(base=given, detector=detector)


def task_experiment(task: Task, base: str, seeds: Sequence[int], policies: Sequence[str],
                    options: RunOptions) -> Experiment:
    """The task as an experiment of one cell per policy, named by the task (its runs' folder),
    its names checked before any run."""
    exp = load_experiment(task.experiment).with_overrides(task.overrides)
    cells = tuple(policy_cell(p, base) for p in policies)
    exp = dataclasses.replace(exp, name=task.id, title=task.id, seeds=tuple(seeds), cells=cells,
                              reference={}, extra_references={}, is_sweep=False).checked()
    return prepared_cells(exp, options, "--import")


def run_tasks(tasks: Sequence[Task], base: str, seeds: Sequence[int], policies: Sequence[str],
              out: Path, workers: int, options: RunOptions) -> TaskRuns:
    """Every policy on every task and seed; runs missing from `out` are run first. Policies are
    named as given (a user's file by the path given)."""
    exps = [task_experiment(t, base, seeds, policies, options) for t in tasks]
    todo = {exp.name: specs(exp, seeds, options) for exp in exps}
    with durable.out_lock(out):
        guard_out(out, [s for group in todo.values() for s in group], options)
        loaded: dict[str, dict[str, dict[str, Any]]] = {name: {} for name in todo}
        pending = [s for name, group in todo.items()   # run files are named alike in each task
                   for s in missing(group, out / name / "runs", loaded[name])]
        for name in todo:   # a worker saves into its task's folder; runs of many tasks at once
            (out / name / "runs").mkdir(parents=True, exist_ok=True)
        _execute_all(pending, out, workers)
        runs: list[pd.DataFrame] = []
        jobs: list[pd.DataFrame] = []
        for exp in exps:
            done = collate(todo[exp.name], out / exp.name / "runs", loaded[exp.name])
            names = dict(zip([c.key for c in exp.cells], policies, strict=True))
            for frame, into in zip(done[:2], (runs, jobs), strict=True):
                into.append(frame.assign(task=exp.name, policy=frame["cell"].map(names)))
    rows = pd.concat(runs, ignore_index=True)
    return TaskRuns(rows[["task", "policy", "seed", *RUN_COLUMNS]],
                    pd.concat(jobs, ignore_index=True))


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
