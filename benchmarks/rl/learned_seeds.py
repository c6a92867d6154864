"""Learned stop policies over many training seeds, reported as rliable recommends.

Trains PPO (and DQN with `--algos ppo dqn`) on the batched vector env (`evalstop-bench train
--num-envs`'s path) once per training seed, saves every model, and scores each (a `model:`
policy) and the heuristic detectors on the held-out evaluation seeds through the scoring
machinery `evalstop-bench score` runs (`scoring.tasks`: the sweep runner, each run saved as it
ends; a `model:` cell decides as the model does through the env). Per metric (recall, FPR,
JCT, wasted compute) it reports the interquartile mean (IQM, `scipy.stats.trim_mean(x, 0.25)`)
over the score matrix of training seeds x evaluation seeds and a 95% percentile CI from a
stratified bootstrap (`analysis.iqm`, as `score` aggregates: training seeds resampled within
each evaluation seed, rliable's protocol with evaluation seeds as its tasks). A heuristic
has one "run", so its CI resamples the evaluation seeds. Writes runs.csv (one row per policy,
training seed and evaluation seed), summary.csv, summary.md and learned_seeds.{png,pdf} (IQM and
CI per metric) into --out; `--beyond BEYOND.md` also writes the section into BEYOND.md (between its
markers, `sections.py`) and the figure into figures/ beside it.

    python -m evalstop_gym.benchmarks.rl.learned_seeds --seeds 10 --total-timesteps 120000
"""

from __future__ import annotations

import argparse
import logging
from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

import gymnasium as gym
import pandas as pd
from tqdm.auto import tqdm

from evalstop_gym.env.batch_core import MAX_ENVS
from evalstop_gym.experiment import PAPER_SEEDS, load_experiment
from evalstop_gym.online import DEFAULT_DETECTOR

from .. import durable, sections
from ..analysis.iqm import iqm_ci
from ..analysis.tables import to_markdown
from ..scoring.tasks import Task, run_tasks
from ..sweep.runner import DEFAULT_OPTIONS
from ..usage import UsageError, check_output, parse_overrides
from . import train

if TYPE_CHECKING:
    from matplotlib.figure import Figure

log = logging.getLogger(__name__)
METRICS = (("recall %", "recall", 100.0), ("FPR %", "fpr", 100.0), ("JCT (min)", "jct", 1.0),
           ("wasted %", "wasted_frac", 100.0))
BASELINES = tuple(dict.fromkeys(   # BEYOND.md's: the paper's rule, the default, two more
    ("EvalStop-2", DEFAULT_DETECTOR, "TrendTest-0.05", "PeerPrior-0.05", "BOCPD-0.5")))
ALGOS = ("ppo", "dqn")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--algos", nargs="+", choices=ALGOS, default=["ppo"],
                   help="algorithms to train, each once per training seed")
    p.add_argument("--seeds", type=int, default=10, help="training seeds per algorithm (K)")
    p.add_argument("--first-seed", type=int, default=10_000,
                   help="training seed k is first-seed + 1000 k (torch, SB3, workloads)")
    p.add_argument("--total-timesteps", type=int, default=120_000, help="env steps per run")
    p.add_argument("--num-envs", type=int, default=64, help="clusters of the vector env")
    p.add_argument("--config", default="e2", help="experiment whose platform the env runs")
    p.add_argument("--base-scheduler", default="SRTF-Est", help="base scheduler beside the agent")
    p.add_argument("--eval-seeds", type=int, nargs="+", default=list(PAPER_SEEDS),
                   help="held-out workload seeds every policy is scored on")
    p.add_argument("--baselines", nargs="*", default=list(BASELINES),
                   help="heuristic detectors scored beside the learned policies")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                   help="override a config value in training and evaluation (repeatable)")
    p.add_argument("--resamples", type=int, default=2000, help="bootstrap resamples")
    p.add_argument("--out", default="runs/learned_seeds", help="folder for the CSVs and table")
    p.add_argument("--beyond", type=Path, help="BEYOND.md to write the section into")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def run_args(args: argparse.Namespace, algo: str, seed: int) -> argparse.Namespace:
    """`evalstop-bench train`'s arguments for one training run on the vector env."""
    return argparse.Namespace(
        algo=algo, control="stop", config=args.config, base_scheduler=args.base_scheduler,
        total_timesteps=args.total_timesteps, n_envs=args.num_envs, num_envs=args.num_envs,
        seed=seed, eval_seeds=args.eval_seeds, baselines=args.baselines, max_jobs=64,
        torch_threads=1, overrides=args.overrides, no_progress=True)


