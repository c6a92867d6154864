"""Replay reads the logs people have: TRL DPO states, Lightning, TensorBoard, MLflow, W&B."""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import pytest

from evalstop_gym import traces
from evalstop_gym.benchmarks.detectors import replay
from evalstop_gym.traces.log_formats import detect, read_logs, read_logs_skipping
from evalstop_gym.traces.log_metrics import mode_for, pick_metric
from evalstop_gym.traces.logs import LogError, read_csv_runs, read_trainer_state

CORPUS = Path(traces.__file__).parent / "data" / "corpus"
ACC = [0.52, 0.61, 0.68, 0.71, 0.69, 0.66, 0.64]     # peaks at the 4th eval


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    replay.add_arguments(parser)
    return replay.main(parser.parse_args(list(argv)))


def dpo_state(path: Path, accuracies=ACC, **top) -> Path:
    """A trainer_state.json shaped like TRL's DPOTrainer writes it (train and eval entries)."""
    history = []
    for i, acc in enumerate(accuracies, 1):
        history.append({"epoch": i / 10, "grad_norm": 3.1, "learning_rate": 5e-7,
                        "logits/chosen": -2.7, "logits/rejected": -2.6, "logps/chosen": -310.0,
                        "logps/rejected": -330.0, "loss": 0.69 - 0.03 * i,
                        "rewards/accuracies": acc, "rewards/chosen": 0.01 * i,
                        "rewards/margins": 0.02 * i, "rewards/rejected": -0.01 * i,
                        "step": 50 * i - 10})
        entry = {"epoch": i / 10, "eval_logits/chosen": -2.71 + 0.01 * i,
                 "eval_logits/rejected": -2.65, "eval_logps/chosen": -305.0 - i,
                 "eval_logps/rejected": -332.0 - 2 * i, "eval_loss": 0.7 - 0.02 * i,
                 "eval_rewards/accuracies": acc, "eval_rewards/chosen": 0.02 * i,
                 "eval_rewards/margins": 0.03 * i, "eval_rewards/rejected": -0.01 * i,
                 "eval_runtime": 41.2, "eval_samples_per_second": 12.1,
                 "eval_steps_per_second": 1.5, "step": 50 * i}
        if acc is None:
            entry.pop("eval_rewards/accuracies")
        history.append(entry)
    state = {"best_metric": None, "epoch": 0.7, "eval_steps": 50, "global_step": 350,
             "log_history": history, "logging_steps": 10, "max_steps": 500,
             "num_train_epochs": 1, "train_batch_size": 4, **top}
    path.write_text(json.dumps(state, indent=2))
    return path


# --- 1. the metric by a documented priority, and why --------------------------------------

def test_a_trl_dpo_state_replays_its_reward_accuracy_not_its_first_key(tmp_path, capsys):
    path = dpo_state(tmp_path / "trainer_state.json")
    run = read_trainer_state(path)
    assert (run.metric, run.mode, run.max_steps) == ("eval_rewards/accuracies", "max", 500)
    assert "known task metric (accuracy" in run.notes[0]
    assert cli(str(path), "--detectors", "EvalStop-2") == 0
    out = capsys.readouterr().out
    assert "eval_rewards/accuracies, higher is better" in out
    assert "note: metric chosen by the first known task metric (accuracy; priority: accuracy, " \
           "F1, WER, CER, ROUGE, BLEU, mAP, reward, then the eval loss)" in out
    assert "eval_logits/chosen" not in out


def test_the_logs_metric_for_best_model_comes_first_then_the_reward_margin(tmp_path):
    best = dpo_state(tmp_path / "best.json", metric_for_best_model="rewards/margins")
    assert read_trainer_state(best).metric == "eval_rewards/margins"
    no_task = dpo_state(tmp_path / "loss.json", accuracies=[None] * 4)
    run = read_trainer_state(no_task)           # rewards/chosen alone is no quality measure
    assert run.metric == "eval_rewards/margins" and "(reward;" in run.notes[0]


