"""Env steps per second of EvalStopCluster-v0 in both modes and of its vector env in both
controls at N = 1, 8, 64, 256, beside CartPole-v1 single and gymnasium's SyncVectorEnv of CartPole
at the same N, in the same run; the bytes of state per env of each batch core (`state_bytes`);
with --ppo, PPO's wall time to a fixed number of steps on the single env (DummyVecEnv, n_envs=1)
against the vector env (N=64), split into rollout collection and gradient updates.

A benchmark, not a timed test: numbers depend on the machine, so the ratio to CartPole
(measured in the same process, same minute) is the figure to compare across machines. Rates are
per second of the process's CPU time (`vector_throughput.cpu_seconds`), which other processes
on a shared machine do not inflate.

    python -m evalstop_gym.benchmarks.perf.env_throughput --ppo --markdown PERFORMANCE.md

With --markdown the printed tables also go into that file's own block (below the notes marker,
which `evalstop-bench perf` keeps), with the command and the machine that measured them.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import gymnasium as gym

import evalstop_gym  # noqa: F401  (registers EvalStopCluster-v0)
from evalstop_gym.env import HeuristicAgent, TableEvalStopAgent
from evalstop_gym.env.batch_core import MAX_ENVS
from evalstop_gym.env.vector import EvalStopClusterVectorEnv

from ..usage import parse_overrides
from .engine import machine
from .notes_block import marked, write_block
from .state_bytes import state_bytes
from .vector_throughput import (
    cpu_seconds,
    ppo_table,
    ppo_timing,
    random_full_actions,
    random_stops,
    vector_steps_per_second,
)

ENV_ID = "EvalStopCluster-v0"
BLOCK = "env_throughput"   # this benchmark's block of PERFORMANCE.md
# the bytes table's largest N: rows are sized per env (the compiled core's by the largest
# workload among them), and tracemalloc slows the 256 resets of N=256 to minutes
BYTES_ENVS = 64


def steps_per_second(env: gym.Env, act: Callable[[Any], Any], seconds: float) -> float:
    """Step `env` with `act` for about `seconds` of CPU time (resets included); steps per CPU
    second."""
    obs, _ = env.reset(seed=0)
    steps, seed = 0, 0
    start = cpu_seconds()
    while (elapsed := cpu_seconds() - start) < seconds:
        obs, _, terminated, truncated, _ = env.step(act(obs))
        steps += 1
        if terminated or truncated:
            seed += 1
            obs, _ = env.reset(seed=seed)
    return steps / elapsed


def vector_rows(args: argparse.Namespace, overrides: dict[str, Any]) -> dict[str, float]:
    """The vector env at each --sizes N in both controls (engine auto; control="stop" also with
    engine python at --reference-size), CartPole's SyncVectorEnv at the same N."""
    rows = {}
    runs = ([("stop", n, "auto") for n in args.sizes] + [("stop", args.reference_size, "python")]
            + [("full", n, "auto") for n in args.sizes])
    for control, n, engine in runs:
        venv = gym.make_vec(ENV_ID, num_envs=n, vectorization_mode="vector_entry_point",
                            config=args.config, engine=engine, control=control, **overrides)
        unwrapped = venv.unwrapped
        assert isinstance(unwrapped, EvalStopClusterVectorEnv)
        core = type(unwrapped.core).__name__
        act = random_stops(n) if control == "stop" else random_full_actions(unwrapped)
        rows[f"vector {control} N={n} engine={engine} ({core})"] = vector_steps_per_second(
            venv, act, args.seconds)
        venv.close()
    for n in args.sizes:
        cartpoles = gym.make_vec("CartPole-v1", num_envs=n, vectorization_mode="sync")
        cartpoles.action_space.seed(0)
        rows[f"CartPole-v1 SyncVectorEnv N={n} (random)"] = vector_steps_per_second(
            cartpoles, cartpoles.action_space.sample, args.seconds)
        cartpoles.close()
    return rows


def bytes_table(args: argparse.Namespace, overrides: dict[str, Any]) -> str:
    """Each core's bytes of state per env at the largest --sizes N up to BYTES_ENVS, after a
    reset of every env (see `state_bytes` for what the two columns count)."""
    n = min(max(args.sizes), BYTES_ENVS)
    lines = [f"{f'bytes of state per env (N={n}, after reset)':<60} {'array':>10} "
             f"{'traced':>10}"]
    for control, engine in (("stop", "auto"), ("stop", "python"), ("full", "auto")):
        def make_core(k: int, control: str = control, engine: str = engine) -> Any:
            return EvalStopClusterVectorEnv(k, config=args.config, control=control,
                                            engine=engine, **overrides).core
        measured = state_bytes(make_core, n)
        lines.append(f"{f'{measured.core} control={control} engine={engine}':<60} "
                     f"{measured.array:>10.0f} {measured.traced:>10.0f}")
    return "\n".join(lines)


