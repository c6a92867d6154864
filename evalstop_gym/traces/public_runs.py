"""The corpus of public training runs: real eval curves from public repositories, with provenance.

Each run is one public log (a model card's Training results table, a `trainer_state.json`, a
Lightning `metrics.csv`, a Keras history CSV) read by this package's own log readers, its metric
chosen by `log_metrics`' rule, as `replay` would choose it. `data/public/runs.csv` is in the replay
format (`evalstop-bench replay` reads it): `eval_score` is the metric oriented so that higher is
better (a loss or an error rate negated), `value` the metric in its own units.
`data/public/provenance.json` records for every run its repository, commit, path, licence (and
where the licence was read), the model it describes when the file is a model card, the kind of
training, the label and the split. `evalstop-bench corpus public` rebuilds both from snapshots of
the repositories (`benchmarks/corpus/public.py`).

The label is read in hindsight from the run's own complete curve, by `hindsight_label`; it calls
no detector. The curve is oriented (higher is better) and smoothed by a centred moving average
of `smooth_width` evals (about a twentieth of the run, odd, at least 3; fewer at the ends), so
that one lucky eval is no peak and a long run's sustained fall stands out of its noise. With the
smoothed curve's first best at b, its range R (best minus lowest), the drop D (best minus the
smoothed last eval) and the noise of that difference (the eval noise sd s --
1.4826 x the median absolute second difference / sqrt 6, or their root mean square where the
median is 0, as on a quantised metric -- times sqrt(1/c_b + 1/c_end) for the c evals averaged):
- declining: at least `MIN_AFTER` evals after b, D >= `DECLINE_SHARE` x R and D >= `DECLINE_SDS`
  noise sds (a fall a person sees: material against what the run spans, and out of its noise);
- healthy: D <= `HEALTHY_SHARE` x R or D <= `HEALTHY_SDS` noise sds (no fall, or none out of
  noise);
- ambiguous otherwise (scored by neither recall nor false stops).

The split is by repository, so no repository has runs on both sides (`split_by_repository`), and
a repository's half, once recorded (`sources.json`'s `halves`), never changes: adding runs never
moves a run that was designed on into the test half, or back. A new repository, in the order of a
hash of the names, goes to the half that keeps the two halves' counts of declining runs (weighted
twice) and of other runs closest (ties: `design`), counting the recorded ones first. `design` is
what detectors are designed on, `test` what they are reported on; the split is recorded in
`provenance.json`.
"""

from __future__ import annotations

import csv
import functools
import hashlib
import json
import math
from collections.abc import Mapping, Sequence
from importlib import resources
from pathlib import Path
from typing import Any, NamedTuple

import numpy as np

from .corpus import CorpusRun

__all__ = ["KINDS", "LABELS", "Label", "PublicRun", "hindsight_label", "load_public",
           "public_dir", "split_by_repository"]

KINDS = ("encoder-finetune", "causal-lm-finetune", "seq2seq", "speech-recognition", "vision",
         "llm-sft-dpo-rlhf", "classic-cnn-rnn")
LABELS = ("declining", "healthy", "ambiguous")
PERMISSIVE = ("mit", "apache-2.0", "bsd-2-clause", "bsd-3-clause", "isc", "cc0-1.0", "cc-by-4.0",
              "unlicense", "zlib", "afl-3.0", "artistic-2.0", "bsl-1.0", "mpl-2.0")
MIN_AFTER = 2
DECLINE_SHARE, DECLINE_SDS = 0.10, 3.0
HEALTHY_SHARE, HEALTHY_SDS = 0.03, 2.0


class Label(NamedTuple):
    label: str          # declining, healthy or ambiguous
    best_at: int        # index of the smoothed curve's first best
    drop: float         # smoothed best minus smoothed end, oriented units
    span: float         # smoothed best minus smoothed lowest, oriented units
    noise: float        # sd of that drop under the eval noise, oriented units


def robust_noise(scores: np.ndarray) -> float:
    """Per-eval noise sd from second differences: by their median absolute value, or their root
    mean square where that median is 0 (a metric that often repeats a value)."""
    d = np.diff(np.asarray(scores, dtype=float), 2)
    if not len(d):
        return 0.0
    mad = float(1.4826 * np.median(np.abs(d)) / math.sqrt(6.0))
    return mad if mad > 0 else float(np.sqrt(np.mean(d * d) / 6.0))


def smooth_width(n: int) -> int:
    """Evals the label's moving average spans: about a twentieth of the run, odd, at least 3."""
    return max(3, 2 * round(n / 40) + 1)