@pytest.mark.parametrize("keys, chosen", [
    (["eval_logits/chosen", "eval_logps/rejected", "eval_loss"], "eval_loss"),
    (["eval_bleu", "eval_rouge1", "eval_f1", "eval_loss"], "eval_f1"),
    (["eval_loss", "eval_rougeLsum", "eval_bleu"], "eval_rougeLsum"),
    (["eval_loss", "eval_wer", "eval_accuracy"], "eval_accuracy"),
    (["eval_rewards/chosen", "eval_rewards/rejected", "eval_rewards/margins"],
     "eval_rewards/margins"),
    (["eval_rewards/chosen", "eval_loss"], "eval_loss"),
    (["eval_reward_std", "eval_reward"], "eval_reward"),
    (["train_acc", "val_loss", "epoch"], "val_loss"),            # a training accuracy is not it
    (["eval_runtime", "eval_custom"], "eval_custom"),
    (["eval_runtime", "eval_samples_per_second"], ""),
])
def test_metric_priority(keys, chosen):
    assert pick_metric(keys)[0] == chosen


# --- 2. plural and suffix forms are lower-is-better ----------------------------------------

@pytest.mark.parametrize("name, mode", [
    ("eval_test_losses", "min"), ("val_losses", "min"), ("eval_char_error_rate", "min"),
    ("eval_word_error_rate", "min"), ("val_perplexity", "min"), ("valLoss", "min"),
    ("eval_wers", "min"), ("eval_rewards/accuracies", "max"), ("eval_rouge2", "max"),
])
def test_direction_of_plural_and_suffix_names(name, mode):
    assert mode_for(name) == (mode, "the metric's name" if mode == "min" else "the default")


# --- 3. a log without the metric is skipped, not fatal -------------------------------------

def test_a_log_without_the_metric_is_skipped_and_named(tmp_path, capsys):
    with_it = dpo_state(tmp_path / "a.json")
    other = tmp_path / "b.csv"
    other.write_text("job_id,step,eval_score\nr,10,0.5\nr,20,0.6\n")
    runs, skipped = read_logs_skipping([with_it, other], metric="eval_rewards/margins")
    assert [r.source for r in runs] == [str(with_it)]
    assert len(skipped) == 1 and str(other) in skipped[0]
    assert "its columns are: job_id, step, eval_score" in skipped[0]
    assert cli(str(with_it), str(other), "--metric", "eval_rewards/margins") == 0
    err = [line for line in capsys.readouterr().err.splitlines() if "skipped" in line]
    assert len(err) == 1 and str(other) in err[0]


def test_every_log_without_the_metric_is_a_one_line_error(tmp_path, capsys):
    paths = [dpo_state(tmp_path / f"{n}.json") for n in "ab"]
    assert cli(*map(str, paths), "--metric", "eval_f1") == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "no log has the metric" in err and "eval_f1" in err
    assert "its eval keys are: eval_logits/chosen" in err and "1 more" in err


# --- 4. Lightning, TensorBoard, MLflow, W&B ------------------------------------------------

def test_lightning_csvlogger_metrics_csv(tmp_path):
    from lightning.pytorch.loggers import CSVLogger

    logger = CSVLogger(tmp_path, name="lightning_logs")
    for epoch, acc in enumerate(ACC):
        for s in range(epoch * 10, epoch * 10 + 10, 5):
            logger.log_metrics({"train_loss": 1.0 / (s + 1), "epoch": epoch}, step=s)
        logger.log_metrics({"val_loss": 1 - acc, "val_acc": acc, "epoch": epoch},
                           step=epoch * 10 + 9)
    logger.save()
    path = Path(logger.log_dir) / "metrics.csv"
    assert detect(path) == "lightning"
    [run] = read_logs([path])
    assert (run.run_id, run.metric, run.mode) == ("lightning_logs/version_0", "val_acc", "max")
    assert run.steps == tuple(e * 10 + 9 for e in range(len(ACC))) and run.values == tuple(ACC)
    assert run.losses[0] == pytest.approx(1 / 6)            # the latest at or before step 9
    row = replay.replay([run], ["EvalStop-2"]).iloc[0]
    assert row["stopped"] and row["kept_step"] == 40 and row["kept_value"] == 0.71
    [by_loss] = read_logs([path], metric="val_loss")
    assert by_loss.mode == "min"


