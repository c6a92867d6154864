"""`evalstop-bench corpus public --snapshots DIR`: rebuild the public-run corpus from snapshots.

`sources.json` (shipped beside the corpus, `evalstop_gym/traces/data/public/`) lists every
source: repository, commit, path, licence and where it was read, the model a model card
describes, the kind of training and the log's format. For each, the file is read at its commit
from a snapshot of its repository (`DIR/<owner>+<name>/repo`, `DIR/<owner>+<name>` or
`DIR/<owner>/<name>`: a git directory or a clone; `git show <commit>:<path>`), parsed by the
package's own log readers (`traces.log_formats`: the metric chosen as `replay` chooses it),
oriented, labelled in hindsight (`traces.public_runs.hindsight_label`) and split by repository,
each repository keeping the half `sources.json`'s `halves` records (record a new repository's
half there after its first build, so that later additions never move it).
Runs with fewer than `MIN_EVALS` evals, whose metric is not measured on held-out data, or whose
licence is not permissive, are left out and listed under `skipped`. `runs.csv` and
`provenance.json` are written atomically into `--out` (never into the installed package; copy
them over by hand to update the shipped corpus).
"""

from __future__ import annotations

import argparse
import hashlib
import json
import logging
import re
import subprocess
import tempfile
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.traces.log_formats import read_path
from evalstop_gym.traces.log_metrics import EVAL_TOKENS, KNOWN_METRICS, tokens
from evalstop_gym.traces.logs import LogError, LoggedRun
from evalstop_gym.traces.public_runs import (
    KINDS,
    PERMISSIVE,
    hindsight_label,
    public_dir,
    split_by_repository,
)

from ..durable import write_text
from ..usage import UsageError
from .output import check_out
from .output import to_csv as csv_rows

log = logging.getLogger(__name__)
MIN_EVALS = 10
FILE_NAMES = {"model-card": "README.md", "trainer-state": "trainer_state.json",
              "lightning-csv": "metrics.csv", "keras-csv": "history.csv"}
COLUMNS = ("job_id", "step", "eval_score", "value", "loss", "max_steps", "kind")


def git_dir(snapshots: Path, repo: str) -> Path:
    """The snapshot of `repo` under `snapshots`, in any of the layouts the module names."""
    owner, name = repo.split("/", 1)
    for place in (snapshots / f"{owner}+{name}" / "repo", snapshots / f"{owner}+{name}",
                  snapshots / owner / name):
        for candidate in (place, place / ".git"):
            if (candidate / "HEAD").is_file() and (candidate / "objects").is_dir():
                return candidate
    raise UsageError(f"--snapshots {snapshots}: no snapshot of {repo} (looked for "
                     f"{owner}+{name}/repo, {owner}+{name}, {owner}/{name})")


def file_at(snapshots: Path, source: dict[str, Any]) -> bytes:
    """The source file's bytes at its recorded commit."""
    where = git_dir(snapshots, source["repo"])
    done = subprocess.run(["git", "--git-dir", str(where), "show",
                           f"{source['commit']}:{source['path']}"], capture_output=True)
    if done.returncode:
        raise UsageError(f"{source['repo']}@{source['commit'][:10]}:{source['path']}: "
                         f"{done.stderr.decode(errors='replace').strip()}")
    return done.stdout


def run_id(source: dict[str, Any]) -> str:
    digest = hashlib.sha256(f"{source['repo']}:{source['path']}".encode()).hexdigest()[:6]
    return f"{source['repo'].split('/')[1][:28]}-{digest}"