def hindsight_label(scores: np.ndarray, noise: float | None = None) -> Label:
    """The run's label from its whole oriented curve (see the module docstring). `noise`, when
    given, is the eval noise sd taken as known instead of read from `scores` (to ask what the
    rule calls a part of a run with the noise its whole curve shows)."""
    s = np.asarray(scores, dtype=float)
    kernel = np.ones(smooth_width(len(s)))
    counts = np.convolve(np.ones(len(s)), kernel, mode="same")
    smooth = np.convolve(s, kernel, mode="same") / counts
    b = int(np.argmax(smooth))
    span = float(smooth[b] - smooth.min())
    drop = float(smooth[b] - smooth[-1])
    sd = robust_noise(s) if noise is None else noise
    spread = sd * math.sqrt(1.0 / counts[b] + 1.0 / counts[-1])
    if len(s) - 1 - b >= MIN_AFTER and drop > 0 and drop >= DECLINE_SHARE * span \
            and drop >= DECLINE_SDS * spread:
        label = "declining"
    elif drop <= HEALTHY_SHARE * span or drop <= HEALTHY_SDS * spread:
        label = "healthy"
    else:
        label = "ambiguous"
    return Label(label, b, drop, span, spread)


def split_by_repository(runs: Sequence[tuple[str, str]],
                        recorded: Mapping[str, str] | None = None) -> dict[str, str]:
    """`design` or `test` per repository, from (repository, label) per run; a repository in
    `recorded` keeps its half (module docstring)."""
    recorded = recorded or {}
    counts: dict[str, dict[str, int]] = {}
    for repo, label in runs:
        c = counts.setdefault(repo, {"declining": 0, "runs": 0})
        c["declining"] += label == "declining"
        c["runs"] += 1
    halves = {"design": [0, 0], "test": [0, 0]}
    split = {}

    def imbalance(half: str, c: dict[str, int]) -> tuple[int, bool]:
        other = "test" if half == "design" else "design"
        d = halves[half][0] + c["declining"] - halves[other][0]
        n = halves[half][1] + c["runs"] - halves[other][1]
        return 2 * abs(d) + abs(n - d), half != "design"

    def order(repo: str) -> tuple[bool, str]:
        return repo not in recorded, hashlib.sha256(repo.lower().encode()).hexdigest()

    for repo in sorted(counts, key=order):
        half = recorded.get(repo) or min(halves, key=lambda h: imbalance(h, counts[repo]))
        split[repo] = half
        halves[half][0] += counts[repo]["declining"]
        halves[half][1] += counts[repo]["runs"]
    return split


class PublicRun(NamedTuple):
    run_id: str
    steps: np.ndarray
    eval_score: np.ndarray      # oriented: higher is better
    value: np.ndarray           # the metric in its own units
    loss: np.ndarray
    max_steps: int
    provenance: dict[str, Any]  # repo, commit, path, licence, kind, metric, mode, label, split

    @property
    def kind(self) -> str:
        return str(self.provenance["kind"])

    @property
    def split(self) -> str:
        return str(self.provenance["split"])

    @property
    def label(self) -> Label:
        return hindsight_label(self.eval_score)

    def as_corpus_run(self) -> CorpusRun:
        """The run as the corpus scorer takes it: its own eval curve is also its truth."""
        lab = self.label
        peak = float(self.steps[lab.best_at] / self.max_steps)
        return CorpusRun(self.run_id, self.kind, self.steps, self.eval_score, self.eval_score,
                         self.loss, self.max_steps, lab.label == "declining",
                         peak if lab.label == "declining" else 1.0, lab.drop)


def public_dir() -> Path:
    return Path(str(resources.files("evalstop_gym.traces") / "data" / "public"))


@functools.cache
def load_public(folder: str | None = None) -> tuple[PublicRun, ...]:
    """Every shipped public run, in file order (read once per process)."""
    root = Path(folder) if folder else public_dir()
    provenance = {p["run_id"]: p for p in
                  json.loads((root / "provenance.json").read_text(encoding="utf-8"))["runs"]}
    rows: dict[str, list[dict[str, str]]] = {}
    with open(root / "runs.csv", newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            rows.setdefault(row["job_id"], []).append(row)
    runs = []
    for run_id, group in rows.items():
        col = {k: np.array([float(r[k]) if r[k] != "" else math.nan for r in group])
               for k in ("step", "eval_score", "value", "loss")}
        runs.append(PublicRun(run_id, col["step"].astype(int), col["eval_score"], col["value"],
                              col["loss"], int(group[0]["max_steps"]), provenance[run_id]))
    return tuple(runs)
