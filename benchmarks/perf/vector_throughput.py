"""Measurements of the batched vector env for `env_throughput`: env steps per second of a
Gymnasium vector env, and PPO's wall time split into rollout collection and gradient updates.

A benchmark, not a timed test: figures depend on the machine and its load, so every row is
compared with CartPole-v1 (or the single env) measured in the same run.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any, NamedTuple

import numpy as np

STOP_PROBABILITY = 0.05   # the random agent's share of "stop" answers: episodes of normal length
# control="full" asks about every running job at every pass (many per job): a far smaller share
FULL_STOP_PROBABILITY = 0.002


def cpu_seconds() -> float:
    """This process's CPU time: the envs step in one thread, and on a shared machine the time
    other processes hold the cores is not theirs (wall-clock ratios to CartPole moved by ~10%
    with the load; these by a few percent)."""
    return time.process_time()


def vector_steps_per_second(venv: Any, act: Callable[[], Any], seconds: float) -> float:
    """Step a Gymnasium vector env with `act()` for about `seconds` of CPU time (its autoresets
    included); env steps (num_envs per call) per CPU second."""
    venv.reset(seed=0)
    steps = 0
    start = cpu_seconds()
    while (elapsed := cpu_seconds() - start) < seconds:
        venv.step(act())
        steps += venv.num_envs
    return steps / elapsed


def random_stops(num_envs: int, seed: int = 0) -> Callable[[], np.ndarray]:
    """Actions for `num_envs` clusters: stop with STOP_PROBABILITY, else continue."""
    rng = np.random.default_rng(seed)
    return lambda: (rng.random(num_envs) < STOP_PROBABILITY).astype(np.int64)


def random_full_actions(venv: Any, seed: int = 0) -> Callable[[], np.ndarray]:
    """control="full" rows for a vector env, drawn from its flat masks (`action_masks()`, what
    MaskablePPO reads each step): each running job stopped with FULL_STOP_PROBABILITY, and the
    pick uniform over the valid ones (0, the base's order, always among them)."""
    rng = np.random.default_rng(seed)
    rows = venv.single_action_space.nvec.size - 1

    def act() -> np.ndarray:
        masks = venv.action_masks()
        stops = masks[:, 1:2 * rows:2] & (rng.random((len(masks), rows)) < FULL_STOP_PROBABILITY)
        picks = (rng.random((len(masks), rows + 1)) * masks[:, 2 * rows:]).argmax(axis=1)
        return np.column_stack([stops, picks]).astype(np.int64)
    return act


class PPOTiming(NamedTuple):
    """One PPO run: seconds in all, collecting rollouts (env steps and policy inference) and
    the rest (gradient updates), and the samples it took."""

    wall: float
    collect: float
    update: float
    samples: int

    @property
    def collect_per_sample(self) -> float:
        return self.collect / self.samples

    @property
    def samples_per_second(self) -> float:
        return self.samples / self.wall


def ppo_timing(venv: Any, n_steps: int, total: int, batch_size: int = 64,
               seed: int = 0) -> PPOTiming:
    """Train PPO("MultiInputPolicy") on `venv` for `total` steps with `n_steps` per env, timing
    each rollout between SB3's `_on_rollout_start` and `_on_rollout_end`."""
    from stable_baselines3 import PPO
    from stable_baselines3.common.callbacks import BaseCallback

    class Timer(BaseCallback):
        collect = wall = 0.0

        def _on_training_start(self) -> None:
            self.started = time.perf_counter()

        def _on_rollout_start(self) -> None:
            self.rollout = time.perf_counter()

        def _on_rollout_end(self) -> None:
            self.collect += time.perf_counter() - self.rollout

        def _on_training_end(self) -> None:
            self.wall = time.perf_counter() - self.started

        def _on_step(self) -> bool:
            return True

    model = PPO("MultiInputPolicy", venv, n_steps=n_steps, batch_size=batch_size, seed=seed,
                device="cpu", verbose=0)
    timer = Timer()
    model.learn(total, callback=timer)
    return PPOTiming(timer.wall, timer.collect, timer.wall - timer.collect, model.num_timesteps)


def ppo_table(single: PPOTiming, vector: PPOTiming, single_name: str, vector_name: str) -> str:
    """The two runs side by side, then vector/single: rollout time per sample (how many times
    smaller) and end-to-end samples per second (how many times larger)."""
    lines = [f"{'PPO run':<44} {'wall s':>8} {'collect s':>10} {'update s':>9} "
             f"{'collect us/sample':>18} {'samples/s':>10}"]
    for name, t in ((single_name, single), (vector_name, vector)):
        lines.append(f"{name:<44} {t.wall:>8.2f} {t.collect:>10.2f} {t.update:>9.2f} "
                     f"{t.collect_per_sample * 1e6:>18.1f} {t.samples_per_second:>10.0f}")
    lines.append(f"{'collect per sample, single / vector':<44} "
                 f"{single.collect_per_sample / vector.collect_per_sample:>8.1f}x")
    lines.append(f"{'samples/s end to end, vector / single':<44} "
                 f"{vector.samples_per_second / single.samples_per_second:>8.1f}x")
    return "\n".join(lines)
