"""Heuristic stop rules as env agents: they act from observations (and `info`) alone.

`HeuristicAgent` asks the detector about the view the env hands it in `info["view"]` (what the
detector's `decide` receives in `simulate`, so it decides identically); given only an
observation, it decodes one back into a `SchedulerJobView` (`decode_stop`, to the float32
precision of the observation). Either way a detector in `policies/` runs unchanged. Detectors
that learn from other jobs' ends ("runs" in their `needs`: MedianPruner, CUSUM and BOCPD with an
estimated noise level) are fed `info["ended_jobs"]`, so they need `act(obs, info)`; called
without `info` they raise rather than silently never warm up. `act` and `predict` (the SB3
shape, which `evaluate_policy` calls) serve single and batched observations.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import numpy as np

from ..policies import make_detector
from ..policies.detector import learns_from_runs
from ..sim.protocols import Detector, checked_decision
from .observation import ROW_FIELDS, Obs, TableObservation, decode_stop

COLUMN = {name: i for i, name in enumerate(ROW_FIELDS)}


def _batched(obs: Mapping[str, np.ndarray], key: str) -> bool:
    return np.asarray(obs[key]).ndim == 2


def _unbatch(obs: Mapping[str, np.ndarray]) -> list[Obs]:
    n = len(next(iter(obs.values())))
    return [{k: np.asarray(v)[i] for k, v in obs.items()} for i in range(n)]


class HeuristicAgent:
    """A detector (or None for NoStop) acting in control="stop"."""

    def __init__(self, detector: Detector | None) -> None:
        self.detector = detector
        self.name = detector.name if detector is not None else "NoStop"
        self.milestones: tuple[float, ...] = tuple(detector.milestones) if detector else ()
        # from `needs`, as everywhere else: CUSUM with a fixed sigma has an on_job_end but learns
        # nothing from it, so it acts from an observation alone
        self.learns_from_ends = learns_from_runs(detector)

    @classmethod
    def from_name(cls, name: str) -> HeuristicAgent:
        """'EvalStop-2', 'StopAt-0.65', 'NoStop', ... (any registered detector name)."""
        return cls(make_detector(name))

    def reset(self) -> None:
        """Forget what was learnt from ended jobs: call it with `env.reset` for a fresh episode."""
        if self.detector is not None:
            self.detector.reset()

    def act(self, obs: Mapping[str, np.ndarray], info: Mapping[str, Any] | None = None) -> int:
        if self.learns_from_ends:
            if info is None:
                raise ValueError(f"{self.name} learns from ended jobs: call act(obs, info) with "
                                 "the env's info, which carries them as info['ended_jobs']")
            for view in info.get("ended_jobs", ()):
                self.detector.on_job_end(view)  # type: ignore[union-attr]
        if self.detector is None:
            return 0
        if info is not None and "view" in info:
            return int(checked_decision(self.detector.name, self.detector.decide(
                info["view"], info["cluster"])).stop)
        if not np.any(obs["job"]):
            return 0
        view, cluster = decode_stop(obs)
        return int(checked_decision(self.detector.name, self.detector.decide(view, cluster)).stop)

    def predict(self, observation: Mapping[str, np.ndarray], state: Any = None,
                episode_start: Any = None, deterministic: bool = True) -> tuple[Any, Any]:
        if _batched(observation, "job"):
            return np.array([self.act(o) for o in _unbatch(observation)]), state
        return np.array(self.act(observation)), state


class TableEvalStopAgent:
    """EvalStop-k on the control="full" table: stop running rows with >= k trailing declines.

    The "declines" column is the view's decline count, as `EvalStop` reads it; k defaults as in
    `EvalStop` (DPO: k_rlhf + 1). Picks no job (0), so the base scheduler allocates: with k above
    any possible decline count this is exactly the base scheduler alone.
    """

    def __init__(self, max_jobs: int, k_rlhf: int = 2, k_dpo: int | None = None) -> None:
        self.layout = TableObservation(max_jobs)
        self.k = {"rlhf": k_rlhf, "dpo": k_dpo if k_dpo is not None else k_rlhf + 1}
        self.name = f"EvalStop-{k_rlhf}"

    def act(self, obs: Mapping[str, np.ndarray]) -> np.ndarray:
        table = self.layout.table(obs)
        k = np.full(self.layout.max_jobs, np.inf)
        for job_type, kt in self.k.items():
            k[table[:, COLUMN[job_type]] == 1.0] = kt
        running = np.asarray(obs["job_mask"]).astype(bool) & (table[:, COLUMN["running"]] == 1.0)
        stop = running & (table[:, COLUMN["declines"]] >= k)
        return np.append(stop.astype(np.int64), 0)

    def predict(self, observation: Mapping[str, np.ndarray], state: Any = None,
                episode_start: Any = None, deterministic: bool = True) -> tuple[Any, Any]:
        if _batched(observation, "jobs"):
            return np.stack([self.act(o) for o in _unbatch(observation)]), state
        return self.act(observation), state


__all__ = ["HeuristicAgent", "TableEvalStopAgent"]
