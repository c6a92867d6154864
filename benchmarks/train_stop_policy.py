"""Train a stop policy with stable-baselines3 on EvalStopCluster-v0 (control="stop"), then score it.

The model is evaluated on held-out seeds (the paper's five; training episodes draw seeds >= 10000)
through the same env as EvalStop-2 and NoStop (both over SRTF-Est), and a table of mean episode
reward and the paper metrics is printed and written as CSV and JSON beside the model.

Command behind the published figures (about 4 minutes on 2 CPU cores, 120k env steps):

    python -m evalstop_gym.benchmarks.train_stop_policy --algo ppo --total-timesteps 120000 --out runs/ppo_stop

DQN: add `--algo dqn`. Needs the `rl` extra (stable-baselines3, torch).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import logging
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import gymnasium as gym
import pandas as pd

import evalstop_gym  # noqa: F401  (registers EvalStopCluster-v0)
from evalstop_gym.env import HeuristicAgent
from evalstop_gym.experiment import PAPER_SEEDS

log = logging.getLogger("train_stop_policy")
COLUMNS = ("reward", "jct", "wasted_frac", "precision", "recall", "fpr", "n_stopped",
           "quality_regret", "ttfuc")


@dataclass
class Args:
    algo: str = "ppo"
    """ppo or dqn"""
    config: str = "e2"
    """experiment whose platform config the env runs"""
    base_scheduler: str = "SRTF-Est"
    """base scheduler that allocates GPUs while the agent decides stops"""
    total_timesteps: int = 120_000
    """env steps of training (one step = one eval result of a monitored job)"""
    n_envs: int = 2
    """parallel envs (SB3 DummyVecEnv)"""
    seed: int = 10_000
    """training seed: env i starts from workload seed seed + i, then draws seeds >= 10000"""
    eval_seeds: tuple[int, ...] = PAPER_SEEDS
    """held-out workload seeds (the paper's), never drawn in training"""
    baselines: tuple[str, ...] = ("NoStop", "EvalStop-2")
    """heuristic detectors scored beside the model, through the same env"""
    torch_threads: int = 1
    """CPU threads for torch (small MLPs run far faster on one thread than on a contended two)"""
    out: str = "runs/ppo_stop"
    """directory for the model, results.csv and results.json"""
    overrides: dict[str, Any] = field(default_factory=dict)
    """dotted config overrides for train and eval envs (JSON on the command line)"""


def parse_args() -> Args:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    for f in dataclasses.fields(Args):
        flag = "--" + f.name.replace("_", "-")
        default = f.default if f.default is not dataclasses.MISSING else f.default_factory()
        if f.name == "overrides":
            parser.add_argument(flag, type=json.loads, default=default)
        elif isinstance(default, tuple):
            parser.add_argument(flag, nargs="+", type=type(default[0]), default=default)
        else:
            parser.add_argument(flag, type=type(default), default=default)
    ns = parser.parse_args()
    return Args(**{k: tuple(v) if isinstance(v, list) else v for k, v in vars(ns).items()})


def make_model(args: Args, venv: Any) -> Any:
    from stable_baselines3 import DQN, PPO

    if args.algo == "ppo":
        return PPO("MultiInputPolicy", venv, n_steps=1024, batch_size=256, n_epochs=10,
                   gamma=0.99, gae_lambda=0.95, ent_coef=0.01, learning_rate=3e-4,
                   seed=args.seed, verbose=0, device="cpu")
    if args.algo == "dqn":
        return DQN("MultiInputPolicy", venv, learning_starts=5_000, buffer_size=100_000,
                   exploration_fraction=0.3, target_update_interval=2_000, train_freq=4,
                   gamma=0.99, seed=args.seed, verbose=0, device="cpu")
    raise SystemExit(f"--algo {args.algo!r}: choose ppo or dqn")


def train(args: Args) -> Any:
    from stable_baselines3.common.env_util import make_vec_env
    from stable_baselines3.common.vec_env import VecNormalize

    env_kwargs = {"config": args.config, "base_scheduler": args.base_scheduler,
                  "control": "stop", "overrides": args.overrides,
                  "render_mode": None}  # make_vec_env would otherwise ask for rgb_array
    venv = make_vec_env("EvalStopCluster-v0", n_envs=args.n_envs, seed=args.seed,
                        env_kwargs=env_kwargs)
    # Reward scaling only: observations stay raw so the saved model acts on the plain encoding.
    venv = VecNormalize(venv, norm_obs=False, norm_reward=True, gamma=0.99)
    model = make_model(args, venv)
    start = time.perf_counter()
    model.learn(total_timesteps=args.total_timesteps)
    log.info("trained %s for %d steps in %.0f s", args.algo, args.total_timesteps,
             time.perf_counter() - start)
    return model


def evaluate(agent: Any, args: Args, milestones: tuple[float, ...] = ()) -> list[dict]:
    """One episode per held-out seed, acting deterministically; reward and paper metrics."""
    env = gym.make("EvalStopCluster-v0", config=args.config, base_scheduler=args.base_scheduler,
                   control="stop", milestones=milestones, overrides=args.overrides)
    rows = []
    for seed in args.eval_seeds:
        obs, info = env.reset(seed=seed)
        total, done = 0.0, False
        while not done:
            action, _ = agent.predict(obs, deterministic=True)
            obs, reward, done, _, info = env.step(action)
            total += float(reward)
        rows.append({"seed": seed, "reward": total, **info["metrics"]})
    return rows


def table(results: dict[str, list[dict]]) -> pd.DataFrame:
    """Mean over held-out seeds, one row per policy."""
    frames = [pd.DataFrame(rows).assign(policy=name) for name, rows in results.items()]
    df = pd.concat(frames, ignore_index=True)
    return df.groupby("policy", sort=False)[list(COLUMNS)].mean()


def main() -> None:
    logging.basicConfig(level=logging.INFO, format="%(message)s")
    args = parse_args()
    # --- seeding: torch and SB3 from args.seed; workloads from the env seeds (see Args).
    import torch

    torch.set_num_threads(args.torch_threads)
    torch.manual_seed(args.seed)

    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    model = train(args)
    model.save(out / f"{args.algo}_stop.zip")
    results = {f"{args.algo.upper()} (learned)": evaluate(model, args)}
    for name in args.baselines:
        agent = HeuristicAgent.from_name(name)
        results[f"{name}+{args.base_scheduler}"] = evaluate(agent, args, agent.milestones)
    summary = table(results)
    pd.DataFrame([{"policy": k, **r} for k, rows in results.items() for r in rows]).to_csv(
        out / "results.csv", index=False)
    (out / "results.json").write_text(json.dumps(
        {"args": dataclasses.asdict(args), "mean": summary.reset_index().to_dict("records")},
        indent=2, default=str))
    print(summary.to_string(float_format=lambda v: f"{v:.3f}"))


if __name__ == "__main__":
    main()
