"""`evalstop-bench train`: train a stable-baselines3 agent on EvalStopCluster-v0, then score it.

PPO and DQN (control="stop") or PPO and MaskablePPO (either mode; MaskablePPO reads the env's
`action_masks()`) train on workload seeds >= 10000 and are evaluated on held-out seeds (the
paper's five) through the same env as heuristic baselines over the base scheduler: NoStop,
EvalStop-2 and the default detector (`DEFAULT_DETECTOR`; control=full: NoStop and EvalStop-2,
its table agents). The table of episode reward and paper metrics (mean ± 95% t CI over the held-out
seeds) is printed; the per-seed rows and the means are written as results.csv and results.json
beside the model, in `runs/<algo>_<control>` unless --out says otherwise, so two algorithms never
share a folder. Needs the `rl` extra.

Command behind the published figures (120k env steps):

    evalstop-bench train --algo ppo --total-timesteps 120000 --out runs/ppo_stop

`--num-envs 64` trains on the batched vector env (`EvalStopClusterVectorEnv` through SB3's
`VectorEnvAdapter`, either control) instead of DummyVecEnv over `--n-envs` single envs: the same
episodes per env, collected many times faster where the compiled core runs them (control=stop).
"""

from __future__ import annotations

import argparse
import json
import logging
import math
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import gymnasium as gym
import numpy as np
import pandas as pd

import evalstop_gym  # noqa: F401  (registers EvalStopCluster-v0)
from evalstop_gym.env import HeuristicAgent, TableEvalStopAgent
from evalstop_gym.env.arguments import MAX_TABLE_ROWS
from evalstop_gym.env.batch_core import MAX_ENVS
from evalstop_gym.experiment import PAPER_SEEDS
from evalstop_gym.online import DEFAULT_DETECTOR

from .. import durable
from ..analysis.tables import fmt_ci
from ..usage import UsageError, check_output, parse_overrides

log = logging.getLogger(__name__)
ALGOS = ("ppo", "dqn", "maskable_ppo")
CONTROLS = ("stop", "full")
# the heuristics a trained model is scored beside: nothing, the paper's rule, and the default
STOP_BASELINES = tuple(dict.fromkeys(("NoStop", "EvalStop-2", DEFAULT_DETECTOR)))
FULL_BASELINES = ("NoStop", "EvalStop-2")   # control=full: its table agents only
COLUMNS = ("reward", "jct", "wasted_frac", "precision", "recall", "fpr", "n_stopped",
           "quality_regret", "ttfuc")
# (title, column, scale, decimals) of the printed table, which fits WIDTH characters;
# results.csv and results.json keep every column of COLUMNS
PRINTED = (("reward", "reward", 1.0, 1), ("JCT", "jct", 1.0, 0),
           ("wasted%", "wasted_frac", 100.0, 1), ("prec%", "precision", 100.0, 1),
           ("recall%", "recall", 100.0, 1), ("FPR%", "fpr", 100.0, 1),
           ("stopped", "n_stopped", 1.0, 1))
WIDTH = 100
ENV_ID = "EvalStopCluster-v0"
MAX_SEED = 2**32 - 1   # numpy's and torch's largest seed


class Given(argparse.Action):
    """Stores the value and notes that the option was given (its default is not a choice)."""

    def __call__(self, parser: argparse.ArgumentParser, namespace: argparse.Namespace,
                 values: Any, option_string: str | None = None) -> None:
        setattr(namespace, self.dest, values)
        setattr(namespace, f"{self.dest}_given", True)


