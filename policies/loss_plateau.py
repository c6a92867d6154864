"""LossPlateau: stop when the training loss stops improving (a loss-only, SLAQ++ detector).

Stops a monitored job when the relative loss improvement over the last `window` check points is
below `threshold` (paper: 2% over 3 checkpoints; variant: 0.1% over 5).
"""

from __future__ import annotations

import math
from typing import Any

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import RULE_LOSS_PLATEAU, loss_plateau
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, monitored, stop
from .registry import register_detector


class LossPlateau(DetectorBase):
    """LossPlateau: stop a monitored job once its training loss stops improving (SLAQ++-style).

    Stops when the relative loss drop over the last `window` checks is below `threshold`. It
    reads the training loss only, never the evals: that is the paper's point, since the loss
    plateaus alike in healthy and hacking RLHF runs and cannot tell them apart. Needs the
    training loss. Name: `LossPlateau` (threshold 0.02, window 3) or
    `LossPlateau-<threshold>-<window>`.
    """

    needs = ("loss",)

    def __init__(self, threshold: float = 0.02, window: int = 3):
        if not threshold >= 0 or window < 2:
            raise ValueError(f"LossPlateau: need threshold >= 0 and window >= 2, got "
                             f"{threshold}, {window}")
        self.threshold = threshold
        self.window = window
        default = threshold == 0.02 and window == 3
        self.name = "LossPlateau" if default else f"LossPlateau-{threshold:g}-{window}"

    def native_rule(self) -> dict[str, Any] | None:
        return {"rule": RULE_LOSS_PLATEAU, "monitored": monitored(self.types),
                "threshold": self.threshold, "window": self.window}

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        gain = loss_plateau(job.loss_history, self.threshold, self.window)
        if not math.isnan(gain):
            return stop(self.reason(job.job_type, gain))
        return CONTINUE

    def reason(self, job_type: str, gain: float) -> str:
        return f"loss improved {gain:.2%} over {self.window} checks"


def _factory(args: list[str]) -> LossPlateau:
    threshold = float(args[0]) if args else 0.02
    window = int(args[1]) if len(args) > 1 else 3
    return LossPlateau(threshold, window)


register_detector("LossPlateau", _factory,
                  "LossPlateau-THRESHOLD-WINDOW: THRESHOLD a number > 0, WINDOW a whole number "
                  ">= 1")
