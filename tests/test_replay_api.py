"""Replay as a Python API (a tidy DataFrame), its figure, and steps that name real checkpoints.

The logs are written by the real libraries in the test: a Hugging Face Trainer's
trainer_state.json (the example's one-weight model), a Lightning fit's CSVLogger metrics.csv with
ModelCheckpoint, a TensorBoard event file. CPU only, nothing downloaded.
"""

from __future__ import annotations

import logging
import runpy
from pathlib import Path

import pytest

import evalstop_gym
from evalstop_gym.benchmarks import cli
from evalstop_gym.benchmarks.detectors import replay
from evalstop_gym.online import DEFAULT_DETECTOR

EXAMPLES = Path(__file__).parents[1] / "examples"
TIDY = ["run_id", "source", "metric", "mode", "n_evals", "detector", "stopped", "stop_step",
        "best_step", "best_value", "kept_step", "kept_value", "value_at_stop", "reason", "note"]


@pytest.fixture(scope="module")
def hf_state(tmp_path_factory) -> Path:
    """The trainer_state.json of a real Trainer run that rises, peaks and falls."""
    pytest.importorskip("transformers")
    out = tmp_path_factory.mktemp("hf")
    example = runpy.run_path(str(EXAMPLES / "hf_trainer.py"))
    trainer, _ = example["main"](str(out / "run"), detector="EvalStop-2",
                                 load_best_model_at_end=False, save_strategy="no")
    path = out / "trainer_state.json"
    trainer.state.save_to_json(str(path))
    return path


def lightning_fit(root: Path, detector: str = "EvalStop-2"):
    """A real fit whose validation score peaks at w = 1 then falls; every epoch checkpointed."""
    pl = pytest.importorskip("lightning.pytorch")
    import torch
    from lightning.pytorch.callbacks import ModelCheckpoint
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    from evalstop_gym.integrations.lightning import EvalStopCallback

    class Overshoot(pl.LightningModule):
        """w is trained toward 2 while validation asks for 1: the score peaks, then falls."""

        def __init__(self) -> None:
            super().__init__()
            self.w = torch.nn.Parameter(torch.zeros(1))

        def training_step(self, batch, i):
            (x,) = batch
            return ((self.w * x - 2 * x) ** 2).mean()

        def validation_step(self, batch, i):
            self.log("val_score", -((self.w - 1) ** 2).sum())

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.02)

    data = DataLoader(TensorDataset(torch.ones(8, 1)), batch_size=2)
    checkpoints = ModelCheckpoint(dirpath=root / "ckpt", monitor="val_score", mode="max",
                                  save_top_k=-1)
    callback = EvalStopCallback("val_score", "max", detector)
    trainer = pl.Trainer(max_epochs=60, logger=CSVLogger(root, name="lightning_logs"),
                         callbacks=[callback, checkpoints], enable_progress_bar=False,
                         enable_model_summary=False, log_every_n_steps=1,
                         accelerator="cpu", devices=1)
    trainer.fit(Overshoot(), data, data)
    return trainer, callback, Path(trainer.logger.log_dir) / "metrics.csv", root / "ckpt"


@pytest.fixture(scope="module")
def lightning_run(tmp_path_factory):
    return lightning_fit(tmp_path_factory.mktemp("lightning"))


def test_the_api_returns_one_tidy_row_per_run_and_detector(hf_state, lightning_run):
    metrics_csv = lightning_run[2]
    table = evalstop_gym.replay([hf_state, metrics_csv], detectors=["EvalStop-2", "Patience-3"])
    assert set(TIDY) <= set(table.columns)
    assert len(table) == 4 and table.groupby(["run_id", "detector"]).size().eq(1).all()
    assert table["source"].tolist()[:2] == [str(hf_state)] * 2
    assert (table["n_evals"] > 3).all()
    default = evalstop_gym.replay(hf_state)
    assert default["detector"].tolist() == [DEFAULT_DETECTOR]
    compared = evalstop_gym.replay(hf_state, compare=True)
    assert compared["detector"].tolist() == list(replay.COMPARE)
    assert compared["detector"].iloc[0] == DEFAULT_DETECTOR