def check_args(args: argparse.Namespace) -> None:
    for name in ("seeds", "total_timesteps", "resamples"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name)}: expected a "
                             f"whole number >= 1")
    if not 1 <= args.num_envs <= MAX_ENVS:
        raise UsageError(f"--num-envs {args.num_envs}: expected a whole number in "
                         f"[1, {MAX_ENVS}]")
    check_output(args.out, "--out", "dir")
    if args.beyond is not None:
        sections.check_document(args.beyond, "--beyond")
    train.check_args(run_args(args, args.algos[0], args.first_seed
                              + 1000 * (args.seeds - 1)))
    train.baseline_actors(run_args(args, "ppo", args.first_seed))
    try:   # a bad --config, --set or base scheduler fails before any training
        gym.make(train.ENV_ID, **train.env_kwargs(run_args(args, "ppo", 0))).close()
        load_experiment(args.config)
    except ValueError as exc:
        raise UsageError(" ".join(str(exc).split())) from None


def score_runs(args: argparse.Namespace) -> pd.DataFrame:
    """One row per policy, training seed (-1 for a heuristic) and evaluation seed: each model
    saved into `--out`/models, then every model and heuristic scored on the evaluation seeds as
    a scoring task (`scoring.tasks`, the machinery `evalstop-bench score` runs), each run saved
    in `--out`/runs as it ends."""
    import torch

    from evalstop_gym.policies.learned import save_detector_model
    from evalstop_gym.policies.user_code import MODEL_PREFIX

    torch.set_num_threads(1)
    out = Path(args.out)
    (out / "models").mkdir(parents=True, exist_ok=True)
    shown: dict[str, tuple[str, int]] = {}   # policy as scored -> (name in the report, seed)
    runs = [(algo, args.first_seed + 1000 * k) for algo in args.algos for k in range(args.seeds)]
    for algo, seed in tqdm(runs, desc="training", unit="run", disable=args.no_progress):
        ns = run_args(args, algo, seed)
        torch.manual_seed(seed)
        path = save_detector_model(train.train(ns), out / "models" / f"{algo}-seed{seed}.zip")
        shown[f"{MODEL_PREFIX}{path}"] = (f"{algo.upper()} (learned)", seed)
    for name in args.baselines:
        shown[name] = (f"{name}+{args.base_scheduler}", -1)
    done = run_tasks([evaluation_task(args)], args.base_scheduler, args.eval_seeds, list(shown),
                     out / "runs", 1, DEFAULT_OPTIONS).runs
    return done.assign(policy=done["policy"].map(lambda p: shown[p][0]),
                       train_seed=done["policy"].map(lambda p: shown[p][1])).drop(columns="task")


def evaluation_task(args: argparse.Namespace) -> Task:
    """The held-out evaluation as a scoring task: the training config with its --set values."""
    return Task("learned-seeds", args.config, parse_overrides(args.overrides))


def summarise(rows: pd.DataFrame, resamples: int) -> pd.DataFrame:
    """Per policy and metric: IQM, CI bounds and the number of training runs."""
    out = []
    for policy, group in rows.groupby("policy", sort=False):
        runs = group["train_seed"].nunique()
        for _, column, _ in METRICS:
            matrix = group.pivot(index="train_seed", columns="seed", values=column).to_numpy()
            iqm, low, high = iqm_ci(matrix, resamples)
            out.append({"policy": policy, "metric": column, "iqm": iqm, "low": low,
                        "high": high, "runs": runs})
    return pd.DataFrame(out)


