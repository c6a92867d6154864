"""Stop a Lightning fit when its validation metric turns: `python examples/lightning_fit.py`.

A one-weight model is trained toward y = 2x while validation asks for y = x, so `val_score`
rises, peaks (at w = 1) and falls. `EvalStopCallback` (shaped like `EarlyStopping`) stops the
fit two declines after the peak and names the best step. Nothing is downloaded.
"""

from __future__ import annotations

import lightning as L
import torch
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

from evalstop_gym.integrations.lightning import EvalStopCallback
from evalstop_gym.online import DEFAULT_DETECTOR


class OneWeight(L.LightningModule):
    """pred = w * x, trained with plain SGD on squared error."""

    def __init__(self, lr: float = 0.02) -> None:
        super().__init__()
        self.w = nn.Parameter(torch.zeros(1))
        self.lr = lr

    def training_step(self, batch, batch_idx):
        x, y = batch
        loss = ((self.w * x - y) ** 2).mean()
        self.log("train_loss", loss)
        return loss

    def validation_step(self, batch, batch_idx):
        x, y = batch
        self.log("val_score", -((self.w * x - y) ** 2).mean())

    def configure_optimizers(self):
        return torch.optim.SGD(self.parameters(), lr=self.lr)


def loader(target: float, n: int = 40) -> DataLoader:
    x = torch.ones(n, 1)
    return DataLoader(TensorDataset(x, target * x), batch_size=8)


def trainer(callback: EvalStopCallback, max_epochs: int = 40, extra: tuple = (),
            **options) -> L.Trainer:
    """A quiet CPU trainer; `extra` callbacks and `options` (Trainer arguments) are added."""
    quiet = {"accelerator": "cpu", "logger": False, "enable_checkpointing": False,
             "enable_progress_bar": False, "enable_model_summary": False}
    return L.Trainer(max_epochs=max_epochs, callbacks=[callback, *extra], **{**quiet, **options})


def main(detector: str = DEFAULT_DETECTOR) -> tuple[L.Trainer, EvalStopCallback]:
    callback = EvalStopCallback(monitor="val_score", mode="max", detector=detector)
    fit = trainer(callback)
    fit.fit(OneWeight(), loader(2.0), loader(1.0))
    return fit, callback


if __name__ == "__main__":
    fit, cb = main()
    print(f"stopped at step {fit.global_step} of {fit.estimated_stepping_batches} "
          f"({cb.stopping_reason_message}); best val_score {cb.decision.best_value:.4f} at step "
          f"{cb.best_step}")
