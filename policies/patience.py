"""Patience: the early-stopping rule of Keras and Hugging Face, as practitioners run it.

Stop after `patience` consecutive evals that fail to beat the best score so far by more than
`min_delta` (score units). As in Keras `EarlyStopping`, the best only moves on an improvement by
more than `min_delta`, so a slow creep below that margin still counts as waiting. Stateless: the
wait is read off the view's eval history. Name: `Patience-<patience>[-<min_delta>]`.
"""

from __future__ import annotations

from collections.abc import Sequence

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import RULE_PATIENCE, patience_step
from evalstop_gym.sim.view import ClusterView, FoldableHistory, SchedulerJobView

from .detector import DetectorBase, monitored, stop
from .registry import register_detector


def _wait_step(min_delta: float):
    def step(state: tuple[float | None, int], s: float) -> tuple[float | None, int]:
        best, wait = state
        return patience_step(best, wait, s, min_delta, best is None)  # type: ignore[arg-type]
    return step


def evals_without_improvement(scores: Sequence[float], min_delta: float = 0.0) -> int:
    """Keras's `wait` counter after the last score: evals since the best last improved.

    A history that can `fold` (a live run's, see `evalstop_gym.online`) keeps the counter
    between evals, so each eval is looked at once."""
    step = _wait_step(min_delta)
    if isinstance(scores, FoldableHistory):
        return scores.fold("Patience.wait", (min_delta,), step, (None, 0))[1]
    state: tuple[float | None, int] = (None, 0)
    for s in scores:
        state = step(state, s)
    return state[1]


class Patience(DetectorBase):
    """Patience-n: stop after `patience` evals in a row that fail to beat the best by `min_delta`.

    The early-stopping rule of Keras and Hugging Face, as practitioners already run it, kept so
    every other detector can be compared with the habit it would replace. No false-alarm
    guarantee: on a flat noisy run the best so far gets ever harder to beat, so the wait fills up
    by chance, the more often the more evals a run has. Needs the evals only.
    Name: `Patience-<patience>[-<min_delta>]`.
    """

    def __init__(self, patience: int = 3, min_delta: float = 0.0) -> None:
        if patience < 1 or not min_delta >= 0:
            raise ValueError(f"Patience: need patience >= 1 and min_delta >= 0, got "
                             f"{patience}, {min_delta}")
        self.patience = patience
        self.min_delta = min_delta
        self.name = f"Patience-{patience}" + (f"-{min_delta:g}" if min_delta else "")

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        wait = evals_without_improvement(job.eval_scores, self.min_delta)
        if wait >= self.patience:
            return stop(self.reason(job.job_type, wait))
        return CONTINUE

    def native_rule(self) -> dict | None:
        return {"rule": RULE_PATIENCE, "threshold": self.min_delta,
                "monitored": monitored(self.types, dict.fromkeys(self.types, self.patience))}

    def reason(self, job_type: str, wait: float) -> str:
        return f"{int(wait)} evals without improving the best by > {self.min_delta:g}"


def _factory(args: list[str]) -> Patience:
    return Patience(int(args[0]) if args else 3, float(args[1]) if len(args) > 1 else 0.0)


register_detector("Patience", _factory)
