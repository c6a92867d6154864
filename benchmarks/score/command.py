"""`evalstop-bench score POLICY... --suite evalstop-v1 --out DIR`: one way to score any policy.

Runs each policy on the suite's tasks (simulated: every test seed, through the sweep runner;
real: the public runs, for detectors), normalises each task's measure (NoStop = 0, the task's
reference = 1), aggregates (IQM and stratified-bootstrap 95% CI) and writes, into --out:
scores/<policy>.json (one score file per policy), scores.csv (one row per policy and task),
scores.md and profile.{png,pdf} (performance profiles). Every run is saved as it ends, so the same
command resumes. `--leaderboard docs/leaderboard.md` writes the page from every score file in
--out; `--measure-references` measures a suite's anchors (once per suite version).
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pandas as pd

import evalstop_gym
from evalstop_gym.policies.user_code import MODEL_PREFIX

from .. import durable
from ..scoring.tasks import policy_cell, run_tasks
from ..sweep.command import add_import_argument, add_isolation_arguments, run_options
from ..sweep.runner import RunOptions, code_digest, input_digest
from ..usage import UsageError, check_output
from . import leaderboard, real
from .aggregate import score_record
from .normalise import normalised
from .page import PAGE
from .suite import Suite, load_suite

log = logging.getLogger(__name__)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("policies", nargs="*", metavar="POLICY",
                   help="detectors (over the suite's base, SRTF-Est) or DETECTOR+BASE, "
                        "FILE.py:Name-ARGS, model:PATH.zip; 'none' is NoStop")
    p.add_argument("--suite", default="evalstop-v1",
                   help="a packaged suite (evalstop-v1) or a suite YAML file")
    p.add_argument("--out", type=Path, default=Path("results/score"),
                   help="folder for the runs, the score files and the tables (default: "
                        "results/score); the same command again resumes")
    p.add_argument("--workers", type=int, default=1,
                   help="simulated runs in parallel, >= 1 (capped at this machine's CPUs)")
    p.add_argument("--as", dest="label", metavar="NAME",
                   help="score the policies as one row NAME, each one training run of it (five "
                        "seeds of a PPO model): their runs are pooled, and the CI resamples "
                        "them within each task")
    p.add_argument("--leaderboard", type=Path, metavar="PAGE.md",
                   help="write the leaderboard page from every score file in --out")
    p.add_argument("--measure-references", action="store_true",
                   help="measure the suite's anchors (NoStop, the oracle, the best known) and "
                        "write them beside its YAML file")
    add_import_argument(p)
    add_isolation_arguments(p)   # the real tasks are skipped when isolated: they replay here


def check_args(args: argparse.Namespace) -> None:
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected a whole number >= 1")
    if not (args.policies or args.leaderboard or args.measure_references):
        raise UsageError("POLICY: name at least one policy, or give --leaderboard or "
                         "--measure-references")
    if args.label is not None and not args.policies:
        raise UsageError(f"--as {args.label}: name the policies it groups")
    if len(set(args.policies)) != len(args.policies):
        raise UsageError(f"POLICY: {' '.join(args.policies)}: each policy once")
    check_output(args.out, "--out", "dir")


def provenance(policy: str, suite: Suite, options: RunOptions) -> dict[str, Any]:
    """What a score was made on and with; the same inputs give the same dict."""
    secret = options.private_seeds
    return {"suite": suite.name, "suite_digest": suite.digest,
            "package_version": evalstop_gym.__version__, "code_digest": code_digest(),
            "policy_digest": input_digest(policy_cell(policy, suite.base), options),
            "isolated": options.isolated,
            "private_seeds": secret.fingerprint if secret is not None else None,
            "training": training(policy, suite)}


TRAINING_KEYS = ("algo", "control", "config", "base_scheduler", "total_timesteps", "num_envs",
                 "n_envs", "seed", "overrides")


def training(policy: str, suite: Suite) -> dict[str, Any] | None:
    """How a `model:` policy was trained, from the results.json `train` saves beside it."""
    detector = policy_cell(policy, suite.base).detector
    if not detector.startswith(MODEL_PREFIX):
        return None
    saved = Path(detector[len(MODEL_PREFIX):]).with_name("results.json")
    try:
        args = json.loads(saved.read_text())["args"]
    except (OSError, ValueError, KeyError):
        return None
    return {k: args.get(k) for k in TRAINING_KEYS}


def real_rows(suite: Suite, policies: Sequence[str], out: Path,
              options: RunOptions) -> pd.DataFrame:
    """The detectors' rows on the real tasks (none when isolated: the replay runs here)."""
    if options.isolated or not suite.real:
        return pd.DataFrame()
    runs = real.public_runs(suite)
    rows = [real.real_row(p, policy_cell(p, suite.base).detector, t, suite, out, runs)
            for p in policies if real.applies(policy_cell(p, suite.base).detector)
            for t in suite.real]
    return pd.DataFrame(rows)


