"""One experiment end to end: sweep, then the files a reader looks at (tables, CSVs, figures).

Layout under OUT: `OUT/<exp>/{runs/, runs.csv, jobs.csv, summary.csv, table.md, *.png, *.pdf}`
per experiment, and `OUT/{runs,summary}.csv` and `OUT/table.md` collated over every experiment
present in OUT (small: one row per run or cell). The job records stay per experiment only: a
collated jobs.csv grows with every experiment and would be rewritten by every `run`.
A run with --set is a variant with a folder of its own, `OUT/e2__noise.sigma=0.05/` (`variant`),
so variants sharing an OUT never overwrite each other's tables; without --set, `OUT/e2/`. A
user's experiment file that keeps a packaged experiment's name but differs from it gets a
folder of its own too, `OUT/e2__<file>~<hash>/` (`own_name`).
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import logging
import re
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd

from evalstop_gym.config import to_dict
from evalstop_gym.experiment import Cell, Experiment, list_experiments, load_experiment
from evalstop_gym.isolation import check_readable_by_sandbox, sandboxed_sources
from evalstop_gym.policies import make_policy
from evalstop_gym.policies.registry import import_user_modules
from evalstop_gym.policies.user_code import MODEL_PREFIX, is_file_ref, user_target

from .. import durable
from ..analysis.stats import summary_table
from ..analysis.tables import experiment_markdown, terminal_table
from ..catalog import VARIANT_SEP, experiment_figures
from .runner import DEFAULT_OPTIONS, ID_COLUMNS, RunOptions, SweepResult, run_sweep

log = logging.getLogger(__name__)

OUTPUT_FILES = ("runs.csv", "summary.csv")   # collated in OUT (not jobs.csv: large)
RETIRED_FILES = ("jobs.csv",)   # collated by older versions; stale once left in OUT
SAFE_NAME = re.compile(r"[^A-Za-z0-9._,=+-]")   # what a variant folder's name may hold
MAX_VARIANT = 80          # characters of overrides kept in a variant's folder name


class ExperimentOutput(NamedTuple):
    experiment: Experiment
    sweep: SweepResult
    markdown: str
    directory: Path

    def terminal(self) -> str:
        """The experiment's headline table for a terminal (100 columns; table.md has all)."""
        exp = self.experiment
        return (f"## {exp.title or exp.name}\n\n"
                f"{terminal_table(self.sweep.runs, exp.reference, exp.is_sweep)}\n")


def references(exp: Experiment) -> dict[str, Mapping[str, Any]]:
    """Every comparison the experiment asks for, the primary one first."""
    return {"reference": exp.reference, **exp.extra_references}


def prepare(name: str | Path, overrides: Mapping[str, Any] | None = None,
            policies: Sequence[str] = (), options: RunOptions = DEFAULT_OPTIONS) -> Experiment:
    """Load and fully validate an experiment (configs and policy names) before any run starts.
    With private seeds the user's code is imported and its names built in the policy's sandbox
    only (`isolation.sandboxed_sources`), never in this process."""
    exp = own_name(load_experiment(name), name).with_overrides(overrides or {})
    return prepared_cells(exp.with_policies(policies), options, f"{Path(name).name}: imports:")


def prepared_cells(exp: Experiment, options: RunOptions = DEFAULT_OPTIONS,
                   where: str = "--import") -> Experiment:
    """`exp` with every cell's names checked (or, with private seeds, digested in the sandbox)
    and its user files named by absolute path, as every worker imports them; shared by `run`'s
    experiments and `score`'s tasks."""
    private = options.private_seeds is not None
    if not private:
        import_user_modules(all_imports(exp, options),   # together: no name registered twice
                            option=where)
        for cell in exp.cells:
            make_policy(cell.base, cell.detector)  # raises PolicyNameError naming the bad name
    exp = dataclasses.replace(exp, cells=tuple(   # a user's file, by the same path everywhere
        dataclasses.replace(c, base=absolute_user_name(c.base),
                            detector=absolute_user_name(c.detector)) for c in exp.cells))
    if private:   # the digests the runs are keyed by, from the same child
        sandboxed_sources([c.policy for c in exp.cells], all_imports(exp, options),
                          options.timeout)
    return labelled_models(exp)


def all_imports(exp: Experiment, options: RunOptions) -> tuple[str, ...]:
    """--import's files, then the experiment file's own (`imports:`), each once."""
    return tuple(dict.fromkeys((*options.imports, *exp.imports)))


