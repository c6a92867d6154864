"""Hugging Face transformers: `EvalStopCallback`, a `TrainerCallback` over `RunMonitor`.

    trainer = Trainer(..., args=TrainingArguments(..., eval_strategy="steps",
                      save_strategy="steps", load_best_model_at_end=True,
                      metric_for_best_model="accuracy"), callbacks=[EvalStopCallback()])

The metric is `metric=`, else `args.metric_for_best_model` (with Trainer's "eval_" prefix); the
direction is `mode=`, else `args.greater_is_better`, else the metric's name (loss, wer, ...:
lower is better); progress is `state.global_step / state.max_steps`. It decides in `on_evaluate`
and sets `control.should_training_stop`; `best_step` / `best_metric` name the checkpoint to
keep. With `load_best_model_at_end` Trainer loads that checkpoint at the end; without it (or
without saving) it warns, as HF's EarlyStoppingCallback does. On resume it rebuilds the
monitor from `state.log_history`, so patience and every other detector state carry on rather
than restart. A second eval at the same step (a final
`trainer.evaluate()`) is skipped, live and on resume alike: a live run judges the first eval, not
knowing a later one is coming (a replay of the log, `traces.logs`, keeps the later one instead).
A NaN or infinite metric is skipped and a NaN or infinite training loss dropped, each with one
warning (`RunMonitor.offer`): Trainer logs them in runs that recover, so they do not end training
with an error. A run with `eval_strategy="no"` is refused at train begin (nothing would ever be
judged), and each `train()` starts from a fresh monitor: nothing carries over from an earlier one.

`EarlyStoppingCallback`'s arguments keep their meaning: `early_stopping_patience` and
`early_stopping_threshold` (metric units) select the `Patience` detector, HF's own rule, and
`early_stopping_patience_counter` counts the evals since the metric last improved by more than
the threshold. At train begin it warns, as HF does, when the checkpoint it names is not kept:
`save_strategy="no"` (never saved) or no `load_best_model_at_end` (saved, not loaded). Messages
go through transformers' logger (`transformers.logging` sets their level): the stop at WARNING,
so it shows at the default verbosity, and with `verbose=True` each eval's judgement at INFO.

The decision's evidence joins the eval's own log entry as metrics (`evalstop/stop`,
`evalstop/best_step`, `evalstop/best_value`, `evalstop/n_evals`): the callback judges the eval
in `on_log`, which Trainer calls with the eval metrics just before `on_evaluate`, so the entry
in `state.log_history` (trainer_state.json), the progress output and every callback listed after
this one (`callbacks=[EvalStopCallback(), TensorBoardCallback()]` with `report_to="none"`, for
TensorBoard or W&B: Trainer puts the `report_to` ones first) carry them.

`TrainingArguments(restore_callback_states_from_checkpoint=True)` makes Trainer replace each
stateful callback with a copy built from the checkpoint; the copy hands every event to the
callback you passed (the one given to the Trainer that holds the same model), so your object
sees the resumed run (its `best_step`, `decision`) as it would an uninterrupted one.
"""

from __future__ import annotations

import weakref
from typing import Any

try:
    from transformers import TrainerCallback
    from transformers.trainer_callback import ExportableState
    from transformers.utils import logging as hf_logging
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.hf needs transformers: "
                      "pip install 'evalstop-gym[hf]'") from exc

from ..online import (
    DEFAULT_DETECTOR,
    MonitorDecision,
    RunMonitor,
    check_monitor_args,
    never_acts_without_progress,
    short_repr,
)
from ..policies.patience import evals_without_improvement
from ..sim.protocols import Detector
from ..traces.logs import history_evals, mode_for
from ._common import check_count, check_flag, check_real, evidence, patience_detector

log = hf_logging.get_logger("transformers.evalstop")   # under transformers' verbosity
# model -> the callbacks given to Trainers of it, in order (on_init_end): where a copy Trainer
# restores from a checkpoint finds the callback it replaced
ATTACHED: weakref.WeakKeyDictionary[Any, list[EvalStopCallback]] = weakref.WeakKeyDictionary()