class DefaultsHelp(argparse.ArgumentDefaultsHelpFormatter):
    """--help shows each option's default, where it has one (not None, not a flag's False)."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.formatter_class = DefaultsHelp
    p.add_argument("--algo", choices=ALGOS, default="ppo",
                   help="learning algorithm (dqn: control=stop only)")
    p.add_argument("--control", choices=CONTROLS, default="stop",
                   help="stop: decide stop/continue at each eval; full: stops plus which "
                        "waiting job starts first")
    p.add_argument("--config", default="e2",
                   help="experiment (or platform YAML) whose platform the env runs")
    p.add_argument("--base-scheduler", default="SRTF-Est",
                   help="base scheduler that allocates GPUs beside the agent")
    p.add_argument("--total-timesteps", type=int, default=120_000,
                   help="env steps of training (one step = one decision point)")
    p.add_argument("--n-envs", type=int, default=2, action=Given,
                   help="parallel training envs, one Python env each (DummyVecEnv)")
    p.add_argument("--num-envs", type=int, default=None, metavar="N",
                   help=f"train on the batched vector env instead: N clusters (1 to {MAX_ENVS}) "
                        "stepped together (either control), compiled where the base has a "
                        "compiled form (control=stop)")
    p.add_argument("--seed", type=int, default=10_000,
                   help="training seed: torch, SB3 and env i's first workload seed (seed + i)")
    p.add_argument("--eval-seeds", type=int, nargs="+", default=list(PAPER_SEEDS),
                   help="held-out workload seeds the table is scored on: the paper's")
    p.add_argument("--baselines", nargs="*", default=None,
                   help="heuristic detectors scored beside the model through the same env "
                        f"(default: {', '.join(STOP_BASELINES)} with control=stop; "
                        f"{', '.join(FULL_BASELINES)} with control=full, which scores NoStop "
                        "and EvalStop-k only)")
    p.add_argument("--max-jobs", type=int, default=64, help="table rows in control=full")
    p.add_argument("--torch-threads", type=int, default=1,
                   help="CPU threads for torch (small MLPs run fastest on one)")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                   help="override a config value in training and eval envs (repeatable)")
    p.add_argument("--out", default=None,
                   help="folder for the model, results.csv and results.json (default: "
                        "runs/ALGO_CONTROL, e.g. runs/dqn_stop)")
    p.add_argument("--no-progress", action="store_true", help="hide the progress bar")


def default_out(args: argparse.Namespace) -> str:
    """Each algorithm and control mode has a folder of its own: runs/ppo_stop, runs/dqn_stop."""
    return f"runs/{args.algo}_{args.control}"


def env_count(args: argparse.Namespace) -> int:
    """The training envs: --num-envs clusters of the vector env, else --n-envs single envs."""
    return args.num_envs or args.n_envs


def check_args(args: argparse.Namespace) -> None:
    if args.num_envs is not None:
        if getattr(args, "n_envs_given", False):
            raise UsageError("--num-envs and --n-envs: give one (--num-envs: the batched vector "
                             "env; --n-envs: DummyVecEnv over single envs)")
        if not 1 <= args.num_envs <= MAX_ENVS:
            raise UsageError(f"--num-envs {args.num_envs}: expected a whole number in "
                             f"[1, {MAX_ENVS}]")
    for name in ("total_timesteps", "n_envs", "max_jobs", "torch_threads"):
        if getattr(args, name) < 1:
            raise UsageError(f"--{name.replace('_', '-')} {getattr(args, name)}: "
                                f"expected a whole number >= 1")
    if args.algo == "dqn" and args.control != "stop":
        raise UsageError("--algo dqn needs --control stop (DQN takes a Discrete action; "
                            "control=full is MultiDiscrete: use ppo or maskable_ppo)")
    if any(s < 0 for s in args.eval_seeds):
        raise UsageError(f"--eval-seeds {args.eval_seeds}: expected whole numbers >= 0")
    top = MAX_SEED - env_count(args) + 1   # env i is seeded --seed + i
    if not 0 <= args.seed <= top:
        raise UsageError(f"--seed {args.seed}: expected a whole number in [0, {top}]")
    if args.max_jobs > MAX_TABLE_ROWS:
        raise UsageError(f"--max-jobs {args.max_jobs}: expected a whole number in "
                         f"[1, {MAX_TABLE_ROWS}] (table rows of control=full)")


def env_kwargs(args: argparse.Namespace) -> dict[str, Any]:
    kwargs = {"config": args.config, "base_scheduler": args.base_scheduler,
              "control": args.control, "overrides": parse_overrides(args.overrides)}
    return {**kwargs, "max_jobs": args.max_jobs} if args.control == "full" else kwargs


ROLLOUT_SAMPLES = 2048   # PPO's samples per update (n_steps x envs)


def make_model(args: argparse.Namespace, venv: Any) -> Any:
    from stable_baselines3 import DQN, PPO

    common = {"seed": args.seed, "verbose": 0, "device": "cpu", "gamma": 0.99}
    if args.algo == "dqn":
        return DQN("MultiInputPolicy", venv, learning_starts=min(5_000, args.total_timesteps // 4),
                   buffer_size=100_000, exploration_fraction=0.3, target_update_interval=2_000,
                   train_freq=4, **common)
    n_envs = env_count(args)
    # the same samples per update whatever the number of envs (2 envs x 1024 steps, as trained
    # before the vector env): 64 clusters roll out 32 steps each
    n_steps = max(8, min(ROLLOUT_SAMPLES // n_envs, max(16, args.total_timesteps // n_envs)))
    ppo = {"n_steps": n_steps, "n_epochs": 10,
           "gae_lambda": 0.95, "ent_coef": 0.01, "learning_rate": 3e-4, **common}
    ppo["batch_size"] = min(256, ppo["n_steps"] * n_envs)
    if args.algo == "maskable_ppo":
        from sb3_contrib import MaskablePPO

        return MaskablePPO("MultiInputPolicy", venv, **ppo)
    return PPO("MultiInputPolicy", venv, **ppo)


def planned_timesteps(model: Any, total: int) -> int:
    """The env steps `model.learn(total)` takes: SB3 checks `total` only between rollouts (PPO:
    n_steps per env; DQN: train_freq steps per env), so it runs up to the next multiple."""
    from stable_baselines3.common.on_policy_algorithm import OnPolicyAlgorithm
    from stable_baselines3.common.type_aliases import TrainFrequencyUnit

    if isinstance(model, OnPolicyAlgorithm):
        per_env = model.n_steps
    elif model.train_freq.unit == TrainFrequencyUnit.STEP:
        per_env = model.train_freq.frequency
    else:   # per episode: not known in advance
        return total
    chunk = per_env * model.n_envs
    return math.ceil(total / chunk) * chunk


def training_env(args: argparse.Namespace) -> Any:
    """The SB3 VecEnv training runs on: the vector env's adapter (--num-envs, episode returns
    through VecMonitor) or DummyVecEnv over --n-envs single envs (each in a Monitor)."""
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecMonitor

    from evalstop_gym.env.sb3 import VectorEnvAdapter

    if args.num_envs is not None:
        return VecMonitor(VectorEnvAdapter.make(args.num_envs, seed=args.seed, **env_kwargs(args)))
    return make_vec_env(ENV_ID, n_envs=args.n_envs, seed=args.seed,
                        env_kwargs={**env_kwargs(args), "render_mode": None})


def train(args: argparse.Namespace) -> Any:
    from stable_baselines3.common.vec_env import VecNormalize

    from evalstop_gym.env.sb3 import EpisodeMetricsCallback, ProgressBarCallback

    venv = training_env(args)
    # Reward scaling only: observations stay raw so the saved model acts on the plain encoding.
    venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=0.99)
    model = make_model(args, venv)
    start = time.perf_counter()
    steps = planned_timesteps(model, args.total_timesteps)
    model.learn(total_timesteps=args.total_timesteps, callback=[
        EpisodeMetricsCallback(), ProgressBarCallback(steps, args.no_progress)])
    log.info("trained %s for %d steps in %.0f s", args.algo, model.num_timesteps,
             time.perf_counter() - start)
    return model


def episode(env: gym.Env, seed: int, act: Any,
            start: Callable[[], None] | None = None) -> dict[str, float]:
    """One deterministic episode: its summed reward and the paper metrics. `start` (an agent's
    reset) runs with every env.reset, so a detector that learns from ended jobs carries nothing
    from one held-out seed to the next."""
    obs, info = env.reset(seed=seed)
    if start is not None:
        start()
    total, done = 0.0, False
    while not done:
        obs, reward, done, _, info = env.step(act(obs, info))
        total += float(reward)
    return {"seed": seed, "reward": total, **info["metrics"]}


def model_actor(model: Any, env: gym.Env, masked: bool) -> Any:
    def act(obs: Any, info: Any) -> Any:
        unwrapped: Any = env.unwrapped   # the EvalStop env, which answers action_masks()
        masks = {"action_masks": unwrapped.action_masks()} if masked else {}
        return model.predict(obs, deterministic=True, **masks)[0]
    return act


def baseline_actors(args: argparse.Namespace) -> dict[str, tuple[Any, tuple[float, ...]]]:
    """name -> (act(obs, info), milestones) of each heuristic scored beside the model."""
    out: dict[str, tuple[Any, tuple[float, ...]]] = {}
    names = args.baselines
    if names is None:
        names = STOP_BASELINES if args.control == "stop" else FULL_BASELINES
    for name in names:
        if args.control == "stop":
            agent = HeuristicAgent.from_name(name)
            out[f"{name}+{args.base_scheduler}"] = (agent.act, agent.milestones)
        elif name == "NoStop":
            out[f"{name}+{args.base_scheduler}"] = (
                lambda o, i: np.zeros(args.max_jobs + 1, dtype=np.int64), ())
        elif name.startswith("EvalStop-"):
            table = TableEvalStopAgent(args.max_jobs, k_rlhf=int(name.split("-")[1]))
            out[f"{name}+{args.base_scheduler}"] = (lambda o, i, t=table: t.act(o), ())
        else:
            raise UsageError(f"--baselines {name!r}: control=full scores NoStop and "
                                f"EvalStop-k only")
    return out


def evaluate(args: argparse.Namespace, model: Any) -> dict[str, list[dict[str, float]]]:
    """The model's and the baselines' episodes on the evaluation seeds, by policy name."""
    return {**evaluate_model(args, model), **evaluate_baselines(args)}


def evaluate_model(args: argparse.Namespace, model: Any) -> dict[str, list[dict[str, float]]]:
    """The trained model's episodes on the evaluation seeds, through the single env."""
    env = gym.make(ENV_ID, **env_kwargs(args))
    actor = model_actor(model, env, args.algo == "maskable_ppo")
    return {f"{args.algo.upper()} (learned)": [episode(env, s, actor) for s in args.eval_seeds]}


