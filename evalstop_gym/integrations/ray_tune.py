"""Ray Tune: `EvalStopStopper` (a `tune.Stopper`) and `EvalStopScheduler` (a `TrialScheduler`).

    tuner = tune.Tuner(trainable, tune_config=tune.TuneConfig(
                           metric="score", mode="max", scheduler=ASHAScheduler()),
                       run_config=tune.RunConfig(stop=EvalStopStopper("score", "max", max_t=N)))

The stopper composes with any scheduler (ASHA, PBT, ...): Tune asks it about every result before
the scheduler, and either may stop a trial. The scheduler is the paper's own framing: a detector
at the scheduler stops a trial whose metric has turned and hands its resources to the trials
waiting (it runs trials in submission order, so it replaces ASHA rather than joining it).

Both judge alike (`TrialJudge`). Each result's `time_attr` value is the step and `metric` the
value (direction `mode`); progress is step / `max_t` when given, and a trial reaching `max_t` is
complete, as Tune's ASHA has it (a result past `max_t`, as `time_total_s` gives, stops it
unjudged). As ASHA's `grace_period`, the detector is not asked before a trial's `time_attr`
reaches `grace_period` (its results are still recorded). Non-finite values and repeated steps are
skipped. Ended trials are reported to the judge's `MonitorGroup` in the order they end, so
cross-run detectors (MedianPruner, CUSUM and BOCPD with the pooled noise estimate) learn from
them; a trial stopped by the detector counts as stopped. The stopper hears of a trial's end from
its final (`done`) result or its own stop; one another scheduler stops is not learnt from. A
result without `time_attr` is an error naming the keys it has; a metric no result carries is
warned about once (naming the keys the result has), as no trial could ever be judged. Each stop
is logged at WARNING on Ray's logger (`ray.tune.evalstop`); `verbose=True` adds each judgement
that lets a trial continue, at INFO. The stopper adds the decision's evidence to the trial's
result, so Tune's loggers (TensorBoard, W&B, CSV) record it: `evalstop/stop`,
`evalstop/best_step`, `evalstop/best_value`, `evalstop/n_evals`. Tune hands a scheduler a flat
copy of the result, which no logger sees, so the scheduler form keeps the latest decision per
trial in `decisions` instead. `save`/`restore` pickle the judge's state, as ASHA does.

The scheduler's `metric` and `mode` may also come from `tune.TuneConfig`; each experiment
(`Tuner.fit`, which sets the search properties) starts it afresh.
"""

from __future__ import annotations

import logging
import pickle
from typing import Any

try:
    from ray.tune import Stopper
    from ray.tune.experiment import Trial
    from ray.tune.schedulers import FIFOScheduler, TrialScheduler
    from ray.tune.utils import flatten_dict
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.ray_tune needs ray[tune]: "
                      "pip install 'evalstop-gym[tune]'") from exc

from ..online import (
    DEFAULT_DETECTOR,
    MonitorDecision,
    MonitorGroup,
    RunMonitor,
    check_monitor_args,
    never_acts_without_progress,
)
from ..sim.protocols import Detector
from ._common import check_flag, check_real, evidence

log = logging.getLogger("ray.tune.evalstop")   # under Ray's own "ray" logger