def parse(source: dict[str, Any], data: bytes) -> LoggedRun:
    """The file's first run, read as `replay` reads it."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "run" / FILE_NAMES[source["format"]]
        path.parent.mkdir()
        path.write_bytes(data)
        return read_path(path, source.get("metric"))[0]


def is_eval_metric(name: str) -> bool:
    """A metric measured on held-out data: named so (eval, val, test...) or a task metric."""
    words = set(tokens(name))
    return bool(words & EVAL_TOKENS) or any(
        re.fullmatch(pattern, w) for _, pattern, _ in KNOWN_METRICS for w in words)


def check_source(source: dict[str, Any]) -> None:
    where = f"sources.json: {source.get('repo')}:{source.get('path')}"
    for key in ("repo", "commit", "path", "licence", "licence_evidence", "kind", "format"):
        if not source.get(key):
            raise UsageError(f"{where}: {key} is missing")
    if source["kind"] not in KINDS:
        raise UsageError(f"{where}: kind {source['kind']!r}; expected one of {', '.join(KINDS)}")
    if source["format"] not in FILE_NAMES:
        raise UsageError(f"{where}: format {source['format']!r}; expected one of "
                         f"{', '.join(FILE_NAMES)}")


def build(sources: Sequence[dict[str, Any]], snapshots: Path,
          halves: dict[str, str] | None = None) -> tuple[list[dict], dict]:
    """(CSV rows, provenance document) of every usable source; `halves`: each repository's
    recorded half, kept (`split_by_repository`)."""
    rows: list[dict[str, Any]] = []
    runs: list[dict[str, Any]] = []
    skipped: list[dict[str, Any]] = []
    for source in sources:
        check_source(source)
        if source["licence"] not in PERMISSIVE:
            skipped.append({**source, "why": f"licence {source['licence']} is not permissive"})
            continue
        try:
            run = parse(source, file_at(snapshots, source))
        except LogError as exc:
            skipped.append({**source, "why": f"unreadable: {exc}"})
            continue
        if not is_eval_metric(run.metric):
            skipped.append({**source, "why": f"{run.metric!r} is not an eval metric"})
            continue
        if len(run.values) < MIN_EVALS:
            skipped.append({**source, "why": f"{len(run.values)} evals (< {MIN_EVALS})"})
            continue
        sign = 1.0 if run.mode == "max" else -1.0
        oriented = sign * np.asarray(run.values)
        label = hindsight_label(oriented)
        rid = run_id(source)
        max_steps = run.max_steps or run.steps[-1]
        for step, value, loss in zip(run.steps, run.values, run.losses, strict=True):
            rows.append({"job_id": rid, "step": step, "eval_score": sign * value,
                         "value": value, "loss": "" if np.isnan(loss) else loss,
                         "max_steps": max_steps, "kind": source["kind"]})
        runs.append({"run_id": rid, **source, "metric": run.metric, "mode": run.mode,
                     "n_evals": len(run.values), "max_steps": max_steps,
                     "label": label.label, "best_at": label.best_at})
    split = split_by_repository([(r["repo"], r["label"]) for r in runs], halves)
    for r in runs:
        r["split"] = split[r["repo"]]
    doc = {"command": "evalstop-bench corpus public --snapshots DIR", "runs": runs,
           "skipped": skipped}
    return rows, doc


def to_csv(rows: Sequence[dict[str, Any]]) -> str:
    return csv_rows(rows, COLUMNS)


def main(args: argparse.Namespace) -> int:
    if args.snapshots is None:
        raise UsageError("corpus public needs --snapshots DIR: a folder holding a snapshot of "
                         "each repository that sources.json names")
    out = check_out(args.out)
    shipped = json.loads((public_dir() / "sources.json").read_text(encoding="utf-8"))
    halves = shipped.get("halves", {})
    if bad := {repo: h for repo, h in halves.items() if h not in ("design", "test")}:
        raise UsageError(f"sources.json halves: {bad}: each half must be design or test")
    rows, doc = build(shipped["sources"], Path(args.snapshots), halves)
    write_text(out / "runs.csv", to_csv(rows))
    write_text(out / "provenance.json", json.dumps(doc, indent=1) + "\n")
    labels = [r["label"] for r in doc["runs"]]
    log.info("%d runs (%d declining, %d healthy, %d ambiguous), %d skipped, written to %s",
             len(labels), labels.count("declining"), labels.count("healthy"),
             labels.count("ambiguous"), len(doc["skipped"]), out)
    return 0
