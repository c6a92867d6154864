"""Optuna: `EvalStopPruner`, a `BasePruner` whose decisions are rebuilt from the storage.

    study = optuna.create_study(direction="maximize",
                                pruner=EvalStopPruner(max_steps=20, n_warmup_steps=5))

Each `prune` replays the trial's stored `intermediate_values` (in step order, with the direction
of `study.direction`) through a RunMonitor and answers whether the detector has said stop. The
decision is a function of what the storage holds, not of this process's memory, so any number of
workers sharing an RDB storage decide exactly as one; the monitors kept between calls are only a
cache, extended when the stored values extend what it saw and rebuilt otherwise.

Optuna's own pruner arguments keep their meaning: `n_startup_trials` (no pruning until that many
trials have completed), `n_warmup_steps` (the detector is not asked at steps below it; the values
are still recorded) and `interval_steps` (it is asked at the first reported step of each interval
past the warm-up, as `MedianPruner` checks). Pass `max_steps` (the last step your objective
reports) so that progress is known; StopAt and MedianPruner need it and are refused without it.

Detectors that learn across runs (MedianPruner, CUSUM and BOCPD with the pooled noise estimate)
learn from the study's ended trials, in trial-number order, as Optuna's MedianPruner learns from
completed ones (completed trials as completed runs, pruned ones as stopped runs). When a trial is
pruned its best step and value, and the step of the stop, go to its `user_attrs`
(`evalstop_best_step`, `evalstop_best_value`, `evalstop_stop_step`): Optuna records a pruned
trial's last value, the pruner knows the checkpoint worth keeping. Non-finite values and steps
past `max_steps` are skipped with one warning. Each prune is logged once at WARNING through
`optuna.logging` (shown at Optuna's default verbosity); `verbose=True` adds each judgement that
lets a trial continue, at INFO. It composes like any pruner, e.g.
`optuna.pruners.PatientPruner(EvalStopPruner(...), patience=2)`.
"""

from __future__ import annotations

import copy
import logging
from dataclasses import dataclass, field
from typing import Any

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
from ._common import check_count, check_flag

log = optuna.logging.get_logger(f"optuna.{__name__}")   # under Optuna's verbosity and handler

ENDED = (TrialState.COMPLETE, TrialState.PRUNED)
FINISHED = (*ENDED, TrialState.FAIL)
USER_ATTRS = ("evalstop_best_step", "evalstop_best_value", "evalstop_stop_step")


@dataclass
class StudyCache:
    """One study's cache: its group, the ended trials it learnt from, and per live trial the
    monitor and the (step, value) pairs fed to it. Only an optimisation: dropping it gives the
    same decisions."""

    group: MonitorGroup
    learnt: list[int] = field(default_factory=list)
    monitors: dict[int, tuple[RunMonitor, list[tuple[int, float]]]] = field(default_factory=dict)


def asked_at(step: int, previous: int | None, n_warmup_steps: int, interval_steps: int) -> bool:
    """Whether the detector is asked at `step` (reported after `previous`): past the warm-up
    and the first reported step of its interval, as Optuna's MedianPruner checks."""
    if step < n_warmup_steps:
        return False
    start = (step - n_warmup_steps) // interval_steps * interval_steps + n_warmup_steps
    return previous is None or previous < start


