"""EvalSched: SRTF-Est that deprioritises jobs whose latest eval fell below their best, never
stopping them -- the paper's "deprioritise, don't terminate" baseline, in two forms.

`EvalSched` is the paper's (§4, "deprioritized jobs still occupy the system, receiving occasional
time slices"): a demoted job keeps its GPUs and the platform time-slices it, so it trains and
evaluates at `cluster.time_slice_share` of its speed until an eval lifts it back. Holding the
GPUs while barely progressing is what makes its JCT far worse than SRTF-Est's.
`EvalSchedStrict` ("EvalSched-Strict") is strict priority: demoted jobs rank behind every other
job and are preempted for them, so they give their GPUs away and wait.
"""

from __future__ import annotations

from evalstop_gym.sim import rules
from evalstop_gym.sim.rules import KEY_EVAL_DEMOTE, KEY_EVAL_SLICE
from evalstop_gym.sim.view import SchedulerJobView

from .base import PriorityScheduler
from .registry import register_base


def past_peak(job: SchedulerJobView) -> bool:
    """The job's latest eval fell below its best before (`rules.past_peak`)."""
    return rules.past_peak(job.eval_scores)


class EvalSched(PriorityScheduler):
    """EvalSched: SRTF-Est that demotes a job past its eval peak instead of stopping it.

    Time-sliced, as the paper describes it: a demoted job ranks first among running jobs (it is
    never preempted, it keeps its GPUs) and `time_sliced` tells the platform to run it at its
    slice share. Key: `rules.priority_key`, KEY_EVAL_SLICE: (-1 if past peak else 0, remaining
    estimate)."""

    name = "EvalSched"
    native_key = KEY_EVAL_SLICE
    incremental = True   # key frozen while waiting, never rising while running
    key_rises_at_checks = True   # it reads the history
    preemptive = True

    def time_sliced(self, job: SchedulerJobView) -> bool:
        """Whether the platform should give this running job only its slice share of time."""
        return past_peak(job)


class EvalSchedStrict(PriorityScheduler):
    """EvalSched-Strict: demoted jobs run only when nothing healthier waits (preempted for it).

    Key: `rules.priority_key`, KEY_EVAL_DEMOTE: (1 if past peak else 0, remaining estimate)."""

    name = "EvalSched-Strict"
    native_key = KEY_EVAL_DEMOTE
    incremental = True
    key_rises_at_checks = True
    preemptive = True


register_base("EvalSched", EvalSched)
register_base("EvalSched-Strict", EvalSchedStrict)
