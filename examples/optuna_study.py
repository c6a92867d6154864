"""Prune Optuna trials whose score has turned: `python examples/optuna_study.py`.

Each trial "trains" for 20 steps and reports a score. Trials with x < 0.5 peak early and then
decline (overfitting, reward hacking); the others keep rising. `EvalStopPruner` prunes the
declining trials a couple of reports after their peak and lets the rising ones complete.
"""

from __future__ import annotations

import optuna

from evalstop_gym.integrations.optuna import EvalStopPruner
from evalstop_gym.online import DEFAULT_DETECTOR

STEPS = 20
XS = (0.1, 0.6, 0.2, 0.7, 0.3, 0.8, 0.4, 0.9)


def curve(x: float, step: int) -> float:
    """Rising for x >= 0.5; peaked at 40% of the run for x < 0.5."""
    t = step / STEPS
    return x * t if x >= 0.5 else x * (1.0 - 4.0 * (t - 0.4) ** 2)


def objective(trial: optuna.Trial) -> float:
    x = trial.suggest_float("x", 0.0, 1.0)
    value = 0.0
    for step in range(1, STEPS + 1):
        value = curve(x, step)
        trial.report(value, step)
        if trial.should_prune():
            raise optuna.TrialPruned()
    return value


def main(pruner: optuna.pruners.BasePruner | None = None, xs=XS,
         detector: str = DEFAULT_DETECTOR) -> optuna.Study:
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(direction="maximize",
                                pruner=pruner or EvalStopPruner(detector, max_steps=STEPS),
                                sampler=optuna.samplers.RandomSampler(seed=0))
    for x in xs:
        study.enqueue_trial({"x": x})
    study.optimize(objective, n_trials=len(xs))
    return study


if __name__ == "__main__":
    for t in main().trials:
        print(f"x={t.params['x']:.1f}: {t.state.name.lower()} after {t.last_step} steps")
