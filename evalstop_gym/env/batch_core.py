"""The batch-core contract behind the vector env, and its reference implementation.

A batch core advances N independent stop-mode clusters (control="stop" of `EvalStopCluster-v0`)
and writes their observations into preallocated batched buffers, so the vector env and the SB3
adapter never touch one env at a time. Two cores share the contract `BatchCore`: `ReferenceBatch`
(here: N single envs driven in Python, slow and obviously equal to the single env) and
`CompiledBatch` (`compiled_batch.py`, the compiled engine). Row i of either gives bit for bit what
a single `EvalStopClusterEnv` returns for the same seed and actions. `full_batch.ReferenceFullBatch`
keeps the contract in control="full" (actions are rows, with their masks).
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from numbers import Integral
from typing import Any, Protocol, runtime_checkable

import numpy as np
from gymnasium import spaces
from gymnasium.utils import seeding

from ..config import SimConfig
from .cluster_env import UNSEEDED_SEED_RANGE, EvalStopClusterEnv
from .observation import TableObservation

MAX_ENVS = 4096   # clusters per batch core: N x the observation's floats stay small


def check_num_envs(num_envs: Any) -> int:
    """A whole number of clusters in [1, MAX_ENVS]."""
    if isinstance(num_envs, bool) or not isinstance(num_envs, Integral) \
            or not 1 <= int(num_envs) <= MAX_ENVS:
        raise ValueError(f"num_envs={num_envs!r}: expected a whole number in [1, {MAX_ENVS}]")
    return int(num_envs)


def check_stop(stop: Any, num_envs: int) -> np.ndarray:
    """One action per env, each 0 (continue) or 1 (stop), as the single env's `stop_action`."""
    array = np.asarray(stop)
    if array.shape != (num_envs,) or not (array.dtype == np.bool_
                                          or np.issubdtype(array.dtype, np.integer)) \
            or ((array != 0) & (array != 1)).any():
        raise ValueError(f"actions: expected {num_envs} values, each 0 (continue) or 1 (stop); "
                         f"got shape {array.shape} and dtype {array.dtype}")
    return array.astype(np.int64)


@runtime_checkable
class BatchCore(Protocol):
    """N stop-mode clusters advanced together; rows of `obs`, `reward`, `terminated` are env i's
    (see vec_interface: the same episodes as `EvalStopClusterEnv(control="stop")`)."""

    num_envs: int
    single_observation_space: spaces.Dict
    obs: dict[str, np.ndarray]
    reward: np.ndarray
    terminated: np.ndarray

    def __init__(self, num_envs: int, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", monitored: Iterable[str] = ("rlhf", "dpo"),
                 milestones: Iterable[float] = (), **overrides: Any) -> None: ...

    def reset(self, indices: Sequence[int], seeds: Sequence[int]) -> None:
        """Start env indices[k] on workload seed seeds[k] and advance it to its first decision."""

    def step(self, stop: np.ndarray) -> None:
        """Answer every running env's pending check with its action; finished envs stay put."""

    def step_and_reset(self, stop: np.ndarray, indices: Sequence[int], seeds: Sequence[int]
                       ) -> None:
        """`step`, then reset envs `indices` (terminated: ended at the last step) on `seeds`:
        Gymnasium's next-step autoreset, in one call where the core can."""

    def metrics(self, i: int) -> dict[str, float]:
        """Env i's finished episode's paper metrics."""

    def reward_terms(self, i: int) -> dict[str, float]:
        """Env i's episode totals of the unweighted reward terms."""

    def job_id(self, i: int) -> int:
        """The reporting job's id at env i's current decision (-1 at the end)."""

    def job_ids(self) -> np.ndarray:
        """Every env's `job_id`, as an int64 array (one call per step, not N)."""