def own_name(exp: Experiment, given: str | Path) -> Experiment:
    """A user's experiment file named like a packaged experiment (a copy of configs/e2.yaml
    that keeps `name: e2`) but differing from it is renamed `e2__<file>~<hash>`, so its runs
    and tables never replace the packaged experiment's in OUT/e2/; an identical copy keeps the
    name (its runs are the same runs)."""

    path = Path(given)
    if path.suffix not in (".yaml", ".yml") or exp.name not in list_experiments():
        return exp
    if exp == load_experiment(exp.name):
        return exp
    blob = json.dumps([to_dict(exp.config), repr(exp.cells), exp.seeds, repr(exp.reference)],
                      sort_keys=True, default=str)
    safe = SAFE_NAME.sub("_", path.stem)[:40]
    tag = hashlib.sha256(blob.encode()).hexdigest()[:8]
    return dataclasses.replace(exp, name=f"{exp.name}{VARIANT_SEP}{safe}~{tag}",
                               title=f"{exp.title or exp.name} [{path}]")


def absolute_user_name(name: str) -> str:
    """'mine.py:SlopeStop-3' -> '/home/me/work/mine.py:SlopeStop-3', so that every worker, whatever
    its current folder, imports the same file."""
    return _user_file_renamed(name, lambda path: str(path.expanduser().resolve()))


def short_user_name(name: str) -> str:
    """'/home/me/work/mine.py:SlopeStop-3' -> 'mine.py:SlopeStop-3': a user's class named by its
    file alone in tables (the full path stays in the `detector` and `base` columns)."""
    return _user_file_renamed(name, lambda path: path.name)


def _user_file_renamed(name: str, rename: Callable[[Path], str]) -> str:
    """`name` with the file of a 'FILE.py:Name' reference renamed; any other name unchanged."""
    target = user_target(name)
    if target is None or not is_file_ref(target):
        return name
    return f"{rename(Path(target))}:{name[len(target) + 1:]}"


def user_labels(cells: Sequence[Cell]) -> dict[str, str]:
    """Each policy's label with its user files named by their file name alone; where two files
    share a name (a/mine.py, b/mine.py), by their folder's and file's, else with a hash of their
    path, so that two users' files never become one cell (one label, one run file name)."""
    renames: list[Callable[[Path], str]] = [
        lambda path: path.name, lambda path: f"{path.parent.name}/{path.name}",
        lambda path: f"{path.name}~{hashlib.sha256(str(path).encode()).hexdigest()[:8]}"]
    labels: dict[str, str] = {}
    for rename in renames:
        labels = {c.policy: dataclasses.replace(
            c, base=_user_file_renamed(c.base, rename),
            detector=_user_file_renamed(c.detector, rename)).policy for c in cells}
        if len(set(labels.values())) == len(labels):
            break
    return labels


def labelled_models(exp: Experiment) -> Experiment:
    """`model:` cells without a label get a readable one, `ppo_stop+SRTF-Est`: the model file's
    name (with its folder's when two models share a file name); cells of a user's file,
    `mine.py:SlopeStop-3+SRTF-Est` (the file's name without its folder)."""
    short = user_labels([c for c in exp.cells if not c.detector.startswith(MODEL_PREFIX)])
    exp = dataclasses.replace(exp, cells=tuple(
        dataclasses.replace(c, label=short[c.policy])
        if not c.label and short.get(c.policy, c.policy) != c.policy else c for c in exp.cells))
    paths = {c.detector: Path(c.detector[len(MODEL_PREFIX):]) for c in exp.cells
             if c.detector.startswith(MODEL_PREFIX) and not c.label}
    if not paths:
        return exp
    names = {d: p.stem for d, p in paths.items()}
    if len(set(names.values())) < len(names):
        names = {d: f"{p.parent.name}.{p.stem}" for d, p in paths.items()}
    if len(set(names.values())) < len(names):
        names = {d: SAFE_NAME.sub("_", str(p.with_suffix(""))) for d, p in paths.items()}
    cells = tuple(dataclasses.replace(c, label=f"{names[c.detector]}+{c.base}")
                  if c.detector in names and not c.label else c for c in exp.cells)
    return dataclasses.replace(exp, cells=cells)


