from evalstop_gym.online import RunMonitor
from evalstop_gym.policies import register_detector
from evalstop_gym.policies.detector import DetectorBase, stop
from evalstop_gym.sim.protocols import CONTINUE, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView


class DropFromBest(DetectorBase):
    """DropFromBest-d: stop once the latest eval sits `d` below the best so far.

    No false-alarm guarantee: one noisy eval deeper than `d` stops the run. Needs the evals only.
    """

    def __init__(self, drop: float = 0.1) -> None:
        if not drop > 0:
            raise ValueError(f"DropFromBest: drop must be > 0, got {drop}")
        self.drop = drop
        self.name = f"DropFromBest-{drop:g}"

    def _decide(self, job: SchedulerJobView, cluster: ClusterView) -> StopDecision:
        scores = job.eval_scores
        if scores and max(scores) - scores[-1] > self.drop:
            return stop(f"{max(scores) - scores[-1]:.3f} below the best")
        return CONTINUE


register_detector("DropFromBest", lambda args: DropFromBest(float(args[0]) if args else 0.1))

monitor = RunMonitor("DropFromBest-0.2", mode="max")
for step, score in enumerate([0.5, 0.8, 0.7, 0.55], start=1):
    if monitor.update(step, score).stop:
        print("stopped at step", step, ":", monitor.reason)
        break
