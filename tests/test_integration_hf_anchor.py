"""EvalStopCallback takes EarlyStoppingCallback's arguments and warns where HF's would."""

from __future__ import annotations

import logging
import runpy
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from transformers import TrainerControl, TrainerState, TrainingArguments  # noqa: E402

from evalstop_gym.integrations.hf import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "hf_trainer.py"))


@pytest.fixture
def hf_log(library_log):
    """transformers' own logger, captured once at INFO."""
    return library_log("transformers")


def args_for(tmp_path, **options) -> TrainingArguments:
    return TrainingArguments(**{"output_dir": str(tmp_path), "max_steps": 100,
                                "report_to": "none", "metric_for_best_model": "score",
                                "use_cpu": True, "eval_strategy": "steps", **options})


def feed(callback, args, scores, max_steps=100) -> TrainerControl:
    callback.on_train_begin(args, TrainerState(max_steps=max_steps), TrainerControl())
    control = TrainerControl()
    for i, value in enumerate(scores, 1):
        callback.on_evaluate(args, TrainerState(global_step=10 * i, max_steps=max_steps),
                             control, metrics={"eval_score": value})
    return control


def test_early_stopping_patience_and_threshold_run_hfs_rule(tmp_path):
    args = args_for(tmp_path, save_strategy="no")
    patient = EvalStopCallback(early_stopping_patience=2)
    assert patient.detector.name == "Patience-2"
    control = feed(patient, args, [0.5, 0.6, 0.59, 0.61, 0.6, 0.58])
    assert control.should_training_stop and patient.decision.step == 60
    assert patient.best_step == 40 and patient.early_stopping_patience_counter == 2
    strict = EvalStopCallback(early_stopping_patience=2, early_stopping_threshold=0.05)
    control = feed(strict, args, [0.5, 0.6, 0.59, 0.61, 0.6, 0.58])
    assert control.should_training_stop
    assert strict.monitor.steps[strict.monitor.stop_index] == 40        # +0.01 is no gain
    again = EvalStopCallback.from_state(strict.state())
    assert again.detector.name == "Patience-2-0.05" and again.early_stopping_threshold == 0.05


def test_early_stopping_patience_in_a_real_run(tmp_path):
    trainer, callback = EXAMPLE["main"](str(tmp_path))
    assert callback.decision.stop
    patient = EXAMPLE["main"](str(tmp_path / "p"), patience=2)[1]
    assert patient.detector.name == "Patience-2" and patient.decision.stop
    assert patient.early_stopping_patience_counter == 2
    assert patient.best_step == trainer.state.best_global_step == callback.best_step


def warnings_of(caplog) -> list[str]:
    return [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]


def test_a_checkpoint_never_saved_or_never_loaded_is_warned(tmp_path, hf_log):
    feed(EvalStopCallback("EvalStop-2"), args_for(tmp_path, save_strategy="no"), [0.5])
    assert any("save_strategy='no' saves no checkpoint" in m for m in warnings_of(hf_log))
    hf_log.clear()
    feed(EvalStopCallback("EvalStop-2"), args_for(tmp_path, save_steps=10), [0.5])
    assert any("set load_best_model_at_end=True" in m for m in warnings_of(hf_log))
    hf_log.clear()
    EXAMPLE["main"](str(tmp_path / "kept"), detector="EvalStop-2")   # the example keeps it
    assert not any("EvalStopCallback" in m and "stop at step" not in m
                   for m in warnings_of(hf_log))


def test_a_lone_peer_rule_and_a_progress_rule_without_max_steps_are_warned(tmp_path, caplog,
                                                                           library_log):
    args = args_for(tmp_path, save_strategy="no")
    with caplog.at_level("WARNING"):
        feed(EvalStopCallback("MedianPruner"), args, [0.5, 0.4])
    assert any("judges a run against ended peer runs" in m for m in warnings_of(caplog))
    library_log("transformers", logging.WARNING)
    feed(EvalStopCallback("StopAt-0.5"), args, [0.5], max_steps=0)
    assert any("StopAt-0.5 reads progress and this run's max_steps is unknown" in m
               for m in warnings_of(caplog))


def test_the_stop_and_with_verbose_each_judgement_go_to_transformers_logger(tmp_path, hf_log):
    args = args_for(tmp_path, save_strategy="no")
    feed(EvalStopCallback("EvalStop-2", verbose=True), args, [0.5, 0.6, 0.5, 0.4])
    lines = [r for r in hf_log.records if "EvalStopCallback" in r.getMessage()
             and r.levelname in ("INFO", "WARNING") and "at step" in r.getMessage()]
    assert all(r.name.startswith("transformers.") for r in lines)
    assert sum("continue at step" in r.getMessage() for r in lines) == 3
    assert "stop at step 40" in lines[-1].getMessage() and lines[-1].levelname == "WARNING"
    hf_log.clear()
    feed(EvalStopCallback("EvalStop-2"), args, [0.5, 0.6, 0.5, 0.4])
    assert not any("continue at step" in r.getMessage() for r in hf_log.records)
    stops = [r for r in hf_log.records if "stop at step" in r.getMessage()]
    assert [r.levelname for r in stops] == ["WARNING"]    # shown at the default verbosity


def test_a_detector_without_a_rule_for_the_run_speaks_of_runs():
    with pytest.raises(ValueError, match=r"job_type='lora': EvalStop-2 has no stopping rule for "
                                         r"this kind of run") as info:
        EvalStopCallback("EvalStop-2", job_type="lora")
    assert "monitor" not in str(info.value)


@pytest.mark.parametrize("kwargs, message", [
    ({"early_stopping_patience": 0}, "early_stopping_patience=0: expected an int >= 1"),
    ({"early_stopping_threshold": -0.1}, "early_stopping_threshold=-0.1: expected a finite "
                                         "number >= 0"),
    ({"early_stopping_patience": 2, "detector": "EvalStop-1"}, "not both"),
    ({"verbose": "yes"}, "verbose='yes': expected True or False"),
])
def test_hf_arguments_are_checked_at_construction(kwargs, message):
    with pytest.raises(ValueError, match=message):
        EvalStopCallback(**kwargs)