def ppo_comparison(args: argparse.Namespace, overrides: dict[str, Any]) -> str:
    """PPO to --ppo-steps on DummyVecEnv(n_envs=1) with n_steps = --rollout, then on the vector
    env with --ppo-envs clusters and n_steps = rollout / N: the same samples per update."""
    import torch
    from stable_baselines3.common.env_util import make_vec_env

    from evalstop_gym.env.sb3 import VectorEnvAdapter

    torch.set_num_threads(1)
    kwargs = {"config": args.config, **overrides}
    batch = min(64, args.rollout)
    single = ppo_timing(make_vec_env(ENV_ID, n_envs=1, seed=10_000, env_kwargs=kwargs),
                        args.rollout, args.ppo_steps, batch)
    n_steps = args.rollout // args.ppo_envs
    vector = ppo_timing(VectorEnvAdapter.make(args.ppo_envs, seed=10_000, **kwargs), n_steps,
                        args.ppo_steps, batch)
    return ppo_table(single, vector, f"single env (n_envs=1, n_steps={args.rollout})",
                     f"vector env (N={args.ppo_envs}, n_steps={n_steps})")


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--seconds", type=float, default=5.0, help="time per measurement")
    parser.add_argument("--config", default="e2", help="experiment whose platform config to run")
    parser.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                        help="override a config value (repeatable)")
    parser.add_argument("--sizes", type=int, nargs="+", default=[1, 8, 64, 256],
                        help="vector env sizes N (engine auto) and CartPole SyncVectorEnv sizes")
    parser.add_argument("--reference-size", type=int, default=8,
                        help="N of the engine=python vector env row (the reference core)")
    parser.add_argument("--ppo", action="store_true",
                        help="also time PPO on the single env against the vector env")
    parser.add_argument("--ppo-steps", type=int, default=16_384, help="PPO steps per run")
    parser.add_argument("--ppo-envs", type=int, default=64, help="N of the vector env PPO run")
    parser.add_argument("--rollout", type=int, default=2048,
                        help="samples per PPO update (n_steps x envs), a multiple of --ppo-envs")
    parser.add_argument("--markdown", type=Path, default=None, metavar="PATH",
                        help="also write the tables into PATH's env-throughput block "
                             "(PERFORMANCE.md)")
    args = parser.parse_args(argv)
    for option, values in (("--sizes", args.sizes), ("--reference-size", [args.reference_size]),
                           ("--ppo-envs", [args.ppo_envs])):
        if any(not 1 <= n <= MAX_ENVS for n in values):
            parser.error(f"{option} {values}: expected whole numbers in [1, {MAX_ENVS}]")
    if args.seconds <= 0 or args.ppo_steps < 1:
        parser.error("--seconds and --ppo-steps: expected positive values")
    if args.rollout % args.ppo_envs:
        parser.error(f"--rollout {args.rollout}: expected a multiple of --ppo-envs "
                     f"{args.ppo_envs}")
    overrides = parse_overrides(args.overrides)

    cartpole = gym.make("CartPole-v1")
    cartpole.action_space.seed(0)

    def cartpole_rate() -> float:
        return steps_per_second(cartpole, lambda _o: cartpole.action_space.sample(), args.seconds)

    rows = {"CartPole-v1 (random), first": cartpole_rate()}
    stop_agent = HeuristicAgent.from_name("EvalStop-2")
    stop_env = gym.make(ENV_ID, config=args.config, control="stop", **overrides)
    rows["EvalStopCluster-v0 stop (EvalStop-2)"] = steps_per_second(
        stop_env, stop_agent.act, args.seconds)
    full_env = gym.make(ENV_ID, config=args.config, control="full", **overrides)
    full_agent = TableEvalStopAgent(full_env.get_wrapper_attr("encoder").max_jobs)
    rows["EvalStopCluster-v0 full (EvalStop-2 on the table)"] = steps_per_second(
        full_env, full_agent.act, args.seconds)
    rows.update(vector_rows(args, overrides))
    rows["CartPole-v1 (random), last"] = cartpole_rate()

    # the faster of CartPole's two measurements, one at each end of the run: a slow reading
    # (the machine's warm-up or load) would flatter every ratio
    base = max(rows["CartPole-v1 (random), first"], rows["CartPole-v1 (random), last"])
    tables = ["\n".join([f"{'env':<60} {'steps/CPU s':>11} {'vs CartPole':>12}"] + [
        f"{name:<60} {rate:>11.0f} {rate / base:>12.4f}" for name, rate in rows.items()])]
    print(tables[0], end="\n\n", flush=True)
    tables.append(bytes_table(args, overrides))
    print(tables[-1], flush=True)
    if args.ppo:
        tables.append(ppo_comparison(args, overrides))
        print()
        print(tables[-1])
    if args.markdown is not None:
        write_block(args.markdown, BLOCK, block(argv, tables))


def block(argv: Sequence[str] | None, tables: list[str]) -> str:
    """The tables as PERFORMANCE.md's env-throughput block: the command and machine first."""
    command = " ".join(["python -m evalstop_gym.benchmarks.perf.env_throughput",
                        *(sys.argv[1:] if argv is None else argv)])
    where = machine()
    return marked(BLOCK, "Env throughput against CartPole (benchmarks/perf/env_throughput.py)", [
        f"`{command}`, in one run on {where['cpu']} ({where['cores']} cores, Python "
        f"{where['python']}). Rates are env steps per second of the process's CPU time, each "
        "compared with CartPole-v1 single measured in the same run (the faster of its two "
        "readings, at the run's start and end), the figure to compare across machines.", "",
        "```text",
        "\n\n".join(tables), "```"])


if __name__ == "__main__":
    main()
