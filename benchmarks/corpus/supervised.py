"""Supervised family: real training runs of MLPs on scikit-learn's digits, logged eval by eval.

The data ship inside scikit-learn (`load_digits`, 1797 8x8 images), split once with a fixed
seed into train (1000), validation (400) and test (397). Each run trains with what
practitioners use -- learning-rate schedules (constant, step, cosine, warmup then linear decay,
one-cycle), SGD with momentum or Adam/AdamW, batch sizes 16 to 256, weight decay and dropout on
or off, a small or a large MLP, sometimes on fewer or noisily labelled examples -- and at each of
its `N_EVALS` evals logs the validation accuracy (`eval_score`), the mean training loss since the
last eval (`loss`), the test accuracy (`test_score`) and both cross-entropies. Which runs
overfit is not decided here: runs are labelled afterwards from their test curve
(`evalstop_gym.traces.corpus.label_runs`), never from these knobs.

Determinism: one thread, `torch.use_deterministic_algorithms`, every random draw from a
generator seeded by the run's own seed, so a run regenerates bit for bit on the same machine and
torch version (`tests/test_corpus_regenerate.py`).
"""

from __future__ import annotations

import math
from typing import NamedTuple

import numpy as np

from .seeding import deterministic_torch

N_EVALS = 60
SPLIT_SEED = 0
SCHEDULES = ("constant", "step", "cosine", "warmup_decay", "one_cycle")
OPTIMIZERS = ("sgd_momentum", "adam", "adamw")
BATCH_SIZES = (16, 64, 256)
LABEL_NOISE = (0.0, 0.0, 0.2, 0.4)    # half the runs on clean labels
TRAIN_SIZES = (1000, 1000, 300)
BASE_LR = {"sgd_momentum": 0.05, "adam": 1e-3, "adamw": 1e-3}
WEIGHT_DECAY = {"sgd_momentum": 5e-4, "adam": 5e-4, "adamw": 5e-2}


class SupervisedRun(NamedTuple):
    """The settings of one run (all it needs to regenerate)."""

    run_id: str
    seed: int
    schedule: str
    optimizer: str
    batch_size: int
    regularised: bool      # weight decay and dropout 0.2
    large: bool            # 64-256-256-10 rather than 64-32-10
    lr_scale: float        # times the optimiser's base learning rate
    label_noise: float     # share of training labels replaced by a random class
    train_size: int
    steps: int