def markdown(summary: pd.DataFrame, eval_seeds: Sequence[int]) -> str:
    """One row per policy: IQM [95% CI] of each metric, then how it was computed."""
    table = []
    for policy, group in summary.groupby("policy", sort=False):
        row: dict[str, Any] = {"policy": policy, "training runs": int(group["runs"].iloc[0])}
        for title, column, scale in METRICS:
            r = group.set_index("metric").loc[column]
            decimals = 0 if scale == 1.0 else 1
            row[title] = (f"{r.iqm * scale:.{decimals}f} [{r.low * scale:.{decimals}f}, "
                          f"{r.high * scale:.{decimals}f}]")
        table.append(row)
    seeds = ", ".join(map(str, eval_seeds))
    return (to_markdown(pd.DataFrame(table)) + f"\n\nIQM [95% CI] over training runs x "
            f"evaluation seeds ({seeds}); stratified bootstrap over training runs per evaluation "
            f"seed (a heuristic: over evaluation seeds).\n")


def draw(summary: pd.DataFrame) -> Figure:
    """Double column: one panel per metric, one row per policy, its IQM and 95% CI."""
    import matplotlib.pyplot as plt

    from ..analysis.figure_style import DOUBLE, policy_styles, style

    policies = list(dict.fromkeys(summary["policy"]))
    styles = policy_styles(policies)
    with style():
        return _draw(summary, policies, styles, plt, DOUBLE)


def _draw(summary: pd.DataFrame, policies: list[str], styles: dict[str, dict[str, Any]],
          plt: Any, width: float) -> Figure:
    fig, axes = plt.subplots(1, len(METRICS), figsize=(width, 0.35 * len(policies) + 1.0),
                             sharey=True, squeeze=False)
    for ax, (title, column, scale) in zip(axes[0], METRICS, strict=True):
        rows = summary[summary["metric"] == column].set_index("policy").loc[policies]
        for y, (policy, r) in enumerate(rows.iterrows()):
            color = styles[str(policy)].get("color")
            ax.plot([r.low * scale, r.high * scale], [y, y], color=color, lw=2)
            ax.plot(r.iqm * scale, y, "o", color=color)
        ax.set(title=title, yticks=range(len(policies)), yticklabels=policies)
        ax.invert_yaxis()
    fig.suptitle("IQM and stratified-bootstrap 95% CI over training runs x evaluation seeds")
    return fig


def section(summary: pd.DataFrame, args: argparse.Namespace, figure: str) -> str:
    """BEYOND.md's section: how it was made, the table and the figure."""
    algos = ", ".join(a.upper() for a in args.algos)
    body = (f"## Learned stop policies over training seeds\n\n"
            f"Generated by `python -m evalstop_gym.benchmarks.rl.learned_seeds --seeds "
            f"{args.seeds} --total-timesteps {args.total_timesteps} --num-envs {args.num_envs}`"
            f"; do not edit by hand. {algos} trained on the compiled vector env "
            f"(`EvalStopCluster-v0`, control=\"stop\", {args.config} over "
            f"{args.base_scheduler}) with {args.seeds} training seeds, each model scored on the "
            f"held-out evaluation seeds beside the heuristic detectors (rliable's protocol: "
            f"interquartile mean, stratified bootstrap).\n\n"
            f"{markdown(summary, args.eval_seeds)}\n![learned policies over seeds]({figure})\n")
    return sections.wrap(sections.LEARNED_SEEDS, body)


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_arguments(parser)
    args = parser.parse_args(argv)
    try:
        check_args(args)
    except ValueError as exc:   # UsageError, or a policy name's own error
        parser.exit(2, f"error: {' '.join(str(exc).split())}\n")
    from ..analysis.figures import save

    out = Path(args.out)
    rows = score_runs(args)
    summary = summarise(rows, args.resamples)
    out.mkdir(parents=True, exist_ok=True)
    durable.write_csv(rows, out / "runs.csv")
    durable.write_csv(summary, out / "summary.csv")
    text = markdown(summary, args.eval_seeds)
    durable.write_text(out / "summary.md", text)
    save(draw(summary), out, "learned_seeds")
    if args.beyond is not None:
        save(draw(summary), args.beyond.parent / "figures", "beyond_learned")
        sections.write_into(args.beyond, sections.LEARNED_SEEDS,
                            section(summary, args, "figures/beyond_learned.png"))
    print(text)
    log.info("wrote %s", out)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
