"""EvalStopCallback on a real transformers Trainer (a one-weight model, CPU, nothing downloaded)."""

from __future__ import annotations

import runpy
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from transformers import TrainerControl, TrainerState, TrainingArguments  # noqa: E402

from evalstop_gym.integrations.hf import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "hf_trainer.py"))


def evals(trainer) -> dict[int, float]:
    return {e["step"]: e["eval_score"] for e in trainer.state.log_history if "eval_score" in e}


def test_trainer_stops_after_the_peak_and_reports_the_best_step(tmp_path):
    trainer, callback = EXAMPLE["main"](str(tmp_path), detector="EvalStop-2")
    scores = evals(trainer)
    assert trainer.state.global_step < trainer.args.max_steps
    assert callback.decision.stop and callback.decision.step == trainer.state.global_step
    assert callback.best_step == max(scores, key=scores.get)
    assert callback.best_metric == max(scores.values())
    steps = sorted(scores)
    assert scores[steps[-1]] < scores[steps[-2]] < scores[steps[-3]]    # two declines, then stop


def test_load_best_model_at_end_loads_the_checkpoint_it_names(tmp_path):
    trainer, callback = EXAMPLE["main"](str(tmp_path), detector="EvalStop-2",
                                        load_best_model_at_end=True, save_strategy="steps",
                                        save_steps=10, save_total_limit=3)
    assert trainer.state.best_global_step == callback.best_step
    assert float(trainer.model.w) == pytest.approx(1.0, abs=0.02)     # the peak's weight


def test_resume_rebuilds_from_log_history_without_resetting_patience(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, report_to="none",
                             metric_for_best_model="score", use_cpu=True, eval_strategy="steps")
    history = [{"eval_score": v, "step": s} for s, v in [(10, 0.5), (20, 0.6), (30, 0.55)]]
    resumed = EvalStopCallback("EvalStop-2")
    resumed.on_train_begin(args, TrainerState(max_steps=100, log_history=history),
                           TrainerControl())
    control = TrainerControl()
    resumed.on_evaluate(args, TrainerState(global_step=40, max_steps=100), control,
                        metrics={"eval_score": 0.5})
    assert control.should_training_stop and resumed.best_step == 20
    assert resumed.decision.progress == pytest.approx(0.4)


def test_direction_and_missing_metric(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True,
                             metric_for_best_model="loss", greater_is_better=False,
                             eval_strategy="steps")
    callback = EvalStopCallback("EvalStop-1")
    callback.on_train_begin(args, TrainerState(max_steps=50), TrainerControl())
    assert callback.monitor.mode == "min"
    control = TrainerControl()
    for step, loss in [(10, 1.0), (20, 0.8), (30, 0.9)]:
        callback.on_evaluate(args, TrainerState(global_step=step, max_steps=50), control,
                             metrics={"eval_loss": loss})
    assert control.should_training_stop and callback.best_step == 20
    none = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True,
                             eval_strategy="steps")
    with pytest.raises(ValueError, match="no metric; pass metric="):
        EvalStopCallback().on_train_begin(none, TrainerState(), TrainerControl())


class SpikyWeight(EXAMPLE["OneWeight"]):
    """The example's model, whose training loss reads NaN (gradients untouched) on steps 21-30."""

    def __init__(self) -> None:
        super().__init__()
        self.calls = 0

    def forward(self, x, labels=None):
        out = super().forward(x, labels)
        if self.training and labels is not None:
            self.calls += 1
            if 21 <= self.calls <= 30:
                out["loss"] = out["loss"] + float("nan")      # a constant: no NaN gradient
        return out


def test_nan_metric_and_nan_loss_do_not_end_training_with_an_error(tmp_path, caplog):
    from transformers import Trainer

    evaluated = []

    def score(pred):
        evaluated.append(1)
        value = EXAMPLE["score"](pred)["score"]
        return {"score": float("nan") if len(evaluated) == 2 else value}   # eval at step 20

    args = TrainingArguments(
        output_dir=str(tmp_path), max_steps=200, per_device_train_batch_size=8,
        learning_rate=0.02, optim="sgd", lr_scheduler_type="constant", weight_decay=0.0,
        eval_strategy="steps", eval_steps=10, logging_steps=10, save_strategy="no",
        metric_for_best_model="score", greater_is_better=True, report_to="none", use_cpu=True,
        remove_unused_columns=False, disable_tqdm=True, logging_nan_inf_filter=False)
    callback = EvalStopCallback("EvalStop-2")
    trainer = Trainer(model=SpikyWeight(), args=args, train_dataset=EXAMPLE["examples"](2.0, 8),
                      eval_dataset=EXAMPLE["examples"](1.0, 4), compute_metrics=score,
                      callbacks=[callback])
    with caplog.at_level("WARNING"):
        trainer.train()                                   # used to raise ValueError at step 20
    losses = {e["step"]: e["loss"] for e in trainer.state.log_history if "loss" in e}
    assert losses[30] != losses[30]                       # the NaN loss was logged ...
    assert callback.decision.stop and trainer.state.global_step < 200    # ... and still stopped
    assert 20 not in callback.monitor.steps and 30 in callback.monitor.steps
    assert callback.monitor.state_dict()["losses"][callback.monitor.steps.index(30)] is None
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sum("not finite; skipped" in m for m in warned) == 1
    assert sum("loss=nan at step 30 is not finite" in m for m in warned) == 1