def score(suite: Suite, policies: Sequence[str], out: Path, workers: int,
          options: RunOptions, label: str | None = None) -> list[dict[str, Any]]:
    """Every policy's score record (or, with `label`, one record of them all), its runs done
    or read back from `out`."""
    sim = run_tasks(suite.simulated, suite.base, suite.seeds, policies, out, workers,
                    options).runs
    rows = normalised(pd.concat([sim, real_rows(suite, policies, out, options)],
                                ignore_index=True), suite)
    rows = rows.rename(columns={"policy": "member"})
    if label is not None:   # one row: its members' provenance, each policy's own
        members = {p: provenance(p, suite, options) for p in policies}
        first = members[policies[0]]
        common = {k: v for k, v in first.items() if k not in ("policy_digest", "training")}
        for key in ("policy_digest", "training"):
            common[key] = {p: m[key] for p, m in members.items()}
        return [score_record(label, rows, suite, common)]
    return [score_record(p, rows[rows.member == p], suite, provenance(p, suite, options))
            for p in policies]


def write_scores(records: Sequence[dict[str, Any]], out: Path, suite: Suite) -> str:
    """Each score file, scores.csv, scores.md and the profile figure; returns the markdown."""
    from ..analysis.figures import save
    from .profile import draw_profiles

    for r in records:
        durable.write_text(out / "scores" / real.file_name(r["policy"]),
                           json.dumps(r, indent=1, sort_keys=True) + "\n")
    table = pd.DataFrame([{"policy": r["policy"], **t} for r in records for t in r["tasks"]])
    durable.write_csv(table, out / "scores.csv")
    text = "\n".join(leaderboard.summary_table(leaderboard.ranked(list(records)))) + "\n"
    durable.write_text(out / "scores.md", text)
    save(draw_profiles(records, {t.id for t in suite.real}), out, "profile")
    return text


def main(args: argparse.Namespace) -> int:
    check_args(args)
    suite = load_suite(args.suite)
    options = run_options(args)   # a bad isolation flag fails before OUT is created
    if args.measure_references:
        from .references import measure_references

        print(f"wrote {measure_references(suite, args.out, args.workers)}")
        suite = load_suite(args.suite)
    if args.policies:
        for task in suite.tasks:   # every anchor present, and measured on today's data,
            suite.reference(task)  # before any run
        if suite.real and not options.isolated:
            real.public_runs(suite)
        records = score(suite, args.policies, args.out, args.workers, options, args.label)
        print(write_scores(records, args.out, suite))
    if args.leaderboard is not None:
        records = leaderboard.read_scores(args.out, suite)
        command = (f"evalstop-bench score --suite {args.suite} --out "
                   f"{shlex.quote(str(args.out))} --leaderboard {args.leaderboard}")
        leaderboard.write_page(args.leaderboard, records, suite, command, PAGE,
                              shlex.quote(str(args.out)))
        print(f"wrote {args.leaderboard} ({len(records)} score files)")
    return 0