class TrialJudge:
    """Trials' monitors in one group: each result in, stop or continue out; ends reported."""

    def __init__(self, metric: str | None, mode: str | None, detector: str | Detector,
                 time_attr: str, max_t: float | None, grace_period: float, verbose: bool,
                 job_type: str, owner: str) -> None:
        for name, value in (("metric", metric), ("time_attr", time_attr)):
            if not (isinstance(value, str) and value) and not (name == "metric" and value is None):
                raise ValueError(f"{name}={value!r}: expected the name of a reported result key"
                                 + (", or None to take it from tune.TuneConfig"
                                    if name == "metric" else ""))
        made = check_monitor_args(detector, mode, max_t, job_type, steps_name="max_t")
        check_real("grace_period", grace_period, least=0)
        check_flag("verbose", verbose)
        if max_t is None and never_acts_without_progress(made):
            raise ValueError(f"max_t=None: {made.name} reads progress, so it would never stop a "
                             f"trial; pass max_t (the last {time_attr} a trial reports)")
        self.metric, self.mode, self.detector = metric, mode, detector
        self.time_attr, self.max_t, self.grace_period = time_attr, max_t, grace_period
        self.verbose, self.job_type, self.owner = verbose, job_type, owner
        self.start()

    def start(self) -> None:
        """Forget every trial: a new experiment begins."""
        self.group: MonitorGroup | None = None
        self.monitors: dict[str, RunMonitor] = {}      # trial id -> its monitor
        self.stopped: dict[str, str] = {}              # trial id -> why it was stopped
        self.ended: set[str] = set()
        self.decisions: dict[str, MonitorDecision] = {}   # trial id -> its latest decision
        self.metric_missing_warned = False

    def _group(self) -> MonitorGroup:
        if self.group is None:
            if not self.metric or self.mode not in ("max", "min"):
                raise ValueError(f"{self.owner} needs metric and mode ('max' or 'min'); got "
                                 f"metric={self.metric!r}, mode={self.mode!r}")
            self.group = MonitorGroup(self.detector, self.mode, self.job_type)
        return self.group

    def add(self, trial_id: str) -> RunMonitor:
        if trial_id not in self.monitors:
            self.monitors[trial_id] = self._group().monitor(self.max_t)
        return self.monitors[trial_id]

    def judge(self, trial_id: str, result: dict) -> bool:
        """Whether to stop the trial after this result (True: it has ended)."""
        if trial_id in self.ended:
            return True
        monitor = self.add(trial_id)
        if self.time_attr not in result:
            raise ValueError(f"{self.owner}: time_attr={self.time_attr!r} is not in trial "
                             f"{trial_id}'s result (its keys: {', '.join(sorted(result))}); "
                             f"pass a time_attr the trainable reports")
        if self.metric not in result:
            self._warn_missing(trial_id, result)
            return False
        step, value = result[self.time_attr], result[self.metric]
        if self.max_t is not None and step > self.max_t:
            # past the run's known length (a time_attr such as time_total_s overshoots max_t):
            # the trial has run its course; the monitor, whose max_steps is max_t, cannot judge it
            self.end(trial_id, completed=True)
            return True
        decision = monitor.offer(step, value, decide=step >= self.grace_period)
        if decision is not None:
            self.decisions[trial_id] = decision
        if decision is not None and decision.stop:
            self.stopped[trial_id] = decision.reason
            log.warning("%s: stop trial %s at %s=%s (%s); best %s = %.6g at %s", self.owner,
                        trial_id, self.time_attr, step, decision.reason, self.metric,
                        decision.best_value, decision.best_step)
            self.end(trial_id, completed=False)
            return True
        if decision is not None and self.verbose:
            log.info("%s: trial %s continues at %s=%s; best %s = %.6g at %s", self.owner,
                     trial_id, self.time_attr, step, self.metric, decision.best_value,
                     decision.best_step)
        if self.max_t is not None and step >= self.max_t:
            self.end(trial_id, completed=True)
            return True
        if result.get("done"):                   # its final result: the trial has completed
            self.end(trial_id, completed=True)
        return False

    def _warn_missing(self, trial_id: str, result: dict) -> None:
        """Once per experiment: the metric is not in a trial's result, so it is not judged."""
        if self.metric_missing_warned:
            return
        self.metric_missing_warned = True
        reported = ", ".join(sorted(k for k in result if not str(k).startswith("config/")))
        log.warning("%s: metric=%r is not in trial %s's result (its keys: %s), so it is not "
                    "judged; pass the metric= the trainable reports", self.owner, self.metric,
                    trial_id, reported)

    def end(self, trial_id: str, completed: bool) -> None:
        """Report the trial's end to the group once, whichever hook hears of it first."""
        if trial_id in self.ended or trial_id not in self.monitors:
            return
        self.ended.add(trial_id)
        self._group().end_run(self.monitors[trial_id], completed=completed)


class Pickled:
    """`save`/`restore` as Tune's ASHA does them: this object's state, pickled."""

    def save(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "wb") as out:
            pickle.dump(self.__dict__, out)

    def restore(self, checkpoint_path: str) -> None:
        with open(checkpoint_path, "rb") as source:
            self.__dict__.update(pickle.load(source))