def test_resume_skips_nan_entries_of_the_log_history(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, report_to="none",
                             metric_for_best_model="score", use_cpu=True, eval_strategy="steps")
    nan = float("nan")
    history = [{"loss": 1.0, "step": 10}, {"eval_score": 0.5, "step": 10},
               {"loss": nan, "step": 20}, {"eval_score": nan, "step": 20},
               {"eval_score": 0.6, "step": 30}, {"eval_score": 0.55, "step": 40}]
    resumed = EvalStopCallback("EvalStop-2")
    resumed.on_train_begin(args, TrainerState(max_steps=100, log_history=history),
                           TrainerControl())
    assert resumed.monitor.steps == [10, 30, 40]
    assert resumed.monitor.state_dict()["losses"] == [1.0, None, None]
    control = TrainerControl()
    resumed.on_log(args, TrainerState(global_step=50), control, logs={"loss": float("inf")})
    resumed.on_evaluate(args, TrainerState(global_step=50, max_steps=100), control,
                        metrics={"eval_score": 0.5})
    assert control.should_training_stop and resumed.best_step == 30


def test_a_second_eval_at_a_step_is_judged_alike_live_and_on_resume(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, report_to="none",
                             metric_for_best_model="score", use_cpu=True, eval_strategy="steps")
    history = [{"loss": 1.0, "step": 10}, {"eval_score": 0.5, "step": 10},
               {"eval_score": 0.6, "step": 20}, {"eval_score": 0.9, "step": 20},
               {"loss": 0.7, "step": 25}]
    live = EvalStopCallback("EvalStop-2")
    live.on_train_begin(args, TrainerState(max_steps=100), TrainerControl())
    for entry in history:
        if "loss" in entry:
            live.on_log(args, TrainerState(global_step=entry["step"]), TrainerControl(),
                        logs=entry)
        else:
            live.on_evaluate(args, TrainerState(global_step=entry["step"], max_steps=100),
                             TrainerControl(), metrics=entry)
    resumed = EvalStopCallback("EvalStop-2")
    resumed.on_train_begin(args, TrainerState(max_steps=100, log_history=history),
                           TrainerControl())
    for callback in (live, resumed):                      # the first eval at step 20 counts
        assert callback.monitor.steps == [10, 20] and callback.best_metric == 0.6
        assert callback.monitor.state_dict() == live.monitor.state_dict()
        assert callback._loss == 0.7                      # the loss after the last eval is kept


@pytest.mark.parametrize("kwargs, message", [
    ({"metric": 5}, "metric=5: expected a metric name"),
    ({"metric": ""}, "metric='': expected a metric name"),
    ({"mode": "up"}, "mode='up'"),
    ({"job_type": None}, "job_type=None"),
    ({"detector": "Nope-1"}, "detector 'Nope-1' is unknown"),
])
def test_bad_arguments_are_named_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopCallback(**kwargs)


@pytest.mark.parametrize("value", ["high", None, [0.5], 10**400])
def test_a_non_numeric_metric_value_is_named(tmp_path, value):
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, report_to="none",
                             metric_for_best_model="score", use_cpu=True, eval_strategy="steps")
    callback = EvalStopCallback("EvalStop-2")
    callback.on_train_begin(args, TrainerState(max_steps=100), TrainerControl())
    with pytest.raises(ValueError, match=r"metrics\['eval_score'\]=.* at step 10: expected a "
                                         r"number"):
        callback.on_evaluate(args, TrainerState(global_step=10, max_steps=100),
                             TrainerControl(), metrics={"eval_score": value})
    assert not callback.monitor.steps


def test_a_run_that_never_evaluates_is_refused_at_train_begin(tmp_path):
    with pytest.raises(ValueError, match=r"eval_strategy='no'\) never evaluates"):
        EXAMPLE["main"](str(tmp_path), detector="EvalStop-2", eval_strategy="no",
                        save_strategy="no", load_best_model_at_end=False)   # else HF refuses


def test_a_second_train_inherits_nothing_from_the_first(tmp_path):
    """The first run stopped; the second's first eval is NaN (skipped): it must not be answered
    with the first run's stop."""
    from transformers import Trainer

    first, callback = EXAMPLE["main"](str(tmp_path / "a"), detector="EvalStop-2")
    assert callback.decision.stop
    calls = []

    def score(pred):
        calls.append(1)
        return {"score": float("nan")} if len(calls) == 1 else EXAMPLE["score"](pred)

    second = Trainer(model=EXAMPLE["OneWeight"](), args=first.args.__class__(
        **{**first.args.to_dict(), "output_dir": str(tmp_path / "b")}),
        train_dataset=EXAMPLE["examples"](2.0, 8), eval_dataset=EXAMPLE["examples"](1.0, 4),
        compute_metrics=score, callbacks=[callback])
    second.train()
    assert second.state.global_step == first.state.global_step      # the same stop, not at 10
    assert callback.decision.n_evals == len(callback.monitor.steps) == len(calls) - 1


def test_the_default_detector_is_the_one_default():
    import inspect

    from evalstop_gym.online import DEFAULT_DETECTOR

    assert inspect.signature(EvalStopCallback).parameters["detector"].default == DEFAULT_DETECTOR
    assert EvalStopCallback().detector == DEFAULT_DETECTOR
    assert inspect.signature(EXAMPLE["main"]).parameters["detector"].default == DEFAULT_DETECTOR
