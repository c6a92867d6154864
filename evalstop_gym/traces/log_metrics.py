"""Which logged metric a replay judges, and which direction is better, read from names alone.

Every log format shares these rules, so a metric is chosen and oriented alike whether it came
from a trainer_state.json, a Lightning metrics.csv, TensorBoard, MLflow or W&B.

Default metric (after `--metric` and the log's `metric_for_best_model`): the first eval metric
of the highest tier of `KNOWN_METRICS` (accuracy, F1, WER, CER, ROUGE, BLEU, mAP, reward), else
the eval loss, else the first eval metric that is not bookkeeping. A TRL DPO log's first eval key,
`eval_logits/chosen`, says nothing of quality; its `eval_rewards/accuracies` does.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

LOWER_IS_BETTER = {"loss", "losses", "wer", "wers", "cer", "cers", "perplexity", "perplexities",
                   "ppl", "error", "errors", "nll", "mse", "mae", "rmse"}
LOWER_SUFFIXES = ("loss", "losses", "error", "errors", "perplexity")    # valloss, valError
# (label, token pattern, tokens that disqualify a key of that tier), in priority order
KNOWN_METRICS: tuple[tuple[str, str, frozenset[str]], ...] = (
    ("accuracy", r"acc|accuracy|accuracies", frozenset()),
    ("F1", r"f1", frozenset()),
    ("WER", r"wers?", frozenset()),
    ("CER", r"cers?", frozenset()),
    ("ROUGE", r"rouge\w*", frozenset()),
    ("BLEU", r"(sacre)?bleu", frozenset()),
    ("mAP", r"map\d*", frozenset()),     # Ultralytics' metrics/mAP50(B), COCO's map
    # a DPO log's rewards/chosen and /rejected each say nothing alone; their margin does
    ("reward", r"rewards?", frozenset({"chosen", "rejected", "std"})),
)
PRIORITY = "accuracy, F1, WER, CER, ROUGE, BLEU, mAP, reward, then the eval loss"
BOOKKEEPING_TOKENS = {"runtime", "samples", "per", "second", "epoch", "step", "steps", "lr",
                      "learning", "timestamp", "time", "compilation", "preparation", "hp",
                      "grad", "norm"}
EVAL_TOKENS = {"eval", "val", "valid", "validation", "test", "dev",
               "metrics"}    # Ultralytics' results.csv: metrics/mAP50(B) are validation metrics
TRAIN_TOKENS = {"train", "training"}
TRAIN_LOSS_KEYS = ("loss", "train_loss", "train_loss_step", "train/loss", "training_loss",
                   "train_loss_epoch", "loss/train")


class LogError(ValueError):
    """A training log that cannot be replayed; the message names the file and the row."""


def tokens(name: str) -> list[str]:
    return [t for t in re.split(r"[^a-z0-9]+", name.lower()) if t]


def lower_is_better(metric: str) -> bool:
    """By name: a loss, an error rate, a perplexity, WER/CER (plural and suffix forms too)."""
    return any(t in LOWER_IS_BETTER or t.endswith(LOWER_SUFFIXES) for t in tokens(metric))


def mode_for(metric: str, mode: str | None = None,
             greater_is_better: Any = None) -> tuple[str, str]:
    """(mode, what decided it): `mode`, else the log's flag, else the metric's name."""
    if mode is not None:
        if mode not in ("max", "min"):
            raise LogError(f"mode={mode!r}: expected 'max' or 'min'")
        return mode, "--mode"
    if isinstance(greater_is_better, bool):
        return ("max" if greater_is_better else "min"), "the log's greater_is_better"
    if lower_is_better(metric):
        return "min", "the metric's name"
    return "max", "the default"


def pick_metric(keys: Iterable[str]) -> tuple[str, str]:
    """(key, why) by the documented priority; ('', '') when no key can be a metric."""
    usable = [k for k in dict.fromkeys(keys) if not set(tokens(k)) & BOOKKEEPING_TOKENS]
    evals = [k for k in usable if set(tokens(k)) & EVAL_TOKENS] or \
        [k for k in usable if not set(tokens(k)) & TRAIN_TOKENS]
    for label, pattern, exclude in KNOWN_METRICS:
        for key in evals:
            words = tokens(key)
            if any(re.fullmatch(pattern, t) for t in words) and not exclude & set(words):
                return key, f"the first known task metric ({label}; priority: {PRIORITY})"
    for key in evals:
        if any(t in ("loss", "losses") for t in tokens(key)):
            return key, f"the eval loss (no known task metric: {PRIORITY})"
    if evals:
        return evals[0], "the first eval metric in the log (no known task metric nor eval loss)"
    return "", ""


def train_loss_key(keys: Sequence[str]) -> str:
    """The training-loss series of a log ('' if none): paired with each eval by step."""
    for name in TRAIN_LOSS_KEYS:
        if name in keys:
            return name
    return ""


def choose_metric(history: Sequence[dict[str, Any]]) -> str:
    """A trainer_state `log_history`'s default metric by `pick_metric` ('' if none)."""
    return pick_metric(k for entry in history for k in entry if k.startswith("eval_"))[0]
