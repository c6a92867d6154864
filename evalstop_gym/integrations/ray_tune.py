"""Ray Tune: `EvalStopScheduler`, a `TrialScheduler` that stops trials over RunMonitor.

    tuner = tune.Tuner(trainable, tune_config=tune.TuneConfig(
        scheduler=EvalStopScheduler(metric="score", mode="max", detector="EvalStop-2")))

This is the paper's own framing: a detector at the scheduler stops a trial whose metric has
turned and hands its resources to the trials waiting. Each result's `time_attr` value is the
step and `metric` the value (direction `mode`); progress is step / `max_t` when given, and a
trial reaching `max_t` is stopped as complete, as Tune's ASHA does (a result past `max_t`, as
`time_total_s` gives, stops it unjudged). Non-finite values and repeated steps are skipped.
`metric` and `mode` may also come from `tune.TuneConfig`. Ended trials (complete, stopped,
errored or removed) are reported to the scheduler's `MonitorGroup`, so cross-run detectors
(MedianPruner, CUSUM and BOCPD with the pooled noise estimate) learn from them; a trial it
stopped counts as stopped. Each experiment (`Tuner.fit`, which sets the search properties) starts
afresh: a scheduler used for a second fit neither carries trials, peers nor `stopped` over, and
takes that fit's `metric`/`mode` unless it was built with its own. A result without `time_attr`
is an error naming the keys it has (a scheduler that never sees a step could never act).
"""

from __future__ import annotations

import logging
from typing import Any

try:
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.ray_tune needs ray[tune]: "
                      "pip install 'evalstop-gym[tune]'") from exc

from ..online import (
    DEFAULT_DETECTOR,
    MonitorGroup,
    RunMonitor,
    check_monitor_args,
    never_acts_without_progress,
)
from ..sim.protocols import Detector

log = logging.getLogger(__name__)


class EvalStopScheduler(FIFOScheduler):
    """Run trials in submission order; STOP each one once `detector` says its metric turned."""

    def __init__(self, metric: str | None = None, mode: str | None = None,
                 detector: str | Detector = DEFAULT_DETECTOR, time_attr: str = "training_iteration",
                 max_t: float | None = None, job_type: str = "rlhf") -> None:
        super().__init__()
        for name, value in (("metric", metric), ("time_attr", time_attr)):
            if not (isinstance(value, str) and value) and not (name == "metric" and value is None):
                raise ValueError(f"{name}={value!r}: expected the name of a reported result key"
                                 + (", or None to take it from tune.TuneConfig"
                                    if name == "metric" else ""))
        made = check_monitor_args(detector, mode, max_t, job_type, steps_name="max_t")
        if max_t is None and never_acts_without_progress(made):
            raise ValueError(f"max_t=None: {made.name} reads progress, so it would never stop a "
                             f"trial; pass max_t (the last {time_attr} a trial reports)")
        self._given = (metric, mode)                   # what this scheduler was built with
        self._metric, self._mode = metric, mode
        self.detector, self.time_attr, self.max_t, self.job_type = (detector, time_attr, max_t,
                                                                    job_type)
        self._start()

    def _start(self) -> None:
        """Forget every trial: a new experiment begins."""
        self.group: MonitorGroup | None = None
        self.monitors: dict[str, RunMonitor] = {}      # trial id -> its monitor
        self.stopped: dict[str, str] = {}              # trial id -> why it was stopped
        self._ended: set[str] = set()

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Called by Tune at the start of each experiment: refuse a metric or mode this
        scheduler was built with (as Tune's own schedulers do), else take them, and start
        afresh."""
        given_metric, given_mode = self._given
        if (given_metric and metric) or (given_mode and mode):
            return False
        self._metric = given_metric or metric
        self._mode = given_mode or mode
        self._start()
        return True

    def _group(self) -> MonitorGroup:
        if self.group is None:
            if not self._metric or self._mode not in ("max", "min"):
                raise ValueError(f"EvalStopScheduler needs metric and mode ('max' or 'min'); "
                                 f"got metric={self._metric!r}, mode={self._mode!r} (pass them "
                                 f"here or to tune.TuneConfig)")
            self.group = MonitorGroup(self.detector, self._mode, self.job_type)
        return self.group

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        self.monitors[trial.trial_id] = self._group().monitor(self.max_t)

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        monitor = self.monitors.get(trial.trial_id)
        if monitor is None or trial.trial_id in self._ended:
            return TrialScheduler.CONTINUE
        if self.time_attr not in result:
            raise ValueError(f"EvalStopScheduler: time_attr={self.time_attr!r} is not in trial "
                             f"{trial.trial_id}'s result (its keys: {', '.join(sorted(result))})"
                             f"; pass a time_attr the trainable reports")
        if self._metric not in result:
            return TrialScheduler.CONTINUE
        step, value = result[self.time_attr], result[self._metric]
        if self.max_t is not None and step > self.max_t:
            # past the run's known length (a time_attr such as time_total_s overshoots max_t):
            # the trial has run its course; the monitor, whose max_steps is max_t, cannot judge it
            self._end(trial, completed=True)
            return TrialScheduler.STOP
        decision = monitor.offer(step, value)
        if decision is None:            # a non-finite value or a repeated step (logged)
            return TrialScheduler.CONTINUE
        if decision.stop:
            self.stopped[trial.trial_id] = decision.reason
            self._end(trial, completed=False)
            return TrialScheduler.STOP
        if self.max_t is not None and step >= self.max_t:
            self._end(trial, completed=True)
            return TrialScheduler.STOP
        return TrialScheduler.CONTINUE

    def _end(self, trial: Trial, completed: bool) -> None:
        """Report the trial's end to the group once, whichever hook hears of it first."""
        if trial.trial_id in self._ended or trial.trial_id not in self.monitors:
            return
        self._ended.add(trial.trial_id)
        self._group().end_run(self.monitors[trial.trial_id], completed=completed)

    def on_trial_complete(self, tune_controller, trial: Trial, result: dict) -> None:
        self._end(trial, completed=True)

    def on_trial_error(self, tune_controller, trial: Trial) -> None:
        self._end(trial, completed=False)

    def on_trial_remove(self, tune_controller, trial: Trial) -> None:
        self._end(trial, completed=False)

    def debug_string(self) -> str:
        name = self.group.detector.name if self.group is not None else str(self.detector)
        return f"Using EvalStop scheduling ({name}): {len(self.stopped)} trials stopped."