class ReferenceBatch:
    """`BatchCore` over N `EvalStopClusterEnv(control="stop")` driven in Python: the equivalence
    reference, and the core for bases without a compiled form and heterogeneous clusters."""

    control = "stop"   # the single envs' control (`full_batch.ReferenceFullBatch`: "full")

    def __init__(self, num_envs: int, config: str | SimConfig = "e2",
                 base_scheduler: str = "SRTF-Est", monitored: Iterable[str] = ("rlhf", "dpo"),
                 milestones: Iterable[float] = (), **overrides: Any) -> None:
        self.num_envs = check_num_envs(num_envs)
        first = EvalStopClusterEnv(config, base_scheduler, self.control, tuple(monitored),
                                   tuple(milestones), **overrides)
        table: dict[str, Any] = ({"max_jobs": first.encoder.max_jobs}
                                 if isinstance(first.encoder, TableObservation) else {})
        # the others share the first's resolved config: no N-fold config loading
        self.envs = [first] + [
            EvalStopClusterEnv(first.config, base_scheduler, self.control, first.monitored,
                               first.milestones, **table) for _ in range(self.num_envs - 1)]
        self.single_observation_space: spaces.Dict = first.observation_space  # type: ignore
        self.single_action_space: spaces.Space = first.action_space
        self.obs = {key: np.zeros((self.num_envs, *(space.shape or ())), dtype=space.dtype)
                    for key, space in self.single_observation_space.spaces.items()}
        self.reward = np.zeros(self.num_envs, dtype=np.float64)
        self.terminated = np.ones(self.num_envs, dtype=bool)   # nothing to step before a reset
        self._infos: list[dict[str, Any]] = [{} for _ in range(self.num_envs)]

    def _write(self, i: int, obs: dict[str, np.ndarray], info: dict[str, Any]) -> None:
        for key, row in obs.items():
            self.obs[key][i] = row
        self._infos[i] = info
        self.terminated[i] = "metrics" in info   # the single env reports metrics at its end

    def reset(self, indices: Sequence[int], seeds: Sequence[int]) -> None:
        if len(indices) != len(seeds):
            raise ValueError(f"seeds: expected one per index ({len(indices)}); got {len(seeds)}")
        for i, seed in zip(indices, seeds, strict=True):
            obs, info = self.envs[i].reset(seed=int(seed))
            self._write(i, obs, info)
            self.reward[i] = 0.0

    def check_actions(self, actions: Any) -> np.ndarray:
        """The batch's actions checked before any env moves: a one-line ValueError if not."""
        return check_stop(actions, self.num_envs)

    def step(self, stop: np.ndarray) -> None:
        actions = self.check_actions(stop)
        self.reward[self.terminated] = 0.0
        for i in np.flatnonzero(~self.terminated).tolist():
            obs, reward, _, _, info = self.envs[i].step(
                actions[i] if actions.ndim == 2 else int(actions[i]))
            self._write(i, obs, info)
            self.reward[i] = reward

    def step_and_reset(self, stop: np.ndarray, indices: Sequence[int], seeds: Sequence[int]
                       ) -> None:
        self.step(stop)
        if len(indices):
            self.reset(indices, seeds)

    def _final(self, i: int, key: str) -> dict[str, float]:
        if not self.terminated[i] or key not in self._infos[i]:
            raise RuntimeError(f"env {i}: {key} exist once its episode has terminated")
        return dict(self._infos[i][key])

    def metrics(self, i: int) -> dict[str, float]:
        return self._final(i, "metrics")

    def reward_terms(self, i: int) -> dict[str, float]:
        return self._final(i, "reward_terms")

    def job_id(self, i: int) -> int:
        return int(self._infos[i].get("job_id", -1))

    def job_ids(self) -> np.ndarray:
        return np.array([self.job_id(i) for i in range(self.num_envs)], np.int64)


class EpisodeSeeds:
    """Each env's workload seeds as the single env draws them: a seeded reset uses its seed and
    reseeds the env's generator with it; an unseeded one draws from that generator (as
    `EvalStopClusterEnv.reset()` does), so env i replays a single env seeded alike."""

    def __init__(self, num_envs: int) -> None:
        self.generators: list[np.random.Generator | None] = [None] * num_envs

    def draw(self, indices: Sequence[int], seeds: Sequence[int | None]) -> list[int]:
        out = []
        for i, seed in zip(indices, seeds, strict=True):
            if seed is not None:
                self.generators[i] = seeding.np_random(int(seed))[0]
                out.append(int(seed))
                continue
            rng = self.generators[i]
            if rng is None:
                rng = self.generators[i] = seeding.np_random()[0]
            out.append(int(rng.integers(*UNSEEDED_SEED_RANGE)))
        return out

    @staticmethod
    def spread(seed: int | Sequence[int | None] | None, num_envs: int) -> list[int | None]:
        """Gymnasium's vector convention: an int s seeds env i with s + i; a list, one each."""
        if seed is None:
            return [None] * num_envs
        if isinstance(seed, Integral) and not isinstance(seed, bool) and int(seed) >= 0:
            return [int(seed) + i for i in range(num_envs)]
        seeds = list(seed) if isinstance(seed, (list, tuple, np.ndarray)) else [False]
        if len(seeds) != num_envs or any(
                s is not None and (isinstance(s, bool) or not isinstance(s, Integral) or int(s) < 0)
                for s in seeds):
            raise ValueError(f"seed: expected None, a whole number >= 0 or {num_envs} of them "
                             f"(None or >= 0); got {seed!r}")
        return seeds