class EvalStopStopper(Pickled, Stopper):
    """Stop each trial once `detector` says its metric turned; composes with any scheduler."""

    def __init__(self, metric: str, mode: str = "max",
                 detector: str | Detector = DEFAULT_DETECTOR,
                 time_attr: str = "training_iteration", max_t: float | None = None,
                 grace_period: float = 0, verbose: bool = False, job_type: str = "rlhf") -> None:
        if not (isinstance(metric, str) and metric):
            raise ValueError(f"metric={metric!r}: expected the name of a reported result key")
        self.judge = TrialJudge(metric, mode, detector, time_attr, max_t, grace_period, verbose,
                                job_type, owner="EvalStopStopper")

    @property
    def stopped(self) -> dict[str, str]:
        return self.judge.stopped

    def __call__(self, trial_id: str, result: dict[str, Any]) -> bool:
        """Tune hands a stopper the nested result (a scheduler gets it flat): flatten it, so
        `metric` names a nested key as "val/acc", as in TuneConfig. The decision's evidence
        is added to the result itself (`evalstop/...`), which Tune's loggers then record."""
        before = self.judge.decisions.get(trial_id)
        stop = self.judge.judge(trial_id, flatten_dict(result))
        decision = self.judge.decisions.get(trial_id)
        if decision is not None and decision is not before:
            result["evalstop"] = evidence(decision, prefix="")
        return stop

    @property
    def decisions(self) -> dict[str, MonitorDecision]:
        """Each trial's latest decision (stop, reason, best step and value)."""
        return self.judge.decisions

    def stop_all(self) -> bool:
        return False


class EvalStopScheduler(Pickled, FIFOScheduler):
    """Run trials in submission order; STOP each one once `detector` says its metric turned."""

    def __init__(self, metric: str | None = None, mode: str | None = None,
                 detector: str | Detector = DEFAULT_DETECTOR, time_attr: str = "training_iteration",
                 max_t: float | None = None, grace_period: float = 0, verbose: bool = False,
                 job_type: str = "rlhf") -> None:
        super().__init__()
        self.judge = TrialJudge(metric, mode, detector, time_attr, max_t, grace_period, verbose,
                                job_type, owner="EvalStopScheduler")
        self._given = (metric, mode)                   # what this scheduler was built with
        self.detector, self.time_attr, self.max_t = detector, time_attr, max_t

    @property
    def stopped(self) -> dict[str, str]:
        return self.judge.stopped

    @property
    def monitors(self) -> dict[str, RunMonitor]:
        return self.judge.monitors

    @property
    def decisions(self) -> dict[str, MonitorDecision]:
        """Each trial's latest decision (stop, reason, best step and value)."""
        return self.judge.decisions

    @property
    def _ended(self) -> set[str]:
        return self.judge.ended

    def set_search_properties(self, metric: str | None, mode: str | None, **spec: Any) -> bool:
        """Called by Tune at the start of each experiment: refuse a metric or mode this
        scheduler was built with (as Tune's own schedulers do), else take them, and start
        afresh."""
        given_metric, given_mode = self._given
        if (given_metric and metric) or (given_mode and mode):
            return False
        self.judge.metric = given_metric or metric
        self.judge.mode = given_mode or mode
        self.judge.start()
        return True

    def on_trial_add(self, tune_controller, trial: Trial) -> None:
        self.judge.add(trial.trial_id)

    def on_trial_result(self, tune_controller, trial: Trial, result: dict) -> str:
        if trial.trial_id not in self.judge.monitors:
            return TrialScheduler.CONTINUE
        stop = self.judge.judge(trial.trial_id, result)
        return TrialScheduler.STOP if stop else TrialScheduler.CONTINUE

    def on_trial_complete(self, tune_controller, trial: Trial, result: dict) -> None:
        self.judge.end(trial.trial_id, completed=True)

    def on_trial_error(self, tune_controller, trial: Trial) -> None:
        self.judge.end(trial.trial_id, completed=False)

    def on_trial_remove(self, tune_controller, trial: Trial) -> None:
        self.judge.end(trial.trial_id, completed=False)

    def debug_string(self) -> str:
        group = self.judge.group
        name = group.detector.name if group is not None else str(self.detector)
        return f"Using EvalStop scheduling ({name}): {len(self.stopped)} trials stopped."
