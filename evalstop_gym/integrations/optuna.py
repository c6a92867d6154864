"""Optuna: `EvalStopPruner`, a `BasePruner` over `trial.intermediate_values` and RunMonitor.

    study = optuna.create_study(direction="maximize", pruner=EvalStopPruner("EvalStop-2"))

Each trial's reported values (in step order) go to its own RunMonitor, with the direction of
`study.direction`; `prune` answers whether the detector has said stop. Steps are the ones passed
to `trial.report`; pass `max_steps` (the last step your objective reports) so that progress is
known, which StopAt and MedianPruner need (without it they could never prune, so they are
refused). Detectors that learn across runs (MedianPruner, CUSUM and BOCPD with the pooled noise
estimate) learn from the study's finished trials, as Optuna's own
MedianPruner does: completed trials as completed runs, pruned ones as stopped runs. It composes
like any pruner, e.g. `optuna.pruners.PatientPruner(EvalStopPruner(...), patience=2)`.
Non-finite reported values, and steps past `max_steps`, are skipped with a warning (Optuna
accepts them; no detector can judge them). A trial's monitor is dropped once the trial has ended
(and, for a detector that learns across runs, been learnt from), so a long study holds monitors
only for its running trials. State is kept per study (by name and id): one pruner passed to two
studies judges each study's trials, and learns from its finished ones, apart.
"""

from __future__ import annotations

import logging
import math
from dataclasses import dataclass, field

try:
    import optuna
    from optuna.pruners import BasePruner
    from optuna.study import StudyDirection
    from optuna.trial import FrozenTrial, TrialState
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.optuna needs optuna: "
                      "pip install 'evalstop-gym[optuna]'") from exc

from ..online import (
    DEFAULT_DETECTOR,
    MonitorGroup,
    RunMonitor,
    check_monitor_args,
    never_acts_without_progress,
)
from ..policies.detector import learns_from_runs
from ..sim.protocols import Detector

log = logging.getLogger(__name__)

ENDED = (TrialState.COMPLETE, TrialState.PRUNED)
FINISHED = (*ENDED, TrialState.FAIL)


@dataclass
class StudyState:
    """One study's monitors: its group, its live trials' monitors, the trials learnt from."""

    group: MonitorGroup
    monitors: dict[int, RunMonitor] = field(default_factory=dict)   # trial number -> monitor
    ended: set[int] = field(default_factory=set)


class EvalStopPruner(BasePruner):
    """Prune a trial once `detector` says its intermediate values have turned for good."""

    def __init__(self, detector: str | Detector = DEFAULT_DETECTOR, max_steps: int | None = None,
                 job_type: str = "rlhf") -> None:
        made = check_monitor_args(detector, None, max_steps, job_type)
        if max_steps is None and never_acts_without_progress(made):
            raise ValueError(f"max_steps=None: {made.name} reads progress, so it would never "
                             f"prune; pass max_steps (the last step your objective reports)")
        self.detector, self.max_steps, self.job_type = detector, max_steps, job_type
        self._studies: dict[tuple[str, int], StudyState] = {}

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        state = self._state_for(study)
        if trial.number not in state.monitors:     # a new trial: once per trial, forget the ended
            self._forget_finished(study, state)
        if learns_from_runs(state.group.detector):
            self._learn(study, state)
        monitor = self._monitor(trial.number, state)
        self._feed(monitor, trial)
        return monitor.stopped

    def _state_for(self, study: optuna.study.Study) -> StudyState:
        key = (study.study_name, study._study_id)   # a name is unique only within a storage
        if key not in self._studies:
            mode = "max" if study.direction == StudyDirection.MAXIMIZE else "min"
            self._studies[key] = StudyState(MonitorGroup(self.detector, mode, self.job_type))
        return self._studies[key]

    def _monitor(self, number: int, state: StudyState) -> RunMonitor:
        if number not in state.monitors:
            state.monitors[number] = state.group.monitor(self.max_steps)
        return state.monitors[number]

    def _forget_finished(self, study: optuna.study.Study, state: StudyState) -> None:
        """Drop the monitors of ended trials, except those `_learn` has yet to learn from."""
        learns = learns_from_runs(state.group.detector)
        for done in study.get_trials(deepcopy=False, states=FINISHED):
            if done.number not in state.monitors:
                continue
            if (learns and done.state in ENDED and done.intermediate_values
                    and done.number not in state.ended):
                continue
            del state.monitors[done.number]

    @staticmethod
    def _feed(monitor: RunMonitor, trial: FrozenTrial, decide: bool = True) -> None:
        """Give the monitor the values reported since it last looked, in step order; values it
        cannot judge (non-finite, past max_steps) are skipped with a warning (`offer`)."""
        last = monitor.steps[-1] if monitor.steps else -math.inf
        for step in sorted(s for s in trial.intermediate_values if s > last):
            monitor.offer(step, trial.intermediate_values[step], decide=decide)

    def _learn(self, study: optuna.study.Study, state: StudyState) -> None:
        """Report every finished trial not yet reported to the group, in trial order."""
        for done in study.get_trials(deepcopy=False, states=ENDED):
            if done.number in state.ended or not done.intermediate_values:
                continue
            monitor = self._monitor(done.number, state)
            self._feed(monitor, done, decide=False)
            state.ended.add(done.number)
            if monitor.steps:
                state.group.end_run(monitor, completed=done.state == TrialState.COMPLETE)
            del state.monitors[done.number]