def test_a_real_lightning_fit_metrics_csv(tmp_path):
    """What `Trainer.fit` writes (val rows share the step of the epoch's last train row)."""
    import lightning.pytorch as pl
    import torch
    from lightning.pytorch.loggers import CSVLogger
    from torch.utils.data import DataLoader, TensorDataset

    class Line(pl.LightningModule):
        def __init__(self):
            super().__init__()
            self.layer = torch.nn.Linear(1, 1)

        def _loss(self, batch):
            x, y = batch
            return ((self.layer(x) - y) ** 2).mean()

        def training_step(self, batch, i):
            loss = self._loss(batch)
            self.log("train_loss", loss)
            return loss

        def validation_step(self, batch, i):
            self.log("val_loss", self._loss(batch))

        def configure_optimizers(self):
            return torch.optim.SGD(self.parameters(), lr=0.1)

    torch.manual_seed(0)
    x = torch.linspace(0, 1, 16).unsqueeze(1)
    data = DataLoader(TensorDataset(x, 2 * x), batch_size=4)      # 4 steps an epoch
    logger = CSVLogger(tmp_path, name="lightning_logs")
    pl.Trainer(max_epochs=3, logger=logger, log_every_n_steps=1, enable_checkpointing=False,
               enable_progress_bar=False, enable_model_summary=False,
               accelerator="cpu").fit(Line(), data, data)
    [run] = read_logs([Path(logger.log_dir) / "metrics.csv"])
    assert (run.metric, run.mode, run.steps) == ("val_loss", "min", (3, 7, 11))
    assert not any(math.isnan(x) for x in run.losses)


