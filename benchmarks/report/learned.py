"""The learned-stop-policy section of REPRODUCTION.md, from `evalstop-bench train`'s results.

Each training folder holds `results.csv` (one row per policy and held-out seed: the model and the
heuristic baselines, all run through the env) and `results.json` (the training arguments). Every
number comes from those files; the baselines are shown once, from the first folder.
"""

from __future__ import annotations

import argparse
import json
import logging
import shlex
from pathlib import Path
from typing import Any

import pandas as pd

from ..analysis.tables import fmt_ci, to_markdown
from ..usage import UsageError

log = logging.getLogger(__name__)

METRICS = (("reward", "reward", 1.0, 1), ("JCT (min)", "jct", 1.0, 0),
           ("wasted %", "wasted_frac", 100.0, 1), ("precision %", "precision", 100.0, 1),
           ("recall %", "recall", 100.0, 1), ("FPR %", "fpr", 100.0, 1),
           ("stopped", "n_stopped", 1.0, 1))


FIRST = ("algo", "total_timesteps", "seed", "out")   # always shown, in this order
UNSHOWN = ("help", "no_progress")   # options that do not change the results


def training_command(args: dict) -> str:
    """The command line that reproduces a training run from its recorded arguments: --algo,
    --total-timesteps, --seed and --out, then every other option recorded with a value other
    than `evalstop-bench train`'s default (a control=full run, another --config, --set)."""
    from ..rl.train import add_arguments

    parser = argparse.ArgumentParser()
    add_arguments(parser)
    options = {a.dest: a for a in parser._actions if a.option_strings and a.dest not in UNSHOWN}
    parts = ["evalstop-bench train"]
    for dest in [*FIRST, *(d for d in options if d not in FIRST)]:
        if dest in args and (dest in FIRST or args[dest] != options[dest].default):
            parts.extend(_flag(options[dest].option_strings[-1], args[dest]))
    return " ".join(parts)


def _flag(option: str, value: Any) -> list[str]:
    """`--set` once per KEY=VALUE; a list as its items; anything else as one quoted word."""
    if option == "--set":
        return [f"--set {shlex.quote(str(v))}" for v in value or ()]
    if isinstance(value, list):
        return [" ".join([option, *(shlex.quote(str(v)) for v in value)])]
    return [f"{option} {shlex.quote(str(value))}"]


def _row(label: str, group: pd.DataFrame) -> dict[str, str]:
    row = {"policy": label}
    for name, column, scale, decimals in METRICS:
        row[name] = fmt_ci(list(group[column]), scale, decimals)
    return row


COLUMNS = ("policy", "seed", *(column for _, column, _, _ in METRICS))   # results.csv's
ARGS = ("algo", "seed", "config", "total_timesteps")   # results.json's "args" the section reads


def load_learned(folder: Path) -> tuple[pd.DataFrame, dict] | None:
    """A training folder's results (None, with a warning when the folder exists, when it holds
    none); another tool's files there are a one-line UsageError naming what was expected."""
    csv, meta = folder / "results.csv", folder / "results.json"
    if not (csv.is_file() and meta.is_file()):
        if folder.exists():
            log.warning("--learned %s: no results.csv and results.json of `evalstop-bench "
                        "train`; left out of the report", folder)
        return None
    try:
        results, args = pd.read_csv(csv), json.loads(meta.read_text(encoding="utf-8"))["args"]
        lacking = [c for c in COLUMNS if c not in results.columns] + [
            k for k in ARGS if k not in args]
    except (ValueError, KeyError, TypeError, pd.errors.ParserError) as exc:   # not UTF-8 too
        lacking = [f"{type(exc).__name__}: {' '.join(str(exc).split())[:80]}"]
    if lacking or results.empty:
        raise UsageError(f"--learned {folder}: not a folder of `evalstop-bench train` (results."
                         f"csv with columns {', '.join(COLUMNS)}, results.json with args "
                         f"{', '.join(ARGS)}); lacking: {', '.join(lacking) or 'rows'}")
    return results, args


def learned_section(folders: list[Path]) -> str:
    """Markdown: one row per trained model, then the heuristics; empty if no folder has results."""
    loaded = [x for x in (load_learned(f) for f in folders) if x is not None]
    if not loaded:
        return ""
    rows, commands = [], []
    for results, args in loaded:
        model = results["policy"].iloc[0]
        label = f"{args['algo'].upper()}, training seed {args['seed']}"
        rows.append(_row(label, results[results["policy"] == model]))
        commands.append(f"- `{training_command(args)}`")
    first, args = loaded[0]
    for policy, group in first.groupby("policy", sort=False):
        if policy != first["policy"].iloc[0]:
            rows.append(_row(policy, group))
    seeds = ", ".join(str(s) for s in sorted(first["seed"].unique()))
    return "\n".join([
        "## Learned stop policies (stable-baselines3)\n",
        f"Stop policies trained on `EvalStopCluster-v0` (control=\"stop\", {args['config']}, "
        f"{args['total_timesteps']:,} env steps each) and scored on the held-out seeds {seeds}, "
        "through the same env as the heuristics; mean ± 95% CI over those seeds. Rows for "
        "different training seeds show how much training itself varies.\n",
        to_markdown(pd.DataFrame(rows)), "", "Commands:\n", *commands, ""])
