"""Stop Ray Tune trials whose score has turned: `python examples/ray_tune_search.py`.

Four trials "train" for 20 iterations on a local Ray (2 CPUs). Trials with x < 0.5 peak early
and then decline; the others keep rising. `EvalStopScheduler` stops the declining trials a couple
of results after their peak, freeing their CPUs for the rest, and lets the rising ones finish.
`main_with_asha` does the same with Tune's ASHA as the scheduler and `EvalStopStopper` beside it:
the detector composes with any scheduler that way.
"""

from __future__ import annotations

import tempfile

import ray
from ray import tune
from ray.tune.schedulers import ASHAScheduler

from evalstop_gym.integrations.ray_tune import EvalStopScheduler, EvalStopStopper
from evalstop_gym.online import DEFAULT_DETECTOR

STEPS = 20


def trainable(config: dict) -> None:
    x = config["x"]
    for step in range(1, STEPS + 1):
        t = step / STEPS
        score = x * t if x >= 0.5 else x * (1.0 - 4.0 * (t - 0.4) ** 2)
        tune.report({"score": score})


def main(storage: str, xs=(0.2, 0.7, 0.4, 0.9), detector: str = DEFAULT_DETECTOR,
         scheduler: EvalStopScheduler | None = None) -> tuple[tune.ResultGrid, EvalStopScheduler]:
    """One search; pass `scheduler` to reuse one (each fit starts it afresh)."""
    scheduler = scheduler or EvalStopScheduler(detector=detector, max_t=STEPS)
    tuner = tune.Tuner(
        trainable, param_space={"x": tune.grid_search(list(xs))},
        tune_config=tune.TuneConfig(metric="score", mode="max", scheduler=scheduler),
        run_config=tune.RunConfig(storage_path=storage, verbose=0))
    return tuner.fit(), scheduler


def main_with_asha(storage: str, xs=(0.2, 0.7, 0.4, 0.9), detector: str = DEFAULT_DETECTOR
                   ) -> tuple[tune.ResultGrid, EvalStopStopper]:
    """One search with ASHA scheduling and the detector as a stopper beside it."""
    stopper = EvalStopStopper("score", "max", detector=detector, max_t=STEPS)
    tuner = tune.Tuner(
        trainable, param_space={"x": tune.grid_search(list(xs))},
        tune_config=tune.TuneConfig(metric="score", mode="max",
                                    scheduler=ASHAScheduler(max_t=STEPS, grace_period=15)),
        run_config=tune.RunConfig(storage_path=storage, verbose=0, stop=stopper))
    return tuner.fit(), stopper


if __name__ == "__main__":
    ray.init(num_cpus=2, include_dashboard=False, log_to_driver=False)
    with tempfile.TemporaryDirectory() as tmp:
        results, _ = main(tmp)
        for r in results:
            print(f"x={r.config['x']}: {r.metrics['training_iteration']} iterations, "
                  f"last score {r.metrics['score']:.3f}")
    ray.shutdown()
