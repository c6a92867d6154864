"""Replay two real runs and draw the figure: `python docs/snippets/replay_figure.py [OUT.png]`.

The Hugging Face and Lightning examples' one-weight models are trained to the end (a detector
that never stops them early: `StopAt-0.999`), writing a `trainer_state.json` and a Lightning
`CSVLogger` `metrics.csv`; `evalstop-bench replay --compare --plot OUT` then shows where the
default detector and the comparison list would have stopped each run. The practitioner page's
figure (`docs/figures/replay_example.png`) is this script's output. Nothing is downloaded.
"""

from __future__ import annotations

import runpy
import sys
import tempfile
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TO_THE_END = "StopAt-0.999"       # never stops these runs before their last eval


def write_logs(folder: Path) -> list[Path]:
    """A Trainer's trainer_state.json and a Lightning fit's metrics.csv, written in `folder`."""
    from lightning.pytorch.loggers import CSVLogger

    from evalstop_gym.integrations.lightning import EvalStopCallback

    hf = runpy.run_path(str(EXAMPLES / "hf_trainer.py"))
    trainer, _ = hf["main"](str(folder / "hf_run"), detector=TO_THE_END,
                            load_best_model_at_end=False, save_strategy="no")
    state = folder / "hf_run" / "trainer_state.json"
    trainer.state.save_to_json(str(state))
    lightning = runpy.run_path(str(EXAMPLES / "lightning_fit.py"))
    callback = EvalStopCallback(monitor="val_score", mode="max", detector=TO_THE_END)
    fit = lightning["trainer"](callback, max_epochs=40,
                               logger=CSVLogger(folder, name="lightning_logs"))
    fit.fit(lightning["OneWeight"](), lightning["loader"](2.0), lightning["loader"](1.0))
    return [state, Path(fit.logger.log_dir) / "metrics.csv"]


def main(out: str) -> int:
    from evalstop_gym.benchmarks import cli

    with tempfile.TemporaryDirectory() as tmp:
        logs = write_logs(Path(tmp))
        return cli.main(["replay", *map(str, logs), "--compare", "--plot", out])


if __name__ == "__main__":
    sys.exit(main(sys.argv[1] if len(sys.argv) > 1 else "replay_example.png"))
