"""Stop a Hugging Face `Trainer` run when its eval metric turns: `python examples/hf_trainer.py`.

A one-weight model is trained toward y = 2x while the eval set asks for y = x, so its eval score
rises, peaks (at w = 1) and falls, as a reward-hacking run's real quality does. `EvalStopCallback`
stops training two declines after the peak and names the step to keep. Nothing is downloaded.
"""

from __future__ import annotations

import tempfile

import torch
from torch import nn
from transformers import Trainer, TrainingArguments
from transformers.utils import logging as hf_logging

from evalstop_gym.integrations.hf import EvalStopCallback
from evalstop_gym.online import DEFAULT_DETECTOR


class OneWeight(nn.Module):
    """pred = w * x, squared-error loss: the smallest model a Trainer will train."""

    def __init__(self) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))

    def forward(self, x: torch.Tensor, labels: torch.Tensor | None = None) -> dict:
        pred = self.w * x
        out = {"logits": pred}
        if labels is not None:
            out["loss"] = ((pred - labels) ** 2).mean()
        return out


def examples(target: float, n: int) -> list[dict[str, torch.Tensor]]:
    return [{"x": torch.tensor([1.0]), "labels": torch.tensor([target])} for _ in range(n)]


def score(pred) -> dict[str, float]:
    """Higher is better: minus the squared error on the eval set."""
    return {"score": float(-((pred.predictions - pred.label_ids) ** 2).mean())}


def main(out_dir: str, max_steps: int = 200, detector: str = DEFAULT_DETECTOR,
         patience: int | None = None, **options) -> tuple[Trainer, EvalStopCallback]:
    """Train until `detector` stops the run, then load the best checkpoint (saved at every eval,
    so the step the callback names exists). `patience` runs HF's own rule instead, as
    `EarlyStoppingCallback(early_stopping_patience=...)`; `options` override the
    TrainingArguments."""
    settings = dict(
        output_dir=out_dir, max_steps=max_steps, per_device_train_batch_size=8,
        learning_rate=0.02, optim="sgd", lr_scheduler_type="constant", weight_decay=0.0,
        eval_strategy="steps", eval_steps=10, logging_steps=10,
        save_strategy="steps", save_steps=10, save_total_limit=2, load_best_model_at_end=True,
        metric_for_best_model="score", greater_is_better=True, report_to="none",
        use_cpu=True, remove_unused_columns=False, disable_tqdm=True)
    args = TrainingArguments(**{**settings, **options})
    callback = (EvalStopCallback(detector) if patience is None else
                EvalStopCallback(early_stopping_patience=patience))
    trainer = Trainer(model=OneWeight(), args=args, train_dataset=examples(2.0, 8),
                      eval_dataset=examples(1.0, 4), compute_metrics=score,
                      callbacks=[callback])
    trainer.train()
    return trainer, callback


if __name__ == "__main__":
    hf_logging.set_verbosity_info()                 # the callback's stop is logged at INFO
    with tempfile.TemporaryDirectory() as tmp:
        trainer, cb = main(tmp)
    print(f"stopped at step {trainer.state.global_step} of {trainer.args.max_steps} "
          f"({cb.decision.reason}); best eval_score {cb.best_metric:.4f} at step {cb.best_step}")