def test_tensorboard_event_files_from_summarywriter(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    for name, curve in (("healthy", [0.5, 0.6, 0.7, 0.8]), ("hacked", ACC)):
        writer = SummaryWriter(str(tmp_path / "runs" / name))
        for i, acc in enumerate(curve, 1):
            writer.add_scalar("train/loss", 1.0 / i, 10 * i - 5)
            writer.add_scalar("eval/loss", 1 - acc, 10 * i)
            writer.add_scalar("eval/accuracy", acc, 10 * i)
        writer.close()
    runs = {r.run_id: r for r in read_logs([tmp_path / "runs"])}
    assert set(runs) == {"healthy", "hacked"}
    hacked = runs["hacked"]
    assert (hacked.metric, hacked.mode) == ("eval/accuracy", "max")
    assert hacked.steps == tuple(range(10, 80, 10))
    assert hacked.values == pytest.approx(ACC) and hacked.losses[1] == pytest.approx(0.5)
    [event_file] = (tmp_path / "runs" / "healthy").glob("events.out.tfevents.*")
    [single] = read_logs([event_file], metric="eval/loss")
    assert (single.run_id, single.mode) == ("healthy", "min")
    table = replay.replay(list(runs.values()), ["EvalStop-2"]).set_index("run_id")
    assert table.loc["hacked", "stopped"] and not table.loc["healthy", "stopped"]


def test_tensorboard_tensor_scalars_and_a_nan_named_by_tag_and_step(tmp_path):
    from torch.utils.tensorboard import SummaryWriter

    writer = SummaryWriter(str(tmp_path / "tf2"))          # new_style: TF2's scalar tensors
    for i, acc in enumerate(ACC, 1):
        writer.add_scalar("val/acc", acc, 10 * i, new_style=True)
    writer.close()
    [run] = read_logs([tmp_path / "tf2"])
    assert run.metric == "val/acc" and run.values == pytest.approx(ACC)
    writer = SummaryWriter(str(tmp_path / "bad"))
    writer.add_scalar("eval/loss", 0.5, 10)
    writer.add_scalar("eval/loss", float("nan"), 20)
    writer.close()
    with pytest.raises(LogError, match=r"tag 'eval/loss' step 20: eval/loss is nan"):
        read_logs([tmp_path / "bad"])


def test_mlflow_metric_history_csv(tmp_path):
    rows = ["run_id,key,value,step,timestamp"]
    for run, curve in (("a1b2", ACC), ("c3d4", [0.4, 0.5, 0.6])):
        rows += [f"{run},val_accuracy,{v},{10 * i},{1700000000 + i}"
                 for i, v in enumerate(curve, 1)]
        rows += [f"{run},train_loss,{1.0 / i},{10 * i - 5},{1700000000 + i}"
                 for i in range(1, len(curve) + 1)]
    path = tmp_path / "history.csv"
    path.write_text("\n".join(rows) + "\n")
    assert detect(path) == "mlflow"
    runs = read_logs([path])
    assert [r.run_id for r in runs] == ["a1b2", "c3d4"]
    assert runs[0].metric == "val_accuracy" and runs[0].values == tuple(ACC)
    assert runs[1].losses == (1.0, 0.5, pytest.approx(1 / 3))


def test_wandb_panel_export_csv(tmp_path):
    header = ["Step"]
    for run in ("dpo-lr1e-6", "dpo-lr5e-6"):
        header += [f"{run} - eval/rewards/accuracies", f"{run} - eval/rewards/accuracies__MIN",
                   f"{run} - eval/rewards/accuracies__MAX"]
    lines = [",".join(header)]
    for i, acc in enumerate(ACC, 1):
        other = f"{0.5 + 0.01 * i}" if i <= 5 else ""         # the second run logged less
        lines.append(f"{10 * i},{acc},{acc},{acc},{other},{other},{other}")
    path = tmp_path / "wandb_export.csv"
    path.write_text("\n".join(lines) + "\n")
    assert detect(path) == "wandb"
    runs = read_logs([path])
    assert [(r.run_id, len(r.steps)) for r in runs] == [("dpo-lr1e-6", 7), ("dpo-lr5e-6", 5)]
    assert runs[0].metric == "eval/rewards/accuracies" and runs[0].values == tuple(ACC)
    assert all(math.isnan(x) for x in runs[0].losses)


@pytest.mark.parametrize("name, content", [
    ("notes.txt", "just some words\n"), ("table.csv", "a,b\n1,2\n"),
    ("blob.bin", b"\x89PNG\r\n\x1a\n\x00\xff"),
])
def test_a_file_of_no_known_format_is_a_one_line_error_listing_the_formats(
        tmp_path, capsys, name, content):
    path = tmp_path / name
    path.write_bytes(content if isinstance(content, bytes) else content.encode())
    with pytest.raises(LogError, match="not a log replay reads .*it reads: replay CSV"):
        read_logs([path])
    assert cli(str(path)) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "TensorBoard" in err and "W&B CSV" in err


# --- 5. a replay CSV's max_steps column ----------------------------------------------------

def test_the_corpus_max_steps_column_gives_progress(capsys):
    path = CORPUS / "reward.csv"
    runs = read_csv_runs(path)
    assert all(r.max_steps is not None and r.steps[-1] <= r.max_steps for r in runs)
    assert cli(str(path), "--detectors", "EvalStop-2") == 0
    out = capsys.readouterr().out
    assert "max_steps unknown" not in out and f"max_steps {runs[0].max_steps}" in out


@pytest.mark.parametrize("cells, message", [
    ("10,0.5,100\n20,0.6,0\n", r"line 3: max_steps must be a whole number > 0, got '0'"),
    ("10,0.5,1.5\n", r"line 2: max_steps must be a whole number"),
    ("10,0.5,15\n20,0.6,15\n", r"line 3: step 20 is past the log's max_steps=15"),
])
def test_max_steps_column_is_checked(tmp_path, cells, message):
    path = tmp_path / "runs.csv"
    path.write_text("job_id,step,eval_score,max_steps\n" +
                    "".join(f"r,{c}" for c in cells.splitlines(keepends=True)))
    with pytest.raises(LogError, match=message):
        read_csv_runs(path)


def test_max_steps_sets_progress_and_completion(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("job_id,step,eval_score,max_steps\n" +
                    "".join(f"r,{10 * i},{v},100\n" for i, v in enumerate(ACC, 1)))
    [run] = read_csv_runs(path)
    assert run.max_steps == 100
    row = replay.replay([run], ["EvalStop-2"]).iloc[0]
    assert row["stopped"] and row["stop_progress"] == pytest.approx(row["stop_step"] / 100)


CARD = """---
license: apache-2.0
---
# tiny-bert-sst2

### Training hyperparameters

- learning_rate: 2e-05
- num_epochs: 8

### Training results

| Training Loss | Epoch | Step | Validation Loss | Accuracy | F1     |
|:-------------:|:-----:|:----:|:---------------:|:--------:|:------:|
| No log        | 1.0   | 50   | 0.6012          | 0.7010   | 0.6900 |
| 0.5213        | 2.0   | 100  | 0.5211          | 0.7640   | 0.7500 |
| 0.3301        | 3.0   | 150  | 0.5544          | 0.7720   | 0.7600 |
| 0.2100        | 4.0   | 200  | 0.6600          | 0.7610   | 0.7550 |


### Framework versions
"""


def test_a_model_cards_training_results_table(tmp_path):
    """A Trainer model card: columns named as trainer_state.json names them (so the task
    metric, accuracy, is chosen before the loss), `No log` as no training loss yet, and
    max_steps from num_epochs x steps per epoch."""
    card = tmp_path / "tiny-bert-sst2" / "README.md"
    card.parent.mkdir()
    card.write_text(CARD)
    assert detect(card) == "model_card"
    (run,) = read_logs([card])
    assert (run.run_id, run.metric, run.mode) == ("tiny-bert-sst2", "eval_accuracy", "max")
    assert run.steps == (50, 100, 150, 200) and run.values[2] == 0.772
    assert math.isnan(run.losses[0]) and run.losses[1] == 0.5213
    assert run.max_steps == 400
    (loss,) = read_logs([card], metric="eval_loss")
    assert loss.mode == "min" and loss.values[0] == 0.6012


def test_a_model_card_row_of_the_wrong_width_is_named(tmp_path):
    card = tmp_path / "README.md"
    card.write_text(CARD.replace("| 0.2100        | 4.0   |", "| 4.0   |"))
    with pytest.raises(LogError, match=r"README.md: line \d+: 5 cells for 6 columns"):
        read_logs([card])


def test_a_keras_csvlogger_history(tmp_path):
    """Keras' CSVLogger counts epochs from 0: epoch e is step e + 1; val_accuracy is chosen."""
    path = tmp_path / "cnn" / "history.csv"
    path.parent.mkdir()
    path.write_text("epoch,accuracy,loss,val_accuracy,val_loss\n0,0.5,1.2,0.6,1.0\n"
                    "1,0.7,0.8,0.66,0.9\n2,0.8,0.6,0.64,0.95\n")
    assert detect(path) == "keras"
    (run,) = read_logs([path])
    assert (run.metric, run.mode, run.steps, run.values) == (
        "val_accuracy", "max", (1, 2, 3), (0.6, 0.66, 0.64))
    assert run.losses == (1.2, 0.8, 0.6)


@pytest.mark.parametrize("text", [
    ",accuracy,loss,val_accuracy,val_loss\n0,0.5,1.2,0.6,1.0\n1,0.7,0.8,0.66,0.9\n"
    "2,0.8,0.6,0.64,0.95\n",
    "accuracy,loss,val_accuracy,val_loss\n0.5,1.2,0.6,1.0\n0.7,0.8,0.66,0.9\n0.8,0.6,0.64,0.95\n",
])
def test_a_pandas_dump_of_a_keras_history(tmp_path, text):
    """`pd.DataFrame(history.history).to_csv()` has no epoch column (a blank index column, or
    none): the n-th row is step n, read as a Keras history."""
    path = tmp_path / "cnn" / "training_history.csv"
    path.parent.mkdir()
    path.write_text(text)
    assert detect(path) == "keras"
    (run,) = read_logs([path])
    assert (run.metric, run.mode, run.steps, run.values) == (
        "val_accuracy", "max", (1, 2, 3), (0.6, 0.66, 0.64))
    assert run.losses == (1.2, 0.8, 0.6)


def test_a_metric_logged_once_is_no_curve(tmp_path):
    """A Lightning log's final test_loss (one value) is not taken for the curve: val_loss is."""
    path = tmp_path / "version_0" / "metrics.csv"
    path.parent.mkdir()
    path.write_text("epoch,step,test_loss,train_loss,val_loss\n0,9,,,0.5\n0,9,,0.7,\n"
                    "1,19,,,0.4\n1,19,,0.5,\n2,29,,,0.45\n2,29,0.41,,\n")
    (run,) = read_logs([path])
    assert run.metric == "val_loss" and run.values == (0.5, 0.4, 0.45)


def test_an_ultralytics_results_csv_replays_its_map(tmp_path):
    """YOLO's results.csv (epoch, train/val losses, metrics/...): mAP is its task metric."""
    path = tmp_path / "train" / "results.csv"
    path.parent.mkdir()
    path.write_text("epoch,train/box_loss,metrics/precision(B),metrics/mAP50(B),val/box_loss\n"
                    "1,1.9,0.3,0.21,1.8\n2,1.5,0.4,0.35,1.6\n3,1.3,0.5,0.33,1.7\n")
    (run,) = read_logs([path])
    assert (run.metric, run.mode, run.values) == ("metrics/mAP50(B)", "max", (0.21, 0.35, 0.33))


def test_a_corrupt_tensorboard_file_is_named_corrupt_not_empty(tmp_path, capsys):
    """Random bytes, or a valid file with a record's length damaged, are a one-line LogError
    saying the file is corrupt (the reader itself logs and reads no value: 'no values'); a last
    record cut short, as a writer still at work leaves it, still replays."""
    import os

    from torch.utils.tensorboard import SummaryWriter

    from evalstop_gym.benchmarks import cli

    with SummaryWriter(str(tmp_path / "good")) as writer:
        for i, acc in enumerate(ACC, 1):
            writer.add_scalar("eval/accuracy", acc, 10 * i)
    [good] = (tmp_path / "good").glob("events.out.tfevents.*")
    data = good.read_bytes()
    noise = tmp_path / "noise" / good.name
    noise.parent.mkdir()
    noise.write_bytes(os.urandom(4096))
    damaged = tmp_path / "damaged" / good.name
    damaged.parent.mkdir()
    second = 12 + int.from_bytes(data[:8], "little") + 4   # the second record's length
    damaged.write_bytes(data[:second] + bytes([data[second] ^ 0x40]) + data[second + 1:])
    for path in (noise, damaged, damaged.parent):
        with pytest.raises(LogError, match=r"a corrupt TensorBoard event file \(the record at "
                                           r"byte \d+ fails its length checksum\)"):
            read_logs([path])
    assert cli.main(["replay", str(damaged)]) == 2
    err = capsys.readouterr().err.strip().splitlines()[-1]
    assert "corrupt TensorBoard event file" in err and "no 'eval" not in err
    cut = tmp_path / "cut" / good.name
    cut.parent.mkdir()
    cut.write_bytes(data[:-3])
    [run] = read_logs([cut])
    assert run.values == pytest.approx(ACC[:-1])
