"""The learned-stop-policy section of REPRODUCTION.md, from `train_stop_policy.py`'s results.

Each training folder holds `results.csv` (one row per policy and held-out seed: the model and the
heuristic baselines, all run through the env) and `results.json` (the training arguments). Every
number comes from those files; the baselines are shown once, from the first folder.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pandas as pd

from .tables import fmt_ci, to_markdown

METRICS = (("reward", "reward", 1.0, 1), ("JCT (min)", "jct", 1.0, 0),
           ("wasted %", "wasted_frac", 100.0, 1), ("precision %", "precision", 100.0, 1),
           ("recall %", "recall", 100.0, 1), ("FPR %", "fpr", 100.0, 1),
           ("stopped", "n_stopped", 1.0, 1))


def training_command(args: dict) -> str:
    """The command line that reproduces a training run from its recorded arguments."""
    return " ".join(["evalstop-bench train", f"--algo {args['algo']}",
                     f"--total-timesteps {args['total_timesteps']}", f"--seed {args['seed']}",
                     f"--out {shlex.quote(str(args['out']))}"])


def _row(label: str, group: pd.DataFrame) -> dict[str, str]:
    row = {"policy": label}
    for name, column, scale, decimals in METRICS:
        row[name] = fmt_ci(list(group[column]), scale, decimals)
    return row


def _load(folder: Path) -> tuple[pd.DataFrame, dict] | None:
    csv, meta = folder / "results.csv", folder / "results.json"
    if not (csv.exists() and meta.exists()):
        return None
    return pd.read_csv(csv), json.loads(meta.read_text())["args"]


def learned_section(folders: list[Path]) -> str:
    """Markdown: one row per trained model, then the heuristics; empty if no folder has results."""
    loaded = [x for x in (_load(f) for f in folders) if x is not None]
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