class EvalStopPruner(BasePruner):
    """Prune a trial once `detector` says its intermediate values have turned for good."""

    def __init__(self, detector: str | Detector = DEFAULT_DETECTOR, max_steps: int | None = None,
                 n_startup_trials: int = 0, n_warmup_steps: int = 0, interval_steps: int = 1,
                 verbose: bool = False, job_type: str = "rlhf") -> None:
        made = check_monitor_args(detector, None, max_steps, job_type)
        check_count("n_startup_trials", n_startup_trials, 0)
        check_count("n_warmup_steps", n_warmup_steps, 0)
        check_count("interval_steps", interval_steps, 1)
        check_flag("verbose", verbose)
        if max_steps is None and never_acts_without_progress(made):
            raise ValueError(f"max_steps=None: {made.name} reads progress, so it would never "
                             f"prune; pass max_steps (the last step your objective reports)")
        self.detector, self.max_steps, self.job_type = detector, max_steps, job_type
        self.n_startup_trials, self.n_warmup_steps = n_startup_trials, n_warmup_steps
        self.interval_steps, self.verbose = interval_steps, verbose
        self._pristine = None if isinstance(detector, str) else copy.deepcopy(made)
        self._studies: dict[tuple[str, int], StudyCache] = {}

    def prune(self, study: optuna.study.Study, trial: FrozenTrial) -> bool:
        if self.n_startup_trials and len(study.get_trials(
                deepcopy=False, states=(TrialState.COMPLETE,))) < self.n_startup_trials:
            return False
        cache = self._cache_for(study)
        monitor = self._replay(cache, trial.number, trial.intermediate_values, decide=True)
        if not monitor.stopped:
            if self.verbose and monitor.steps:
                decision = monitor.decision()
                log.info("EvalStopPruner: trial %d continues at step %s; best value %.6g at "
                         "step %s", trial.number, trial.last_step, decision.best_value,
                         decision.best_step)
            return False
        self._record(study, trial, monitor)
        return True

    def _fresh_group(self, study: optuna.study.Study) -> MonitorGroup:
        mode = "max" if study.direction == StudyDirection.MAXIMIZE else "min"
        detector = self.detector if self._pristine is None else copy.deepcopy(self._pristine)
        return MonitorGroup(detector, mode, self.job_type)

    def _cache_for(self, study: optuna.study.Study) -> StudyCache:
        """The study's cache, its group having learnt from every ended trial in number order (a
        group that learnt in another order, a trial ending after a later one, is rebuilt)."""
        key = (study.study_name, study._study_id)   # a name is unique only within a storage
        cache = self._studies.get(key)
        if cache is None:
            cache = self._studies[key] = StudyCache(self._fresh_group(study))
        finished = study.get_trials(deepcopy=False, states=FINISHED)
        for number in {t.number for t in finished} & cache.monitors.keys():
            del cache.monitors[number]             # an ended trial is never asked again
        ended = sorted((t.number, t) for t in finished
                       if t.state in ENDED and t.intermediate_values)
        if not learns_from_runs(cache.group.detector):
            return cache
        if cache.learnt != [n for n, _ in ended[:len(cache.learnt)]]:
            cache = self._studies[key] = StudyCache(self._fresh_group(study))
        new = ended[len(cache.learnt):]
        if new:
            cache.monitors.clear()                 # new peers: live trials are replayed anew
        for number, done_trial in new:
            monitor = self._replay(cache, number, done_trial.intermediate_values, decide=False)
            cache.group.end_run(monitor, completed=done_trial.state == TrialState.COMPLETE)
            cache.learnt.append(number)
            del cache.monitors[number]
        return cache

    def _replay(self, cache: StudyCache, number: int, values: dict[int, float],
                decide: bool) -> RunMonitor:
        """The trial's monitor after its stored values: the cached one extended if its values
        are a prefix of them, else one rebuilt from the first value."""
        items = sorted(values.items())
        monitor, fed = cache.monitors.get(number, (None, []))
        if monitor is None or items[:len(fed)] != fed:
            monitor, fed = RunMonitor(cache.group.detector, cache.group.mode, self.max_steps,
                                      self.job_type, run_id=number, grouped=True), []
            cache.monitors[number] = (monitor, fed)
        for step, value in items[len(fed):]:
            previous = fed[-1][0] if fed else None
            ask = decide and asked_at(step, previous, self.n_warmup_steps, self.interval_steps)
            fed.append((step, value))
            monitor.offer(step, value, decide=ask)    # non-finite, past max_steps: skipped
        return monitor

    def _record(self, study: optuna.study.Study, trial: FrozenTrial, monitor: RunMonitor) -> None:
        """Put the best step and value, and the stop's step, in the trial's user_attrs."""
        decision = monitor.decision()
        stop_step = monitor.steps[monitor.stop_index] if monitor.stop_index is not None else None
        values: tuple[Any, ...] = (decision.best_step, decision.best_value, stop_step)
        first = trial.user_attrs.get(USER_ATTRS[2]) is None    # asked again after a prune
        for key, value in zip(USER_ATTRS, values, strict=True):
            if trial.user_attrs.get(key) != value:
                study._storage.set_trial_user_attr(trial._trial_id, key, value)
        log.log(logging.WARNING if first else logging.DEBUG,
                "EvalStopPruner: prune trial %d at step %s (%s); best value %.6g at step %s",
                trial.number, trial.last_step, monitor.reason, decision.best_value,
                decision.best_step)
