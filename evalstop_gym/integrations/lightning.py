"""PyTorch Lightning: `EvalStopCallback`, shaped like Lightning's `EarlyStopping`, over RunMonitor.

    trainer = L.Trainer(callbacks=[EvalStopCallback(monitor="val_acc", mode="max",
                                                    detector="EvalStop-2")])

After each validation (not the sanity check) it reads `trainer.callback_metrics[monitor]` at
`trainer.global_step`; progress is global_step / `max_steps` (the argument, else the trainer's
`max_steps`, else `estimated_stepping_batches` when finite). As in `EarlyStopping`, a missing
metric raises (`strict=True`) or warns, a NaN or infinite value stops the run
(`check_finite=True`) or is skipped, and the stop decision is reduced across ranks with
`trainer.strategy.reduce_boolean_decision(..., all=False)` (any rank stopping stops all).
`state_dict` / `load_state_dict` carry the monitor's history through a checkpoint, so a resumed
fit decides as an uninterrupted one, while a new fit with the same callback starts afresh.
"""

from __future__ import annotations

import logging
import math
from typing import Any

try:
    from lightning.pytorch.callbacks import Callback
    from lightning.pytorch.trainer.states import TrainerFn
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise ImportError("evalstop_gym.integrations.lightning needs lightning: "
                      "pip install 'evalstop-gym[lightning]'") from exc

from ..online import DEFAULT_DETECTOR, MonitorDecision, RunMonitor, check_monitor_args
from ..sim.protocols import Detector

log = logging.getLogger(__name__)


class EvalStopCallback(Callback):
    """Stop `trainer.fit` when `detector` says the monitored metric has turned for good."""

    def __init__(self, monitor: str, mode: str = "min",
                 detector: str | Detector = DEFAULT_DETECTOR, check_finite: bool = True,
                 strict: bool = True, max_steps: int | None = None,
                 job_type: str = "rlhf") -> None:
        super().__init__()
        if not isinstance(monitor, str) or not monitor:
            raise ValueError(f"monitor={monitor!r}: expected the name of a logged metric, such "
                             f"as 'val_acc'")
        check_monitor_args(detector, mode, max_steps, job_type)
        for name, flag in (("check_finite", check_finite), ("strict", strict)):
            if not isinstance(flag, bool):
                raise ValueError(f"{name}={flag!r}: expected True or False")
        self.monitor, self.mode, self.detector = monitor, mode, detector
        self.check_finite, self.strict = check_finite, strict
        self.max_steps, self.job_type = max_steps, job_type
        self.run: RunMonitor | None = None
        self.decision: MonitorDecision | None = None
        self.stopped_step: int | None = None
        self.stopping_reason = ""
        self._pending: dict[str, Any] | None = None

    @property
    def state_key(self) -> str:
        return self._generate_state_key(monitor=self.monitor, mode=self.mode)

    @property
    def best_step(self) -> float | None:
        return None if self.decision is None else self.decision.best_step

    def setup(self, trainer, pl_module, stage: str) -> None:
        """A new fit starts afresh: nothing carries over from an earlier fit with this callback
        (Lightning restores a checkpoint's state after this hook, so a resumed fit still
        carries on from it)."""
        if stage == TrainerFn.FITTING:
            self.run, self.decision, self._pending = None, None, None
            self.stopped_step, self.stopping_reason = None, ""

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

    def on_validation_end(self, trainer, pl_module) -> None:
        if trainer.state.fn != TrainerFn.FITTING or trainer.sanity_checking:
            return
        stop = self._check(trainer)
        stop = trainer.strategy.reduce_boolean_decision(stop, all=False)
        trainer.should_stop = trainer.should_stop or stop
        if stop and self.stopped_step is None:
            self.stopped_step = trainer.global_step

    def _check(self, trainer) -> bool:
        """This rank's decision after the latest validation."""
        metrics = trainer.callback_metrics
        if self.monitor not in metrics:
            message = (f"EvalStopCallback: metric {self.monitor!r} is not available; logged "
                       f"metrics: {', '.join(metrics) or 'none'}")
            if self.strict:
                raise RuntimeError(message)
            log.warning(message)
            return False
        value = float(metrics[self.monitor].squeeze())
        if not math.isfinite(value):
            if self.check_finite:
                self.stopping_reason = f"{self.monitor} = {value}; stopping (check_finite)"
                return True
            log.warning("EvalStopCallback: %s = %s is skipped", self.monitor, value)
            return False
        run = self._monitor(trainer)
        decision = run.offer(trainer.global_step, value)
        if decision is None:
            return run.stopped      # skipped (validated again at the same step, say): as before
        self.decision = decision
        if decision.stop:
            self.stopping_reason = decision.reason
        return decision.stop

    def state_dict(self) -> dict[str, Any]:
        state = self.run.state_dict() if self.run is not None else self._pending
        return {"monitor_state": state, "stopped_step": self.stopped_step,
                "stopping_reason": self.stopping_reason}

    def load_state_dict(self, state_dict: dict[str, Any]) -> None:
        self._pending = state_dict.get("monitor_state")
        self.stopped_step = state_dict.get("stopped_step")
        self.stopping_reason = state_dict.get("stopping_reason", "")
        self.run = None