def evaluate_baselines(args: argparse.Namespace) -> dict[str, list[dict[str, float]]]:
    """Each baseline detector's episodes on the evaluation seeds (its agent reset per episode)."""
    results = {}
    for name, (act, milestones) in baseline_actors(args).items():
        env = gym.make(ENV_ID, **env_kwargs(args), milestones=milestones)
        start = getattr(getattr(act, "__self__", None), "reset", None)
        results[name] = [episode(env, s, act, start) for s in args.eval_seeds]
    return results


def per_seed(results: dict[str, list[dict[str, float]]]) -> pd.DataFrame:
    """One row per policy and held-out seed."""
    frames = [pd.DataFrame(rows).assign(policy=name) for name, rows in results.items()]
    return pd.concat(frames, ignore_index=True)


def table(results: dict[str, list[dict[str, float]]]) -> pd.DataFrame:
    """Mean over held-out seeds, one row per policy."""
    return per_seed(results).groupby("policy", sort=False)[list(COLUMNS)].mean()


def terminal_table(results: dict[str, list[dict[str, float]]]) -> str:
    """Mean ± 95% t CI over the held-out seeds per policy, as in the experiments' tables (short
    headings, fractions as percentages, '–' where a metric is undefined: precision without a
    stop), then a line saying so."""
    rows = per_seed(results)
    shown = pd.DataFrame({title: {policy: fmt_ci(group[column].astype(float).tolist(), scale,
                                                 decimals).replace(" ± ", "±")
                                  for policy, group in rows.groupby("policy", sort=False)}
                          for title, column, scale, decimals in PRINTED})
    excess = max(map(len, shown.to_string().splitlines())) - WIDTH
    room = max(12, max(map(len, shown.index)) - excess)   # long names cut with '…' to fit
    shown.index = [p if len(p) <= room else p[:room - 1] + "…" for p in shown.index]
    seeds = rows["seed"].nunique()
    return (f"{shown.to_string()}\nmean ± 95% CI (t) over {seeds} held-out seed(s); "
            "– where undefined; regret, TTFUC: results.csv")