def run_settings(n_runs: int = 64, seed: int = 2026) -> list[SupervisedRun]:
    """The corpus's runs: every schedule x optimiser x size x regularisation cell (60), then
    more, the other knobs drawn from one seeded generator."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(n_runs):
        cell = i % 60
        runs.append(SupervisedRun(
            run_id=f"sup-{i:03d}", seed=1000 + i, schedule=SCHEDULES[cell % 5],
            optimizer=OPTIMIZERS[(cell // 5) % 3], batch_size=int(rng.choice(BATCH_SIZES)),
            regularised=bool((cell // 15) % 2), large=bool((cell // 30) % 2),
            lr_scale=float(rng.choice([0.5, 1.0, 2.0])),
            label_noise=float(rng.choice(LABEL_NOISE)), train_size=int(rng.choice(TRAIN_SIZES)),
            steps=int(rng.choice([1200, 1800]))))
    return runs


def _split() -> dict[str, tuple[np.ndarray, np.ndarray]]:
    from sklearn.datasets import load_digits

    x, y = load_digits(return_X_y=True)
    order = np.random.default_rng(SPLIT_SEED).permutation(len(y))
    x = (x / 16.0).astype(np.float32)
    parts = {"train": order[:1000], "val": order[1000:1400], "test": order[1400:]}
    return {k: (x[v], y[v].astype(np.int64)) for k, v in parts.items()}


def _lr_factor(schedule: str, step: int, steps: int) -> float:
    """The schedule's multiplier of the base rate at `step` (one-cycle is torch's own)."""
    t = step / steps
    if schedule == "step":
        return 0.1 ** (int(t >= 0.5) + int(t >= 0.75))
    if schedule == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * t))
    if schedule == "warmup_decay":
        return t / 0.1 if t < 0.1 else (1.0 - t) / 0.9
    return 1.0


def _model(run: SupervisedRun):
    import torch.nn as nn

    width, depth = (256, 2) if run.large else (32, 1)
    layers, inp = [], 64
    for _ in range(depth):
        layers += [nn.Linear(inp, width), nn.ReLU()]
        if run.regularised:
            layers.append(nn.Dropout(0.2))
        inp = width
    return nn.Sequential(*layers, nn.Linear(inp, 10))


def _optimizer(run: SupervisedRun, params):
    import torch

    lr = BASE_LR[run.optimizer] * run.lr_scale
    wd = WEIGHT_DECAY[run.optimizer] if run.regularised else 0.0
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LRScheduler
    if run.optimizer == "sgd_momentum":
        opt = torch.optim.SGD(params, lr=lr, momentum=0.9, weight_decay=wd)
    elif run.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=wd)
    else:
        opt = torch.optim.AdamW(params, lr=lr, weight_decay=wd)
    if run.schedule == "one_cycle":
        sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=run.steps)
    else:
        sched = torch.optim.lr_scheduler.LambdaLR(
            opt, lambda s: _lr_factor(run.schedule, s, run.steps))
    return opt, sched


def _evaluate(model, x, y) -> tuple[float, float]:
    """(accuracy, mean cross-entropy) on one split."""
    import torch

    model.eval()
    with torch.no_grad():
        logits = model(x)
        loss = float(torch.nn.functional.cross_entropy(logits, y))
        acc = float((logits.argmax(1) == y).double().mean())
    model.train()
    return acc, loss


def train_run(run: SupervisedRun) -> list[dict[str, object]]:
    """Train one run; one row per eval in the replay CSV format (plus the extra columns)."""
    import torch

    deterministic_torch(run.seed)
    data = _split()
    rng = np.random.default_rng(run.seed)
    x_np, y_np = data["train"][0][:run.train_size], data["train"][1][:run.train_size].copy()
    flip = rng.random(len(y_np)) < run.label_noise
    y_np[flip] = rng.integers(0, 10, int(flip.sum()))
    x, y = torch.from_numpy(x_np), torch.from_numpy(y_np)
    splits = {k: (torch.from_numpy(v[0]), torch.from_numpy(v[1])) for k, v in data.items()}
    model = _model(run)
    opt, sched = _optimizer(run, model.parameters())
    every = run.steps // N_EVALS
    gen = torch.Generator().manual_seed(run.seed)
    order, at, losses, rows = torch.randperm(len(y), generator=gen), 0, [], []
    for step in range(1, run.steps + 1):
        if at + run.batch_size > len(y):
            order, at = torch.randperm(len(y), generator=gen), 0
        idx = order[at:at + run.batch_size]
        at += run.batch_size
        loss = torch.nn.functional.cross_entropy(model(x[idx]), y[idx])
        opt.zero_grad()
        loss.backward()
        opt.step()
        sched.step()
        losses.append(loss.item())
        if step % every == 0:
            rows.append(_row(run, step, model, splits, float(np.mean(losses))))
            losses = []
    return rows


def _row(run: SupervisedRun, step: int, model, splits, train_loss: float) -> dict[str, object]:
    val_acc, val_loss = _evaluate(model, *splits["val"])
    test_acc, test_loss = _evaluate(model, *splits["test"])
    return {"job_id": run.run_id, "step": step, "eval_score": val_acc, "loss": train_loss,
            "test_score": test_acc, "val_loss": val_loss, "test_loss": test_loss,
            "family": "supervised", "max_steps": run.steps}
