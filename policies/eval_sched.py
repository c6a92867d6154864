"""EvalSched: SRTF-Est that demotes jobs whose latest eval fell below their best, never stops them.

The paper's "deprioritise, don't terminate" baseline: post-peak jobs keep their place in the
system and run only when nothing healthier waits, which starves them rather than freeing GPUs.
"""

from __future__ import annotations

from evalstop_gym.sim.native import KEY_EVAL_DEMOTE
from evalstop_gym.sim.view import SchedulerJobView

from .base import PriorityScheduler


def past_peak(job: SchedulerJobView) -> bool:
    scores = job.eval_scores
    return len(scores) >= 2 and scores[-1] < max(scores[:-1])


class EvalSched(PriorityScheduler):
    name = "EvalSched"
    native_key = KEY_EVAL_DEMOTE
    incremental = True   # key frozen while waiting, never rising while running
    preemptive = True

    def key(self, job: SchedulerJobView) -> tuple[bool, float]:
        return (past_peak(job), job.remaining_estimate)
