"""EvalStopCallback on a real Lightning Trainer (a one-weight model, CPU, nothing downloaded)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

pytest.importorskip("lightning")
from lightning.pytorch.callbacks.early_stopping import EarlyStoppingReason  # noqa: E402
from lightning.pytorch.strategies import SingleDeviceStrategy  # noqa: E402

from evalstop_gym.integrations.lightning import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "lightning_fit.py"))
OneWeight, loader, trainer = EXAMPLE["OneWeight"], EXAMPLE["loader"], EXAMPLE["trainer"]


def fit(callback: EvalStopCallback, max_epochs: int = 40, ckpt_path=None, model=None,
        **options):
    run = trainer(callback, max_epochs, **options)
    run.fit(model or OneWeight(), loader(2.0), loader(1.0), ckpt_path=ckpt_path)
    return run


class NanScore(OneWeight):
    def validation_step(self, batch, batch_idx):
        self.log("val_score", float("nan"))


def test_fit_stops_after_the_peak_and_reports_the_best_step():
    run, callback = EXAMPLE["main"]("EvalStop-2")
    history = callback.run.state_dict()
    scores = dict(zip(history["steps"], history["values"], strict=True))
    assert run.global_step == callback.stopped_step < run.estimated_stepping_batches
    assert callback.best_step == max(scores, key=scores.get) == 15
    assert callback.run.progress_at(run.global_step) == pytest.approx(25 / 200)


def test_resume_from_a_checkpoint_decides_as_an_uninterrupted_fit(tmp_path):
    straight = EvalStopCallback("val_score", "max", "EvalStop-2", max_steps=200)
    fit(straight)
    first = EvalStopCallback("val_score", "max", "EvalStop-2", max_steps=200)
    fit(first, max_epochs=4).save_checkpoint(tmp_path / "mid.ckpt")    # stops at 20, mid-decline
    resumed = EvalStopCallback("val_score", "max", "EvalStop-2", max_steps=200)
    fit(resumed, ckpt_path=tmp_path / "mid.ckpt")
    assert resumed.run.steps[:4] == first.run.steps            # the history came back
    assert resumed.stopped_step == straight.stopped_step == 25
    assert resumed.best_step == straight.best_step


class OtherRankStops(SingleDeviceStrategy):
    """A strategy whose reduction reports that another rank wants to stop."""

    def reduce_boolean_decision(self, decision: bool, all: bool = True) -> bool:
        assert all is False             # any rank stopping stops every rank
        return True


def test_the_decision_is_reduced_across_ranks():
    import torch

    callback = EvalStopCallback("val_score", "max", "EvalStop-2")
    run = fit(callback, strategy=OtherRankStops(torch.device("cpu")))
    assert run.global_step == 5 and not callback.decision.stop    # stopped for the other rank


def test_missing_metric_and_non_finite_values():
    with pytest.raises(RuntimeError, match="'val_acc' is not available; logged metrics: "):
        fit(EvalStopCallback("val_acc", "max"))
    callback = EvalStopCallback("val_score", "max", strict=False)
    callback.monitor = "val_acc"
    assert fit(callback, max_epochs=2).global_step == 10        # warned, never stopped
    finite = EvalStopCallback("val_score", "max", check_finite=True)
    assert fit(finite, max_epochs=3, model=NanScore()).global_step == 5
    assert finite.stopping_reason == EarlyStoppingReason.NON_FINITE_METRIC     # was a str
    assert "val_score = nan is not finite" in finite.stopping_reason_message
    skipped = EvalStopCallback("val_score", "max", check_finite=False)
    assert fit(skipped, max_epochs=3, model=NanScore()).global_step == 15
    assert skipped.run is None                                  # nothing finite was judged


def test_a_second_fit_starts_afresh():
    """One callback, two fits: the second used to stop at its first validation."""
    callback = EvalStopCallback("val_score", "max", "EvalStop-2")
    first = fit(callback)
    assert callback.stopped_step == first.global_step == 25
    second = fit(callback)
    assert callback.stopped_step == second.global_step == 25
    assert callback.run.steps == [5, 10, 15, 20, 25]


@pytest.mark.parametrize("kwargs, message", [
    ({"monitor": 5}, "monitor=5: expected the name of a logged metric"),
    ({"mode": "up"}, "mode='up'"),
    ({"detector": "Nope-1"}, "detector 'Nope-1' is unknown"),
    ({"check_finite": "yes"}, "check_finite='yes': expected True or False"),
    ({"strict": 1}, "strict=1: expected True or False"),
    ({"max_steps": "12"}, "max_steps='12'"),
    ({"max_steps": -3}, "max_steps=-3: expected a number > 0"),
    ({"job_type": "sft"}, "job_type='sft'"),
])
def test_bad_arguments_are_named_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopCallback(**{"monitor": "val_score", **kwargs})


def test_the_default_detector_is_the_one_default():
    import inspect

    from evalstop_gym.online import DEFAULT_DETECTOR

    assert inspect.signature(EvalStopCallback).parameters["detector"].default == DEFAULT_DETECTOR
    assert EvalStopCallback("val_score").detector == DEFAULT_DETECTOR
    assert inspect.signature(EXAMPLE["main"]).parameters["detector"].default == DEFAULT_DETECTOR
