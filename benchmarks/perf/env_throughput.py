"""Env steps per second of EvalStopCluster-v0 in both modes, beside CartPole-v1 in the same run.

A benchmark, not a timed test: numbers depend on the machine and its load, so the ratio to
CartPole (measured in the same process, same minute) is the figure to compare across machines.

    python -m evalstop_gym.benchmarks.perf.env_throughput --seconds 5
"""

from __future__ import annotations

import argparse
import time
from collections.abc import Callable
from typing import Any

import gymnasium as gym

import evalstop_gym  # noqa: F401  (registers EvalStopCluster-v0)
from evalstop_gym.env import HeuristicAgent, TableEvalStopAgent


def steps_per_second(env: gym.Env, act: Callable[[Any], Any], seconds: float) -> float:
    """Step `env` with `act` for about `seconds` (resets included) and return steps / second."""
    obs, _ = env.reset(seed=0)
    steps, seed = 0, 0
    start = time.perf_counter()
    while (elapsed := time.perf_counter() - start) < seconds:
        obs, _, terminated, truncated, _ = env.step(act(obs))
        steps += 1
        if terminated or truncated:
            seed += 1
            obs, _ = env.reset(seed=seed)
    return steps / elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    parser.add_argument("--config", default="e2", help="experiment whose platform config to run")
    args = parser.parse_args()

    cartpole = gym.make("CartPole-v1")
    cartpole.action_space.seed(0)
    rows = {"CartPole-v1 (random)": steps_per_second(
        cartpole, lambda _o: cartpole.action_space.sample(), args.seconds)}
    stop_agent = HeuristicAgent.from_name("EvalStop-2")
    stop_env = gym.make("EvalStopCluster-v0", config=args.config, control="stop")
    rows["EvalStopCluster-v0 stop (EvalStop-2)"] = steps_per_second(
        stop_env, stop_agent.act, args.seconds)
    full_env = gym.make("EvalStopCluster-v0", config=args.config, control="full")
    full_agent = TableEvalStopAgent(full_env.get_wrapper_attr("encoder").max_jobs)
    rows["EvalStopCluster-v0 full (EvalStop-2 on the table)"] = steps_per_second(
        full_env, full_agent.act, args.seconds)

    base = rows["CartPole-v1 (random)"]
    print(f"{'env':<52} {'steps/s':>10} {'vs CartPole':>12}")
    for name, rate in rows.items():
        print(f"{name:<52} {rate:>10.0f} {rate / base:>12.4f}")


if __name__ == "__main__":
    main()
