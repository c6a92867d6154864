"""A Hugging Face stop reaches the user: a WARNING at the default verbosity, the evidence as
metrics in the eval's log entry (and in TensorBoard), and the user's own callback object after a
resume that restores callback states. A real Trainer, the example's one-weight model, CPU."""

from __future__ import annotations

import logging
import runpy
from pathlib import Path

import pytest

pytest.importorskip("transformers")
from transformers import Trainer, TrainerCallback, TrainingArguments  # noqa: E402

from evalstop_gym.integrations.hf import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "hf_trainer.py"))
KEYS = ("evalstop/stop", "evalstop/best_step", "evalstop/best_value", "evalstop/n_evals")


def settings(out: Path, **options) -> TrainingArguments:
    base = dict(output_dir=str(out), max_steps=200, per_device_train_batch_size=8,
                learning_rate=0.02, optim="sgd", lr_scheduler_type="constant", weight_decay=0.0,
                eval_strategy="steps", eval_steps=10, logging_steps=10, save_strategy="steps",
                save_steps=10, metric_for_best_model="score", greater_is_better=True,
                report_to="none", use_cpu=True, remove_unused_columns=False, disable_tqdm=True)
    return TrainingArguments(**{**base, **options})


def trainer_for(args: TrainingArguments, *callbacks) -> Trainer:
    return Trainer(model=EXAMPLE["OneWeight"](), args=args,
                   train_dataset=EXAMPLE["examples"](2.0, 8),
                   eval_dataset=EXAMPLE["examples"](1.0, 4), compute_metrics=EXAMPLE["score"],
                   callbacks=list(callbacks))


class Interrupt(TrainerCallback):
    """Ends training at `step`, as a crash or a pre-emption would (the checkpoint is saved)."""

    def __init__(self, step: int) -> None:
        self.step = step

    def on_step_end(self, args, state, control, **kwargs):
        if state.global_step == self.step:
            control.should_training_stop = True


def test_the_stop_is_a_warning_and_its_evidence_is_logged_with_the_eval(tmp_path, library_log):
    from transformers.integrations import TensorBoardCallback

    assert logging.getLogger("transformers").getEffectiveLevel() == logging.WARNING  # default
    callback = EvalStopCallback("EvalStop-2")
    trainer = trainer_for(settings(tmp_path), callback, TensorBoardCallback())
    caplog = library_log("transformers", logging.WARNING)
    trainer.train()
    stops = [r for r in caplog.records if "EvalStopCallback: stop at step" in r.getMessage()]
    assert [r.levelname for r in stops] == ["WARNING"]
    evals = [e for e in trainer.state.log_history if "eval_score" in e]
    assert all(set(KEYS) <= set(e) for e in evals)            # in trainer_state.json too
    last = evals[-1]
    assert last["evalstop/stop"] == 1.0 and last["evalstop/best_step"] == callback.best_step
    assert all(e["evalstop/stop"] == 0.0 for e in evals[:-1])
    assert last["evalstop/n_evals"] == len(evals)
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    [events] = {p.parent for p in tmp_path.rglob("events.out.tfevents.*")}
    tags = EventAccumulator(str(events)).Reload().Tags()["scalars"]
    assert all(any(t.endswith(key) for t in tags) for key in KEYS), tags   # listed after ours


def test_after_a_resume_that_restores_callbacks_the_users_object_sees_the_run(tmp_path):
    straight = EvalStopCallback("EvalStop-2")
    trainer_for(settings(tmp_path / "straight"), straight).train()
    assert straight.decision.stop
    first = EvalStopCallback("EvalStop-2")
    trainer_for(settings(tmp_path / "resumed"), first, Interrupt(30)).train()
    assert not first.decision.stop
    mine = EvalStopCallback("EvalStop-2")
    resumed = trainer_for(settings(tmp_path / "resumed",
                                   restore_callback_states_from_checkpoint=True), mine)
    resumed.train(resume_from_checkpoint=str(tmp_path / "resumed" / "checkpoint-30"))
    [stand_in] = [c for c in resumed.callback_handler.callbacks
                  if isinstance(c, EvalStopCallback)]
    assert stand_in is not mine                               # Trainer replaced it ...
    assert mine.decision is not None                          # ... and yours still sees the run
    assert mine.best_step == straight.best_step and mine.decision.stop
    assert mine.monitor.steps == straight.monitor.steps
    assert resumed.state.global_step == straight.decision.step
