"""PyTorch Lightning: `EvalStopCallback`, shaped like Lightning's `EarlyStopping`, over RunMonitor.

    trainer = L.Trainer(callbacks=[EvalStopCallback(monitor="val_acc", mode="max"),
                                   ModelCheckpoint(monitor="val_acc", mode="max")])

`EarlyStopping`'s arguments keep their meaning. `patience` and `min_delta` (metric units) select
the `Patience-<patience>-<min_delta>` detector, the rule `EarlyStopping` runs; otherwise the
detector is `detector` (the default detector unless named). `stopping_threshold` and
`divergence_threshold` stop at once, before the detector is asked; `check_finite` stops on a NaN
or infinite value (else it is skipped); `strict` raises on a missing metric (else warns);
`check_on_train_epoch_end` chooses the hook (None: Lightning's rule). The stop is logged at
WARNING through Lightning's logger, and `verbose` adds each improvement at INFO (on rank 0 only
with `log_rank_zero_only`). Each judged validation's evidence goes to the trainer's loggers
(TensorBoard, W&B, CSV) and `trainer.callback_metrics` as `evalstop/stop`, `evalstop/best_step`,
`evalstop/best_value` and `evalstop/n_evals`. After a stop,
`stopped_epoch`, `wait_count` (evals since the best improved by more than `min_delta`),
`best_score` (a tensor, as Lightning's), `stopping_reason` (Lightning's `EarlyStoppingReason`; a
detector's stop is `PATIENCE_EXHAUSTED`: the metric stopped improving) and
`stopping_reason_message` read as `EarlyStopping`'s do, with `best_step` the checkpoint to keep.

It judges after each validation of a fit (not the sanity check, not under `fast_dev_run`, as
`EarlyStopping`), reading `trainer.callback_metrics[monitor]` at `trainer.global_step`; progress
is global_step / `max_steps` (the argument, else the trainer's `max_steps`, else
`estimated_stepping_batches` when finite). The decision is reduced across ranks with
`reduce_boolean_decision(..., all=False)`. At fit start it warns where it would do nothing or
name a checkpoint never saved: validation disabled, no `ModelCheckpoint` monitoring this metric,
a progress rule without a known length. `state_dict` / `load_state_dict` carry the history
through a checkpoint, so a resumed fit decides as an uninterrupted one; a new fit starts afresh.
"""

from __future__ import annotations

import logging
import math
from typing import Any

try:
    import torch
    from lightning.pytorch.callbacks import Callback, ModelCheckpoint
    from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason
    from lightning.pytorch.trainer.states import TrainerFn
    from lightning.pytorch.utilities.rank_zero import rank_prefixed_message
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.lightning needs lightning: "
                      "pip install 'evalstop-gym[lightning]'") from exc

from ..online import (
    DEFAULT_DETECTOR,
    MonitorDecision,
    RunMonitor,
    check_monitor_args,
    never_acts_without_progress,
)
from ..policies.patience import evals_without_improvement
from ..sim.protocols import Detector
from ._common import check_count, check_flag, check_real, evidence, patience_detector

log = logging.getLogger("lightning.pytorch.callbacks.evalstop")   # Lightning's handler and level


