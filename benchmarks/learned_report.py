"""The learned-stop-policy section of REPRODUCTION.md, from `train_stop_policy.py`'s results.

Reads `results.csv` (one row per policy and held-out seed) and `results.json` (the arguments of
the training run) from a training output folder; every number comes from those files.
"""

from __future__ import annotations

import json
import shlex
from pathlib import Path

import pandas as pd

from .stats import mean_ci
from .tables import fmt_ci, to_markdown

METRICS = (("reward", "reward", 1.0, 1), ("JCT (min)", "jct", 1.0, 0),
           ("wasted %", "wasted_frac", 100.0, 1), ("precision %", "precision", 100.0, 1),
           ("recall %", "recall", 100.0, 1), ("FPR %", "fpr", 100.0, 1),
           ("stopped", "n_stopped", 1.0, 1))


def training_command(args: dict) -> str:
    """The command line that reproduces a training run from its recorded arguments."""
    parts = ["python benchmarks/train_stop_policy.py", f"--algo {args['algo']}",
             f"--total-timesteps {args['total_timesteps']}", f"--seed {args['seed']}",
             f"--out {shlex.quote(str(args['out']))}"]
    return " ".join(parts)


def learned_table(results: pd.DataFrame) -> pd.DataFrame:
    rows = []
    for policy, group in results.groupby("policy", sort=False):
        row = {"policy": policy}
        for label, column, scale, decimals in METRICS:
            row[label] = fmt_ci(list(group[column]), scale, decimals)
        rows.append(row)
    return pd.DataFrame(rows)


def learned_section(folders: list[Path]) -> str:
    """Markdown for every training folder that holds results; empty if none does."""
    parts = []
    for folder in folders:
        csv, meta = folder / "results.csv", folder / "results.json"
        if not (csv.exists() and meta.exists()):
            continue
        results = pd.read_csv(csv)
        args = json.loads(meta.read_text())["args"]
        seeds = sorted(results["seed"].unique())
        model = results["policy"].iloc[0]
        ppo = results[results["policy"] == model]["reward"]
        parts += [f"### {args['algo'].upper()} on control=\"stop\" ({args['config']}, "
                  f"{args['total_timesteps']:,} steps)\n",
                  f"`{training_command(args)}`; held-out seeds {', '.join(map(str, seeds))}; "
                  f"mean ± 95% CI. Mean reward of the model: {mean_ci(list(ppo))[0]:.1f}.\n",
                  to_markdown(learned_table(results)), ""]
    if not parts:
        return ""
    return "\n".join(["## Learned stop policies (stable-baselines3)\n",
                      "Each policy acts through `EvalStopCluster-v0` on the same held-out "
                      "workloads; heuristics run through the same env. One training seed per "
                      "model, so the spread across training seeds is not measured.\n", *parts])
