"""One experiment end to end: sweep, then the files a reader looks at (tables, CSVs, figures).

Layout under OUT: `OUT/<exp>/{runs/, runs.csv, jobs.csv, summary.csv, table.md, *.png, *.pdf}`
per experiment, and `OUT/{runs,jobs,summary}.csv` and `OUT/table.md` collated over every
experiment present in OUT, so `run e2 --out DIR` also leaves E2's files directly in DIR.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from evalstop_gym.experiment import Experiment, load_experiment
from evalstop_gym.policies import make_policy

from .runner import SweepResult, run_sweep
from .stats import summary_table
from .tables import experiment_markdown

log = logging.getLogger(__name__)

OUTPUT_FILES = ("runs.csv", "jobs.csv", "summary.csv")
MATRIX = ("e1", "e2", "e3", "e4", "e5", "e6", "e7", "e8")  # the paper's experiments (SPEC 6)


class ExperimentOutput(NamedTuple):
    experiment: Experiment
    sweep: SweepResult
    markdown: str
    directory: Path


def references(exp: Experiment) -> dict[str, Mapping[str, Any]]:
    """Every comparison the experiment asks for, the primary one first."""
    return {"reference": exp.reference, **exp.extra_references}


def prepare(name: str | Path, overrides: Mapping[str, Any] | None = None,
            policies: Sequence[str] = ()) -> Experiment:
    """Load and fully validate an experiment (configs and policy names) before any run starts."""
    exp = load_experiment(name).with_overrides(overrides or {}).with_policies(policies)
    for cell in exp.cells:
        make_policy(cell.base, cell.detector)  # raises PolicyNameError naming the bad name
    return exp


def write_outputs(exp: Experiment, result: SweepResult, directory: Path) -> str:
    """runs.csv, jobs.csv, summary.csv, table.md and the experiment's figures; returns the table."""
    from .figures import experiment_figures

    directory.mkdir(parents=True, exist_ok=True)
    result.runs.to_csv(directory / "runs.csv", index=False)
    result.jobs.to_csv(directory / "jobs.csv", index=False)
    result.timing.to_csv(directory / "timing.csv", index=False)
    summary_table(result.runs, references(exp), exp.is_sweep).to_csv(
        directory / "summary.csv", index=False)
    md = experiment_markdown(exp.title or exp.name, result.runs, exp.reference, exp.is_sweep)
    (directory / "table.md").write_text(md)
    experiment_figures(exp.name, result.runs, directory, exp.config)
    return md


def run_experiment(exp: Experiment, out: Path, seeds: Sequence[int] | None = None,
                   workers: int = 1, backend: str = "loky",
                   address: str | None = None) -> ExperimentOutput:
    result = run_sweep(exp, out, seeds, workers, backend, address)
    directory = Path(out) / exp.name
    md = write_outputs(exp, result, directory)
    log.info("%s: %d runs (%d new) in %.1f s", exp.name, len(result.runs), result.n_ran,
             result.wall_s)
    return ExperimentOutput(exp, result, md, directory)


def collate_out(out: Path) -> None:
    """OUT/{runs,jobs,summary}.csv and OUT/table.md over every experiment directory in OUT."""
    out = Path(out)
    dirs = sorted(d for d in out.iterdir() if (d / "runs.csv").exists())
    for name in OUTPUT_FILES:
        frames = [pd.read_csv(d / name) for d in dirs if (d / name).exists()]
        if frames:
            pd.concat(frames, ignore_index=True).to_csv(out / name, index=False)
    tables = [(d / "table.md").read_text() for d in dirs if (d / "table.md").exists()]
    (out / "table.md").write_text("\n".join(tables))