def save(args: argparse.Namespace, model: Any, results: dict, summary: pd.DataFrame) -> Path:
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / f"{args.algo}_{args.control}.zip"
    with durable.atomic_path(path) as tmp:   # SB3 writes the zip in place
        model.save(tmp)
    rows = pd.DataFrame([{"policy": k, **r} for k, rs in results.items() for r in rs])
    durable.write_csv(rows, out / "results.csv")   # atomically, as every output
    meta = {"args": {k: v for k, v in vars(args).items() if k != "handler"} | {"model": str(path)},
            "mean": summary.reset_index().to_dict("records")}
    durable.write_text(out / "results.json", json.dumps(meta, indent=2, default=str))
    return path


def main(args: argparse.Namespace) -> int:
    args.out = default_out(args) if args.out is None else args.out
    check_args(args)
    try:   # a bad --config, --set or base scheduler fails before any training
        gym.make(ENV_ID, **env_kwargs(args)).close()
    except ValueError as exc:
        raise UsageError(" ".join(str(exc).split())) from None
    baseline_actors(args)
    config = [args.config] if args.config.endswith((".yaml", ".yml")) else []
    check_output(args.out, "--out", "dir", config)
    import torch

    # --- seeding: torch and SB3 from --seed; training workloads from the env seeds (--seed + i)
    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)
    model = train(args)
    results = evaluate(args, model)
    summary = table(results)
    path = save(args, model, results, summary)
    print(terminal_table(results))
    scorable = args.control == "stop"   # what `model:` loads: a detector, not a scheduler
    score = (f"; score it with: evalstop-bench run {args.config} --policy "
             f"'model:{path}+{args.base_scheduler}'" if scorable else "")
    print(f"model: {path}{score}")
    return 0