class EvalStopCallback(Callback):
    """Stop `trainer.fit` when `detector` says the monitored metric has turned for good."""

    def __init__(self, monitor: str, mode: str = "min",
                 detector: str | Detector = DEFAULT_DETECTOR, check_finite: bool = True,
                 strict: bool = True, max_steps: int | None = None,
                 job_type: str = "rlhf", *, min_delta: float = 0.0, patience: int | None = None,
                 verbose: bool = False, stopping_threshold: float | None = None,
                 divergence_threshold: float | None = None,
                 check_on_train_epoch_end: bool | None = None,
                 log_rank_zero_only: bool = False) -> None:
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor={monitor!r}: expected the name of a logged metric, such "
                             f"as 'val_acc'")
        self.min_delta = check_real("min_delta", min_delta, least=0) or 0.0
        if patience is not None:
            check_count("patience", patience, 1)
        detector = patience_detector(detector, patience, self.min_delta, default_patience=3)
        made = check_monitor_args(detector, mode, max_steps, job_type)
        for name, flag in (("check_finite", check_finite), ("strict", strict),
                           ("verbose", verbose), ("log_rank_zero_only", log_rank_zero_only)):
            check_flag(name, flag)
        if check_on_train_epoch_end is not None:
            check_flag("check_on_train_epoch_end", check_on_train_epoch_end)
        self.stopping_threshold = check_real("stopping_threshold", stopping_threshold,
                                             allow_none=True)
        self.divergence_threshold = check_real("divergence_threshold", divergence_threshold,
                                               allow_none=True)
        self.monitor, self.mode, self.detector, self.patience = monitor, mode, detector, patience
        self.check_finite, self.strict, self.verbose = check_finite, strict, verbose
        self.max_steps, self.job_type = max_steps, job_type
        self.log_rank_zero_only = log_rank_zero_only
        self._check_on_train_epoch_end = check_on_train_epoch_end
        self._needs_progress = never_acts_without_progress(made)
        self._start()
        self._pending: dict[str, Any] | None = None

    def _start(self) -> None:
        self.run: RunMonitor | None = None
        self.decision: MonitorDecision | None = None
        self.stopped_step: int | None = None
        self.stopped_epoch = 0
        self.wait_count = 0
        self.stopping_reason = EarlyStoppingReason.NOT_STOPPED
        self.stopping_reason_message: str | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, mode=self.mode)

    @property
    def best_step(self) -> float | None:
        return None if self.decision is None else self.decision.best_step

    @property
    def best_score(self) -> torch.Tensor:
        """The best value so far, as Lightning's (inf in the wrong direction before any)."""
        if self.decision is None:
            return torch.tensor(math.inf if self.mode == "min" else -math.inf)
        return torch.tensor(self.decision.best_value)

    def setup(self, trainer, pl_module, stage: str) -> None:
        """A new fit starts afresh (Lightning restores a checkpoint's state after this hook, so
        a resumed fit still carries on from it); the hook follows Lightning's rule if unset."""
        if stage != TrainerFn.FITTING:
            return
        self._start()
        self._pending = None
        if self._check_on_train_epoch_end is None:
            self._check_on_train_epoch_end = (trainer.val_check_interval == 1.0
                                              and trainer.check_val_every_n_epoch == 1)

    def on_fit_start(self, trainer, pl_module) -> None:
        """Warn where this callback would do nothing, or name a checkpoint never saved."""
        name = type(self).__name__
        if not trainer.limit_val_batches:
            log.warning("%s: validation is disabled (limit_val_batches=0), so %s is never "
                        "judged and the run is never stopped", name, self.monitor)
        pairs = [c for c in trainer.checkpoint_callbacks
                 if isinstance(c, ModelCheckpoint) and c.monitor == self.monitor]
        if not pairs:
            log.warning("%s: no ModelCheckpoint monitors %r, so the best step it reports is "
                        "never saved; add ModelCheckpoint(monitor=%r, mode=%r)", name,
                        self.monitor, self.monitor, self.mode)
        if self._needs_progress and self._length(trainer) is None:
            log.warning("%s: the detector reads progress and this fit's length is unknown "
                        "(no max_steps, no finite estimated_stepping_batches), so it will never "
                        "stop it; pass max_steps", name)

    def _monitor(self, trainer) -> RunMonitor:
        if self.run is None:
            self.run = RunMonitor(self.detector, self.mode, self._length(trainer), self.job_type)
            if self._pending is not None:
                self.run.load_state_dict(self._pending)
                self.decision = self.run.decision() if self.run.steps else None
        return self.run

    def _length(self, trainer) -> int | None:
        if self.max_steps is not None:
            return self.max_steps
        if trainer.max_steps and trainer.max_steps > 0:
            return trainer.max_steps
        total = trainer.estimated_stepping_batches
        return int(total) if math.isfinite(total) and total > 0 else None

    def _skip(self, trainer) -> bool:
        return (trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking
                or bool(trainer.fast_dev_run))

    def on_train_epoch_end(self, trainer, pl_module) -> None:
        if self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_check(trainer)

    def on_validation_end(self, trainer, pl_module) -> None:
        if not self._check_on_train_epoch_end and not self._skip(trainer):
            self._run_check(trainer)

    def _run_check(self, trainer) -> None:
        before = self.decision
        stop, message = self._check(trainer)
        stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        trainer.should_stop = trainer.should_stop or stop
        first = stop and self.stopped_step is None
        if first:
            self.stopped_step, self.stopped_epoch = trainer.global_step, trainer.current_epoch
            if self.stopping_reason_message is None:     # another rank's stop
                self.stopping_reason_message = "Another rank signalled the Trainer to stop."
        if self.decision is not None and self.decision is not before:
            self._log_evidence(trainer)
        rank = trainer.global_rank if trainer.world_size > 1 else None
        if rank is not None and self.log_rank_zero_only and rank != 0:
            return
        if first:                                    # shown whatever `verbose` says
            text = message or self.stopping_reason_message
            log.warning(rank_prefixed_message(f"EvalStopCallback: {text}", rank))
        elif message and self.verbose:
            log.info(rank_prefixed_message(message, rank))

    def _log_evidence(self, trainer) -> None:
        """The decision as `evalstop/*` metrics: into `trainer.callback_metrics` and to every
        logger at `trainer.global_step` (Lightning refuses `self.log` in `on_validation_end`,
        where this callback decides as `EarlyStopping` does)."""
        assert self.decision is not None
        metrics = evidence(self.decision)
        trainer.callback_metrics.update({k: torch.tensor(v) for k, v in metrics.items()})
        for logger in trainer.loggers:
            logger.log_metrics(metrics, step=trainer.global_step)

    def _stop(self, reason: EarlyStoppingReason, message: str) -> tuple[bool, str]:
        self.stopping_reason = reason
        self.stopping_reason_message = f"{message} Signaling Trainer to stop."
        return True, self.stopping_reason_message

    def _check(self, trainer) -> tuple[bool, str]:
        """This rank's decision after the latest validation, and what verbose logs of it."""
        metrics = trainer.callback_metrics
        if self.monitor not in metrics:
            message = (f"EvalStopCallback: metric {self.monitor!r} is not available; logged "
                       f"metrics: {', '.join(metrics) or 'none'}")
            if self.strict:
                raise RuntimeError(message)
            log.warning(message)
            return False, ""
        value = float(metrics[self.monitor].squeeze())
        if not math.isfinite(value):
            if self.check_finite:
                return self._stop(EarlyStoppingReason.NON_FINITE_METRIC,
                                  f"Monitored metric {self.monitor} = {value} is not finite.")
            log.warning("EvalStopCallback: %s = %s is skipped", self.monitor, value)
            return False, ""
        sign = 1.0 if self.mode == "max" else -1.0
        better, worse = (">", "<") if self.mode == "max" else ("<", ">")
        if self.stopping_threshold is not None and sign * (value - self.stopping_threshold) > 0:
            return self._stop(EarlyStoppingReason.STOPPING_THRESHOLD,
                              f"Stopping threshold reached: {self.monitor} = {value} {better} "
                              f"{self.stopping_threshold}.")
        if (self.divergence_threshold is not None
                and sign * (self.divergence_threshold - value) > 0):
            return self._stop(EarlyStoppingReason.DIVERGENCE_THRESHOLD,
                              f"Divergence threshold reached: {self.monitor} = {value} {worse} "
                              f"{self.divergence_threshold}.")
        run = self._monitor(trainer)
        before = self.decision
        decision = run.offer(trainer.global_step, value)
        if decision is None:
            return run.stopped, ""  # skipped (validated again at the same step, say): as before
        self.decision = decision
        self.wait_count = evals_without_improvement(run.view().eval_scores, self.min_delta)
        if decision.stop:
            return self._stop(EarlyStoppingReason.PATIENCE_EXHAUSTED,
                              f"Monitored metric {self.monitor}: {decision.reason}. Best score: "
                              f"{decision.best_value:.6g} at step {decision.best_step}.")
        if before is None or decision.best_step != before.best_step:
            return False, f"Metric {self.monitor} improved. New best score: {value:.6g}"
        return False, ""

    def state_dict(self) -> dict[str, Any]:
        state = self.run.state_dict() if self.run is not None else self._pending
        return {"monitor_state": state, "stopped_step": self.stopped_step,
                "stopped_epoch": self.stopped_epoch, "wait_count": self.wait_count,
                "stopping_reason": self.stopping_reason.value,
                "stopping_reason_message": self.stopping_reason_message}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("monitor_state")
        self.stopped_step = state_dict.get("stopped_step")
        self.stopped_epoch = state_dict.get("stopped_epoch", 0)
        self.wait_count = state_dict.get("wait_count", 0)
        reason = state_dict.get("stopping_reason")
        self.stopping_reason = (EarlyStoppingReason(reason) if isinstance(reason, int) else
                                EarlyStoppingReason.NOT_STOPPED)   # older checkpoints: a str
        self.stopping_reason_message = state_dict.get("stopping_reason_message")
        self.run = None
