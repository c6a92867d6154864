"""StopAt-p: stop every RLHF job when it reaches progress p, whatever its evals say.

The paper's "oracle-flavoured" constant classifier: it knows where peaks tend to be, not which
jobs hack. It asks the cluster for a check at progress p (a milestone), so it acts exactly there.
"""

from __future__ import annotations

import math
from typing import Any

from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.rules import RULE_PROGRESS, progress_reached
from evalstop_gym.sim.view import ClusterView, SchedulerJobView

from .detector import DetectorBase, monitored, stop
from .registry import register_detector


class StopAt(DetectorBase):
    """StopAt-p: stop every RLHF job at progress `p`, whatever its evals say.

    The paper's oracle-flavoured baseline: a constant classifier that knows where peaks tend to
    be, not which jobs hack. It asks the platform for a check at `p` (a milestone), so it acts
    exactly there. Every healthy RLHF job it sees is stopped too, so it is a reference point, not
    a detector to deploy. Needs progress. Name: `StopAt-<p>`, p in (0, 1).
    """

    types = ("rlhf",)
    needs = ("progress",)

    def __init__(self, p: float = 0.65):
        if not 0.0 < p < 1.0:
            raise ValueError(f"StopAt: p must be in (0, 1), got {p}")
        self.p = p
        self.milestones = (p,)
        self.name = f"StopAt-{p:g}"

    def native_rule(self) -> dict[str, Any] | None:
        return {"rule": RULE_PROGRESS, "monitored": monitored(self.types), "p": self.p}

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        if not math.isnan(progress_reached(job.progress, self.p)):
            return stop(self.reason(job.job_type, job.progress))
        return CONTINUE

    def reason(self, job_type: str, progress: float) -> str:
        return f"reached progress {self.p:g}"


register_detector("StopAt", lambda args: StopAt(float(args[0]) if args else 0.65),
                  "StopAt-P: P a number in (0, 1)")
