"""EvalStopCallback takes EarlyStopping's arguments, reports its attributes, warns as it would."""

from __future__ import annotations

import math
import runpy
from pathlib import Path

import pytest

pytest.importorskip("lightning")
import torch  # noqa: E402
from lightning.pytorch.callbacks import Callback, ModelCheckpoint  # noqa: E402
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason  # noqa: E402

from evalstop_gym.integrations.lightning import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "lightning_fit.py"))
OneWeight, loader, trainer = EXAMPLE["OneWeight"], EXAMPLE["loader"], EXAMPLE["trainer"]


def fit(callback: EvalStopCallback, max_epochs: int = 40, **options):
    run = trainer(callback, max_epochs, **options)
    run.fit(OneWeight(), loader(2.0), loader(1.0))
    return run


def test_patience_and_min_delta_run_earlystoppings_rule():
    callback = EvalStopCallback("val_score", "max", patience=2)
    run = fit(callback)
    assert callback.run.detector.name == "Patience-2"
    assert callback.stopped_step == run.global_step == 25           # peak at 15, two misses
    assert callback.stopped_epoch == 4                              # the fifth epoch, 0-based
    assert callback.wait_count == 2
    assert callback.stopping_reason == EarlyStoppingReason.PATIENCE_EXHAUSTED
    assert "Signaling Trainer to stop" in callback.stopping_reason_message
    scores = dict(zip(callback.run.steps, callback.run.state_dict()["values"], strict=True))
    assert isinstance(callback.best_score, torch.Tensor)
    assert float(callback.best_score) == pytest.approx(max(scores.values()))
    wide = EvalStopCallback("val_score", "max", patience=2, min_delta=10.0)
    assert fit(wide).global_step == 15              # no eval beats the first by 10: 2 misses


def test_stopping_and_divergence_thresholds_stop_at_once():
    reached = EvalStopCallback("val_score", "max", stopping_threshold=-0.5)
    run = fit(reached)
    assert reached.stopping_reason == EarlyStoppingReason.STOPPING_THRESHOLD
    assert reached.stopping_reason_message.startswith("Stopping threshold reached: val_score =")
    assert float(run.callback_metrics["val_score"]) > -0.5
    assert run.global_step < 25                     # before the detector would have
    diverged = EvalStopCallback("val_score", "max", divergence_threshold=0.5)
    assert fit(diverged).global_step == 5           # val_score < 0.5 at the first check
    assert diverged.stopping_reason == EarlyStoppingReason.DIVERGENCE_THRESHOLD


def test_either_hook_decides_alike_and_fast_dev_run_is_not_judged():
    on_val = EvalStopCallback("val_score", "max", "EvalStop-2", check_on_train_epoch_end=False)
    on_epoch = EvalStopCallback("val_score", "max", "EvalStop-2", check_on_train_epoch_end=True)
    assert fit(on_val).global_step == fit(on_epoch).global_step == 25
    quick = EvalStopCallback("val_score", "max", "EvalStop-1")
    fit(quick, fast_dev_run=3)
    assert quick.run is None and quick.stopped_epoch == 0


def test_verbose_logs_improvements_and_the_stop(caplog):
    with caplog.at_level("INFO", logger="lightning.pytorch"):
        fit(EvalStopCallback("val_score", "max", "EvalStop-2", verbose=True))
    lines = [r.getMessage() for r in caplog.records if r.name.endswith("evalstop")]
    assert sum("Metric val_score improved. New best score" in m for m in lines) == 3
    assert any("2 consecutive eval declines" in m and "Signaling Trainer to stop" in m
               for m in lines)
    caplog.clear()
    with caplog.at_level("INFO", logger="lightning.pytorch"):
        fit(EvalStopCallback("val_score", "max", "EvalStop-2"))
    assert not any("improved" in r.getMessage() for r in caplog.records)


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_a_missing_checkpoint_pairing_is_warned_with_the_fix(caplog, tmp_path):
    with caplog.at_level("WARNING"):
        fit(EvalStopCallback("val_score", "max"), max_epochs=2)
    assert any("add ModelCheckpoint(monitor='val_score', mode='max')" in m
               for m in warnings_of(caplog))
    caplog.clear()
    paired = ModelCheckpoint(dirpath=tmp_path, monitor="val_score", mode="max")
    with caplog.at_level("WARNING"):
        run = trainer(EvalStopCallback("val_score", "max"), 2, extra=(paired,),
                      enable_checkpointing=True)
        run.fit(OneWeight(), loader(2.0), loader(1.0))
    assert not any("ModelCheckpoint" in m for m in warnings_of(caplog))


def test_disabled_validation_is_warned(caplog):
    with caplog.at_level("WARNING"):
        fit(EvalStopCallback("val_score", "max", strict=False), max_epochs=1,
            limit_val_batches=0)
    assert any("validation is disabled (limit_val_batches=0)" in m for m in warnings_of(caplog))


class StopAfterTwoEpochs(Callback):
    def on_train_epoch_end(self, trainer, pl_module):
        trainer.should_stop = trainer.current_epoch >= 1


def test_a_progress_rule_without_a_length_and_a_lone_peer_rule_are_warned(caplog):
    endless = EvalStopCallback("val_score", "max", "StopAt-0.5")
    with caplog.at_level("WARNING"):
        run = trainer(endless, max_epochs=-1, extra=(StopAfterTwoEpochs(),))
        run.fit(OneWeight(), loader(2.0), loader(1.0))
    assert math.isinf(run.estimated_stepping_batches)
    assert any("reads progress and this fit's length is unknown" in m
               for m in warnings_of(caplog))
    caplog.clear()
    with caplog.at_level("WARNING"):
        fit(EvalStopCallback("val_score", "max", "MedianPruner"), max_epochs=2)
    assert any("judges a run against ended peer runs" in m for m in warnings_of(caplog))


@pytest.mark.parametrize("kwargs, message", [
    ({"min_delta": -0.1}, "min_delta=-0.1: expected a finite number >= 0"),
    ({"patience": 0}, "patience=0: expected an int >= 1"),
    ({"patience": 2.0}, "patience=2.0: expected an int >= 1"),
    ({"patience": 2, "detector": "EvalStop-1"}, "pass either them or detector, not both"),
    ({"verbose": "yes"}, "verbose='yes': expected True or False"),
    ({"stopping_threshold": "0.9"}, "stopping_threshold='0.9': expected a finite number"),
    ({"divergence_threshold": math.nan}, "divergence_threshold=nan: expected a finite number"),
    ({"check_on_train_epoch_end": 1}, "check_on_train_epoch_end=1: expected True or False"),
    ({"log_rank_zero_only": None}, "log_rank_zero_only=None: expected True or False"),
])
def test_earlystopping_arguments_are_checked_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopCallback(**{"monitor": "val_score", **kwargs})
