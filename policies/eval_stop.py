"""EvalStop-k: stop a job after k consecutive eval declines (the paper's Algorithm 1).

A decline is a score below the previous one (variant "best": below the previous one and below
the best before it). Any non-decline resets the count. k differs by type: RLHF 2, DPO 3; LoRA is
not monitored. The rule needs no per-job state: the count is read off the view's eval history.

The paper tuned k for 7-20 evals per run; with more, k consecutive declines happen by noise
alone on healthy runs, so the reference engine logs one warning per detector (per run or
monitor; `reset()` re-arms it) the first time a job passes PAPER_MAX_EVALS. A warning only:
decisions do not change.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from evalstop_gym.sim import rules
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import RULE_DECLINES, decline_count
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, monitored, stop
from .registry import register_detector

__all__ = ["EvalStop", "decline_count"]

log = logging.getLogger(__name__)
PAPER_MAX_EVALS = 20   # the paper's regime: 7-20 evals per run
WARNED: set[str] = set()   # detector names already warned about in this process


class EvalStop(DetectorBase):
    """EvalStop-k: stop a monitored job after k consecutive eval declines (the paper's rule).

    `k_rlhf` declines in a row stop an RLHF job, `k_dpo` (default k_rlhf + 1) a DPO job; with
    `variant="best"` a decline must also fall below the best score before it. It assumes a
    hacking run's true score falls at each eval past its peak by more than the eval noise: noise
    large against that drop makes chance declines (false stops) and breaks runs of true ones
    (late or missed stops); it has no false-alarm guarantee. Needs the evals only.
    Name: `EvalStop-<k>[-<k_dpo>][-best]`.
    """

    def __init__(self, k_rlhf: int = 2, k_dpo: int | None = None, variant: str = "previous"):
        if k_rlhf < 1 or (k_dpo is not None and k_dpo < 1):
            raise ValueError(f"EvalStop: k must be >= 1, got k_rlhf={k_rlhf}, k_dpo={k_dpo}")
        if variant not in ("previous", "best"):
            raise ValueError(f"EvalStop: variant must be 'previous' or 'best', got {variant!r}")
        self.k = {"rlhf": k_rlhf, "dpo": k_dpo if k_dpo is not None else k_rlhf + 1}
        self.variant = variant
        self.name = f"EvalStop-{k_rlhf}" + ("-best" if variant == "best" else "")

    def native_rule(self) -> dict[str, Any] | None:
        return {"rule": RULE_DECLINES, "monitored": monitored(self.types, self.k),
                "best_variant": self.variant == "best"}

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if len(job.eval_scores) > PAPER_MAX_EVALS and self.name not in WARNED:
            WARNED.add(self.name)   # once per name and process: a sweep builds one per run
            log.warning("%s: a run has more than %d evals, past the paper's regime (7-20), "
                        "where k consecutive declines also stop healthy runs; consider the "
                        "default detector (evalstop_gym.online.DEFAULT_DETECTOR)", self.name,
                        PAPER_MAX_EVALS)
        declines = rules.declines(job.eval_scores, self.k[job.job_type], self.variant == "best")
        if not math.isnan(declines):
            return stop(self.reason(job.job_type, declines))
        return CONTINUE

    def reason(self, job_type: str, declines: float) -> str:
        return f"{int(declines)} consecutive eval declines (k={self.k[job_type]})"


def _factory(args: list[str]) -> EvalStop:
    variant = "best" if args and args[-1] == "best" else "previous"
    nums = [a for a in args if a != "best"]
    return EvalStop(k_rlhf=int(nums[0]) if nums else 2,
                    k_dpo=int(nums[1]) if len(nums) > 1 else None, variant=variant)


register_detector("EvalStop", _factory, "EvalStop-K[-K_DPO][-best]: K and K_DPO positive integers")