def test_the_kept_step_of_a_lightning_run_names_a_saved_checkpoint(lightning_run):
    trainer, callback, metrics_csv, ckpt = lightning_run
    assert callback.decision.stop and trainer.current_epoch < 59
    row = evalstop_gym.replay(metrics_csv, detectors="EvalStop-2").iloc[0]
    assert row["stopped"] and row["stop_step"] == callback.stopped_step
    assert row["kept_step"] == callback.best_step          # the live callback's, not one less
    saved = {int(p.stem.split("step=")[1]) for p in ckpt.glob("*.ckpt")}
    assert int(row["kept_step"]) in saved and int(row["best_step"]) in saved
    runs, _ = replay.read_runs([metrics_csv])
    assert replay.LIGHTNING_SHIFT in runs[0].notes         # said, not silent


def test_cli_prints_the_api_table_and_draws_a_figure(hf_state, lightning_run, tmp_path, capsys):
    import matplotlib.image as mpimg

    out = tmp_path / "replay.png"
    argv = ["replay", str(hf_state), str(lightning_run[2]), "--compare", "--plot", str(out)]
    assert cli.main(argv) == 0
    printed = capsys.readouterr().out
    table = evalstop_gym.replay([hf_state, lightning_run[2]], compare=True)
    assert replay.to_markdown(table) in printed and f"figure: {out}" in printed
    image = mpimg.imread(out)
    assert image.shape[1] >= 1200 and image.shape[0] >= 500     # a readable size
    assert not [p for p in tmp_path.iterdir() if p != out]       # written atomically


def test_one_run_draws_one_panel_with_every_marker(hf_state, tmp_path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    runs, _ = replay.read_runs([hf_state], metric="eval_score")
    table = replay.replay(runs, ["EvalStop-2", "StopAt-0.99"])
    drawn = []
    original = plt.Figure.savefig

    def keep(fig, *args, **kwargs):
        drawn.append(fig)
        return original(fig, *args, **kwargs)

    plt.Figure.savefig = keep
    try:
        replay_plot_path = tmp_path / "one.svg"
        from evalstop_gym.benchmarks.detectors.replay_plot import plot_replay

        plot_replay(runs, table, replay_plot_path)
    finally:
        plt.Figure.savefig = original
    [ax] = [a for a in drawn[0].axes if a.get_visible()]
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert any(s.startswith("best: step") for s in labels)
    assert any(s.startswith("EvalStop-2: stop at") for s in labels)
    assert "StopAt-0.99: never stopped" in labels
    assert sum(s.strip().startswith("kept: step") for s in labels) == 2
    assert runs[0].metric in ax.get_ylabel() and "higher is better" in ax.get_ylabel()


def test_a_single_run_replay_notes_a_peer_judged_detector_without_warning(hf_state, caplog):
    with caplog.at_level(logging.WARNING):
        table = evalstop_gym.replay(hf_state, detectors=["MedianPruner"])
    assert "too few have ended" in table["note"].iloc[0]
    assert not [r for r in caplog.records if "will never stop this run" in r.getMessage()]


def test_csv_inside_a_replayed_tensorboard_folder_is_refused(tmp_path, capsys):
    from torch.utils.tensorboard import SummaryWriter

    folder = tmp_path / "tb"
    with SummaryWriter(str(folder)) as writer:
        for step, value in enumerate([0.1, 0.4, 0.6, 0.5, 0.4, 0.3], start=1):
            writer.add_scalar("eval/accuracy", value, step * 10)
    [event] = list(folder.glob("events.out.tfevents.*"))
    before = event.read_bytes()
    for target in (event, folder / "table.csv", folder / "sub" / ".." / "table.csv"):
        assert cli.main(["replay", str(folder), "--csv", str(target)]) == 2
        err = capsys.readouterr().err.strip()
        assert "--csv" in err and len(err.splitlines()) == 1
    assert cli.main(["replay", str(folder), "--plot", str(folder / "fig.png")]) == 2
    assert "inside the replayed folder" in capsys.readouterr().err
    assert event.read_bytes() == before and sorted(folder.iterdir()) == [event]
    assert cli.main(["replay", str(folder), "--csv", str(tmp_path / "table.csv")]) == 0


@pytest.mark.parametrize("name, message", [
    ("fig.jpeg", "expected a file ending in .png, .pdf, .svg"),
    ("missing/fig.png", "does not exist; create it first"),
])
def test_a_bad_plot_path_is_one_line_before_replaying(hf_state, tmp_path, capsys, name, message):
    assert cli.main(["replay", str(hf_state), "--plot", str(tmp_path / name)]) == 2
    err = capsys.readouterr().err.strip()
    assert message in err and len(err.splitlines()) == 1
