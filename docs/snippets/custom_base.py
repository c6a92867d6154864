import evalstop_gym
from evalstop_gym.policies import EvalStop
from evalstop_gym.policies.base import PriorityScheduler
from evalstop_gym.sim.view import SchedulerJobView


class FewestGPUsFirst(PriorityScheduler):
    """FewestGPUsFirst: waiting jobs start smallest demand first; never preempts.

    Packs many small jobs in; a large job may wait long behind a stream of small ones.
    """

    name = "FewestGPUsFirst"

    def key(self, job: SchedulerJobView) -> float:
        return job.gpus


policy = EvalStop(2) + FewestGPUsFirst()  # any detector composes over any base
result = evalstop_gym.simulate("e2", policy, seed=42)
print(policy.name, result.metrics["jct"])