def variant(exp: Experiment, overrides: Mapping[str, Any] | None) -> Experiment:
    """The experiment named after its --set overrides, `e2__noise.sigma=0.05` (readable and
    filesystem-safe; a hash is appended when characters had to be replaced or cut), so each
    variant has its own OUT/<name>/ folder. Without overrides: the experiment unchanged."""

    if not overrides:
        return exp
    text = ",".join(f"{k}={v if isinstance(v, str) else json.dumps(v, default=str)}"
                    for k, v in sorted(overrides.items()))
    safe = SAFE_NAME.sub("_", text)
    if safe != text or len(safe) > MAX_VARIANT:
        safe = f"{safe[:MAX_VARIANT]}~{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return dataclasses.replace(exp, name=f"{exp.name}{VARIANT_SEP}{safe}",
                               title=f"{exp.title or exp.name} [{text}]")


def write_outputs(exp: Experiment, result: SweepResult, directory: Path) -> str:
    """runs.csv, jobs.csv, summary.csv, table.md and the experiment's figures; returns the table."""

    durable.write_csv(result.runs, directory / "runs.csv")   # each file atomically
    durable.write_csv(result.jobs, directory / "jobs.csv")
    durable.write_csv(result.timing, directory / "timing.csv")
    durable.write_csv(summary_table(result.runs, references(exp), exp.is_sweep),
                      directory / "summary.csv")
    md = experiment_markdown(exp.title or exp.name, result.runs, exp.reference, exp.is_sweep)
    durable.write_text(directory / "table.md", md)
    experiment_figures(exp.name, result.runs, directory, exp.config, exp.reference)  # atomic
    return md


def run_experiment(exp: Experiment, out: Path, seeds: Sequence[int] | None = None,
                   workers: int = 1, backend: str = "loky", address: str | None = None,
                   options: RunOptions = DEFAULT_OPTIONS) -> ExperimentOutput:
    """Sweep `exp` into OUT/<exp>/ and write its tables; its file's imports join `options`'."""
    options = options._replace(imports=all_imports(exp, options))
    if options.private_seeds is not None:   # the policy's process, run as nobody, reads them
        check_readable_by_sandbox(options.imports)
        for cell in exp.cells:
            check_readable_by_sandbox((), cell.policy)
    with durable.out_lock(out):
        result = run_sweep(exp, out, seeds, workers, backend, address, options)
        directory = Path(out) / exp.name
        md = write_outputs(exp, result, directory)
    log.info("%s: %d runs (%d new) in %.1f s", exp.name, len(result.runs), result.n_ran,
             result.wall_s)
    return ExperimentOutput(exp, result, md, directory)


def check_collatable(out: Path) -> list[Path]:
    """The experiment folders of OUT (those holding a runs.csv), each runs.csv's header checked
    first: an empty or foreign one would stop the collation with a parser's traceback after
    the sweep, so it is a one-line OutputError naming the file, before any run."""
    out = Path(out)
    if not out.is_dir():
        return []
    dirs = sorted(d for d in out.iterdir() if (d / "runs.csv").is_file())
    for d in dirs:
        path = d / "runs.csv"
        with open(path, encoding="utf-8", errors="replace") as fh:
            header = [c.strip() for c in fh.readline().strip().split(",")]
        lacking = [c for c in ID_COLUMNS if c not in header]
        if lacking:
            raise durable.OutputError(
                f"{path}: {'empty' if header == [''] else 'not a runs.csv of evalstop-bench'}; "
                f"expected a header with {', '.join(ID_COLUMNS)}: move it out of --out {out}")
    return dirs


def collate_out(out: Path) -> None:
    """OUT/{runs,summary}.csv and OUT/table.md over every experiment directory in OUT; a
    collated OUT/jobs.csv an older version left is removed (it would no longer be updated)."""
    with durable.out_lock(out) as out:
        dirs = check_collatable(out)
        for name in OUTPUT_FILES:
            frames = [pd.read_csv(d / name) for d in dirs if (d / name).exists()]
            if frames:
                durable.write_csv(pd.concat(frames, ignore_index=True), out / name)
        tables = [(d / "table.md").read_text() for d in dirs if (d / "table.md").exists()]
        durable.write_text(out / "table.md", "\n".join(tables))
        for name in RETIRED_FILES:
            if (out / name).is_file():
                (out / name).unlink()
                log.warning("%s: removed; job records are per experiment, in %s",
                            out / name, out / "<exp>" / name)
