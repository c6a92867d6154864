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
    trainer, callback = EXAMPLE["main"](str(tmp_path))
    scores = evals(trainer)
    assert trainer.state.global_step < trainer.args.max_steps
    assert callback.decision.stop and callback.decision.step == trainer.state.global_step
    assert callback.best_step == max(scores, key=scores.get)
    assert callback.best_metric == max(scores.values())
    steps = sorted(scores)
    assert scores[steps[-1]] < scores[steps[-2]] < scores[steps[-3]]    # two declines, then stop


def test_load_best_model_at_end_loads_the_checkpoint_it_names(tmp_path):
    trainer, callback = EXAMPLE["main"](str(tmp_path), load_best_model_at_end=True,
                                        save_strategy="steps", save_steps=10,
                                        save_total_limit=3)
    assert trainer.state.best_global_step == callback.best_step
    assert float(trainer.model.w) == pytest.approx(1.0, abs=0.02)     # the peak's weight


def test_resume_rebuilds_from_log_history_without_resetting_patience(tmp_path):
    args = TrainingArguments(output_dir=str(tmp_path), max_steps=100, report_to="none",
                             metric_for_best_model="score", use_cpu=True)
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
                             metric_for_best_model="loss", greater_is_better=False)
    callback = EvalStopCallback("EvalStop-1")
    callback.on_train_begin(args, TrainerState(max_steps=50), TrainerControl())
    assert callback.monitor.mode == "min"
    control = TrainerControl()
    for step, loss in [(10, 1.0), (20, 0.8), (30, 0.9)]:
        callback.on_evaluate(args, TrainerState(global_step=step, max_steps=50), control,
                             metrics={"eval_loss": loss})
    assert control.should_training_stop and callback.best_step == 20
    none = TrainingArguments(output_dir=str(tmp_path), report_to="none", use_cpu=True)
    with pytest.raises(ValueError, match="no metric; pass metric="):
        EvalStopCallback().on_train_begin(none, TrainerState(), TrainerControl())