class EvalStopCallback(TrainerCallback, ExportableState):
    """Stop a Trainer run when `detector` says its eval metric has turned for good."""

    def __init__(self, detector: str | Detector = DEFAULT_DETECTOR, metric: str | None = None,
                 mode: str | None = None, job_type: str = "rlhf", *,
                 early_stopping_patience: int | None = None,
                 early_stopping_threshold: float | None = 0.0, verbose: bool = False) -> None:
        if metric is not None and not (isinstance(metric, str) and metric):
            raise ValueError(f"metric={metric!r}: expected a metric name such as 'eval_accuracy' "
                             f"(or 'accuracy'), or None for args.metric_for_best_model")
        if early_stopping_patience is not None:
            check_count("early_stopping_patience", early_stopping_patience, 1)
        threshold = check_real("early_stopping_threshold", early_stopping_threshold, least=0,
                               allow_none=True) or 0.0
        check_flag("verbose", verbose)
        self._args = {"detector": detector if isinstance(detector, str) else detector.name,
                      "early_stopping_patience": early_stopping_patience,
                      "early_stopping_threshold": early_stopping_threshold}
        detector = patience_detector(detector, early_stopping_patience, threshold,
                                     default_patience=1)
        self._made = check_monitor_args(detector, mode, None, job_type)
        self.detector, self.metric, self.mode, self.job_type = detector, metric, mode, job_type
        self.early_stopping_patience = early_stopping_patience
        self.early_stopping_threshold, self.verbose = threshold, verbose
        self.early_stopping_patience_counter = 0
        self.monitor: RunMonitor | None = None
        self.decision: MonitorDecision | None = None
        self._key = ""
        self._loss: float | None = None
        self._judged: dict[str, Any] | None = None   # the eval logs on_log judged
        self.restored_from_checkpoint = False           # set by Trainer on a copy it restores
        self._original: EvalStopCallback | None = None  # the callback such a copy stands for

    @property
    def best_step(self) -> float | None:
        """Step of the best eval so far (up to the stop): the checkpoint stop-and-save keeps."""
        return None if self.decision is None else self.decision.best_step

    @property
    def best_metric(self) -> float | None:
        return None if self.decision is None else self.decision.best_value

    def on_init_end(self, args, state, control, model: Any = None, **kwargs: Any) -> None:
        if model is not None and not self.restored_from_checkpoint:
            attached = ATTACHED.setdefault(model, [])
            if all(cb is not self for cb in attached):
                attached.append(self)

    def _stand_in_for(self, model: Any) -> None:
        """A copy Trainer restored: find the callback it replaced (the latest given to a Trainer
        of this model, with the same arguments) and hand it every event from now on."""
        self._original = next((cb for cb in reversed(ATTACHED.get(model, [])) if model is not None
                               and not cb.restored_from_checkpoint and cb._args == self._args),
                              None)
        if self._original is None:
            log.warning("EvalStopCallback: Trainer replaced the callback given to it with a copy "
                        "restored from the checkpoint (restore_callback_states_from_checkpoint="
                        "True), and the original was not found; read the decisions from "
                        "trainer.callback_handler.callbacks")

    def on_train_begin(self, args, state, control, **kwargs: Any) -> None:
        """A fresh monitor per `train()` (rebuilt from the log on resume): nothing carries over
        from an earlier `train()` with this callback."""
        if self.restored_from_checkpoint:
            self._stand_in_for(kwargs.get("model"))
        if self._original is not None:
            return self._original.on_train_begin(args, state, control, **kwargs)
        if getattr(args, "eval_strategy", None) == "no":      # IntervalStrategy.NO, a str
            raise ValueError("EvalStopCallback: TrainingArguments(eval_strategy='no') never "
                             "evaluates, so no detector could act; set eval_strategy='steps' or "
                             "'epoch'")
        key = self.metric or args.metric_for_best_model
        if not key:
            raise ValueError("EvalStopCallback: no metric; pass metric='eval_accuracy' or set "
                             "TrainingArguments(metric_for_best_model=...)")
        self._warn_unkept(args, state)
        self.decision, self._loss, self._judged = None, None, None
        self.early_stopping_patience_counter = 0
        self._key = key if key.startswith("eval_") else f"eval_{key}"
        flag = args.greater_is_better if self.metric is None else None
        mode = mode_for(self._key, self.mode, flag)[0]
        self.monitor = RunMonitor(self.detector, mode, state.max_steps or None, self.job_type)
        self._rebuild(state.log_history)

    def _warn_unkept(self, args, state) -> None:
        """Warn, as HF's EarlyStoppingCallback does, when best_step's checkpoint is not kept,
        and when the detector could never act on this run."""
        if args.save_strategy == "no":                    # SaveStrategy.NO, a str
            log.warning("EvalStopCallback: save_strategy='no' saves no checkpoint, so best_step "
                        "(the checkpoint to keep) is never saved; set save_strategy to match "
                        "eval_strategy and load_best_model_at_end=True")
        elif not args.load_best_model_at_end:
            log.warning("EvalStopCallback: load_best_model_at_end=False, so the model at the end "
                        "is the stopped run's, not best_step's; set load_best_model_at_end=True "
                        "to load the best checkpoint")
        if not state.max_steps and never_acts_without_progress(self._made):
            log.warning("EvalStopCallback: %s reads progress and this run's max_steps is "
                        "unknown, so it will never stop it; set TrainingArguments(max_steps=...)",
                        self._made.name)

    def _rebuild(self, history: list[dict[str, Any]]) -> None:
        """Replay the evals already logged (a resumed run) into the fresh monitor, through the
        walk the replay reader uses. A second eval at a step is skipped by `offer`, as it was
        live: a live run judges the first, not knowing a later one is coming."""
        for ev in history_evals(history, self._key, strict=False):
            self._loss = ev.loss
            self._observe(ev.step, ev.value)
        # a loss logged after the last eval belongs to the next one, as on_log would keep it
        self._loss = next((float(e["loss"]) for e in reversed(history) if "loss" in e),
                          self._loss)

    def on_log(self, args, state, control, logs: dict[str, Any] | None = None,
               **kwargs: Any) -> None:
        """A training loss is kept for the next eval; an eval's metrics (Trainer logs them just
        before `on_evaluate`) are judged here, and the evidence added to that log entry."""
        if self._original is not None:
            return self._original.on_log(args, state, control, logs, **kwargs)
        if logs and "loss" in logs:
            self._loss = float(logs["loss"])
        if logs and self._key and self._key in logs and self.monitor is not None:
            self._judge(state, control, logs)
            found = self.decision is not None and self.decision.step == state.global_step
            if found:
                extra = evidence(self.decision)
                logs.update(extra)
                entry = state.log_history[-1] if state.log_history else {}
                if entry.get("step") == state.global_step and self._key in entry:
                    entry.update(extra)          # the same entry, in trainer_state.json
            self._judged = logs

    def on_evaluate(self, args, state, control, metrics: dict[str, Any] | None = None,
                    **kwargs: Any) -> None:
        if self._original is not None:
            return self._original.on_evaluate(args, state, control, metrics, **kwargs)
        metrics = metrics or {}
        if self._key not in metrics:
            log.warning("EvalStopCallback: %s is not among the eval metrics (%s); no decision",
                        self._key, ", ".join(sorted(metrics)))
            return
        if metrics is not self._judged:          # not logged first (evaluate called directly)
            self._judge(state, control, metrics)
        self._judged = None

    def _judge(self, state, control, metrics: dict[str, Any]) -> None:
        decision = self._observe(state.global_step, metric_value(metrics, self._key,
                                                                 state.global_step))
        monitor = self.monitor
        assert monitor is not None
        if decision is not None and decision.stop:
            if monitor.stop_index == len(monitor.steps) - 1 and decision.step == state.global_step:
                log.warning("EvalStopCallback: stop at step %s (%s); best %s = %.6g at step %s",
                            decision.step, decision.reason, self._key, decision.best_value,
                            decision.best_step)
            control.should_training_stop = True
        elif decision is not None and self.verbose:
            log.info("EvalStopCallback: continue at step %s; best %s = %.6g at step %s",
                     state.global_step, self._key, decision.best_value, decision.best_step)

    def _observe(self, step: int, value: float) -> MonitorDecision | None:
        """The decision after this eval; the last one if the eval is skipped (a second evaluate
        at the same step, a non-finite value)."""
        assert self.monitor is not None, "on_train_begin was not called"
        decision = self.monitor.offer(step, value, self._loss)
        if decision is not None:
            self.decision = decision
            self.early_stopping_patience_counter = evals_without_improvement(
                self.monitor.view().eval_scores, self.early_stopping_threshold)
        return self.decision

    def state(self) -> dict[str, Any]:
        """What `Trainer` saves in trainer_state.json (the decisions rebuild from log_history;
        a copy Trainer restores from it marks itself, to stand in for the original)."""
        if self._original is not None:
            return self._original.state()
        mode = self.monitor.mode if self.monitor is not None else self.mode
        return {"args": {**self._args, "metric": self.metric or self._key or None,
                         "mode": mode, "job_type": self.job_type, "verbose": self.verbose},
                "attributes": {"restored_from_checkpoint": True}}


def metric_value(metrics: dict[str, Any], key: str, step: int) -> float:
    """metrics[key] as a float (a Python, NumPy or 0-d tensor number), or a one-line error."""
    value = metrics[key]
    if not isinstance(value, (str, bytes, bool)) and value is not None:
        try:
            return float(value)
        except (TypeError, ValueError, OverflowError):
            pass
    raise ValueError(f"EvalStopCallback: metrics[{key!r}]={short_repr(value)} at step {step}: "
                     f"expected a number")
