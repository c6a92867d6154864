"""The real-curve corpus: read the shipped runs, label them from their test curves, and turn
them into simulator jobs (`curves.source: corpus`).

The corpus (built by `evalstop-bench corpus build`, see `evalstop_gym.benchmarks.corpus`) ships
as one CSV per family in `data/corpus/`, in the replay format (`job_id, step, eval_score, loss`
plus named extra columns: `test_score`, `family`, `max_steps`, ...), so `evalstop-bench replay`
reads the same files. `eval_score` is what a run's evals reported (validation accuracy, or gold
reward on an eval sample); `test_score` is the held-out truth (test-split accuracy, or the exact
expected gold reward), and only the label and the scoring read it.

Labelling (`label_run`) reads the test curve only, never the knobs a run was trained with: a run
declines when its test curve, smoothed over `SMOOTH` evals, falls from its peak to its end by
more than `DECLINE_SDS` times the noise of that difference and by at least `MIN_DROP` score
units; the peak's progress is then the run's true peak (what the simulator's wasted-GPU metric
counts from). Everything else is healthy.
"""

from __future__ import annotations

import csv
import functools
import math
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..config import SimConfig
from ..sim.curves import LOSS_PARAMS, observe
from ..sim.jobs import JOB_TYPES
from ..sim.rules import ROUNDING
from ..sim.stream_draws import interleaved
from ..sim.workload_arrays import Curves, Specs

FAMILIES = ("supervised", "reward")
SMOOTH = 5            # evals in the centred moving average of the test curve
DECLINE_SDS = 3.0     # a decline must exceed this many sds of the smoothed peak-to-end drop
MIN_DROP = 0.01       # and this many score units (one point of accuracy or of gold reward)


class CorpusRun(NamedTuple):
    run_id: str
    family: str
    steps: np.ndarray
    eval_score: np.ndarray
    test_score: np.ndarray
    loss: np.ndarray
    max_steps: int
    declines: bool          # the label, from the test curve
    peak_progress: float    # progress of the smoothed test curve's peak (1.0 when healthy)
    drop: float             # smoothed peak minus smoothed end, score units


def corpus_file(family: str) -> Path:
    """The shipped CSV of one family."""
    if family not in FAMILIES:
        raise ValueError(f"corpus family {family!r} is unknown; known: {', '.join(FAMILIES)}")
    return Path(str(resources.files("evalstop_gym.traces") / "data" / "corpus" / f"{family}.csv"))


def curve_noise(scores: np.ndarray) -> float:
    """Per-eval noise sd: root mean square of second differences / sqrt 6 (trend-free)."""
    d = np.diff(np.asarray(scores, dtype=float), 2)
    return float(np.sqrt(np.mean(d * d) / 6.0)) if len(d) else 0.0


def label_run(test: np.ndarray, steps: np.ndarray, max_steps: int) -> tuple[bool, float, float]:
    """(declines, peak progress, drop) of a run from its test curve (see the module docstring)."""
    kernel = np.ones(SMOOTH)
    counts = np.convolve(np.ones(len(test)), kernel, mode="same")
    smooth = np.convolve(test, kernel, mode="same") / counts
    top = int(np.argmax(smooth))
    drop = float(smooth[top] - smooth[-1])
    noise = curve_noise(test) * math.sqrt(1.0 / counts[top] + 1.0 / counts[-1])
    declines = drop > max(DECLINE_SDS * noise, MIN_DROP)
    return declines, float(steps[top] / max_steps) if declines else 1.0, drop


def read_runs(path: Path) -> list[CorpusRun]:
    """Every run of a corpus CSV, in file order, labelled."""
    rows: dict[str, list[dict[str, str]]] = {}
    with open(path, newline="", encoding="utf-8") as fh:
        for row in csv.DictReader(fh):
            rows.setdefault(row["job_id"], []).append(row)
    runs = []
    for run_id, group in rows.items():
        col = {k: np.array([float(r[k]) for r in group]) for k in
               ("step", "eval_score", "test_score", "loss")}
        max_steps = int(group[0]["max_steps"])
        declines, peak, drop = label_run(col["test_score"], col["step"], max_steps)
        runs.append(CorpusRun(run_id, group[0]["family"], col["step"].astype(int),
                              col["eval_score"], col["test_score"], col["loss"], max_steps,
                              declines, peak, drop))
    return runs


@functools.cache
def load_family(family: str) -> tuple[CorpusRun, ...]:
    """The shipped runs of one family (read once per process)."""
    path = corpus_file(family)
    if not path.exists():
        raise FileNotFoundError(f"{path} is missing: build the corpus with "
                                "`evalstop-bench corpus build`")
    return tuple(read_runs(path))


def at_progress(run: CorpusRun, points: np.ndarray) -> np.ndarray:
    """Index of the run's eval at (or just before) each progress point: the eval a job at that
    progress would have run. A point before the first eval takes the first."""
    progress = run.steps / run.max_steps
    idx = np.searchsorted(progress, points + ROUNDING, side="right") - 1
    return np.clip(idx, 0, len(progress) - 1)


def corpus_curves(config: SimConfig, specs: Specs, points: np.ndarray, noise: np.ndarray,
                  curves_rng: np.random.Generator) -> Curves:
    """Curves of the jobs of `specs` from corpus runs of each type's family, drawn uniformly.

    Per job, in job order: a run of its family, then its four loss parameters. The job's label
    and true peak are the run's (the workload's hacking draw is not used); its evals report the
    run's own `eval_score` at the eval points (its recorded noise), plus the `noise` section's
    draw only when `curves.corpus_noise` is `added`. The training loss is drawn from the type's
    synthetic loss curve (the corpus's loss is logged beside, not used).
    """
    c = config.curves
    jtype = specs.jtype
    families = [getattr(c, f"corpus_{t}") for t in JOB_TYPES]
    runs = {t: load_family(families[t]) for t in sorted(set(jtype.tolist()))}
    n_runs = np.array([len(runs.get(t, ())) for t in range(len(JOB_TYPES))], np.int64)[jtype]
    picks, u = interleaved(curves_rng, n_runs - 1, len(LOSS_PARAMS), integer_first=True)
    loss_ranges = np.array([[getattr(getattr(config.job_types, t).loss, f) for f in LOSS_PARAMS]
                            for t in JOB_TYPES], np.float64)[jtype]
    loss_params = loss_ranges[:, :, 0] + (loss_ranges[:, :, 1] - loss_ranges[:, :, 0]) * u
    n = len(jtype)
    true, observed = np.empty((n, len(points))), np.empty((n, len(points)))
    declines, peak = np.zeros(n, np.bool_), np.ones(n)
    for t, k in sorted(set(zip(jtype.tolist(), picks.tolist(), strict=True))):
        run, rows = runs[t][k], np.flatnonzero((jtype == t) & (picks == k))
        idx = at_progress(run, points)
        true[rows], observed[rows] = run.test_score[idx], run.eval_score[idx]
        declines[rows], peak[rows] = run.declines, run.peak_progress
    if c.corpus_noise == "added":
        observed = observe(observed, noise[:n])
    family = np.array([FAMILIES.index(f) for f in families], np.float64)[jtype]
    return Curves(declines, peak,
                  np.array([getattr(config.job_types, t).eval_minutes for t in JOB_TYPES],
                           np.float64)[jtype],
                  loss_params, np.arange(n + 1, dtype=np.int64) * 2,
                  np.column_stack([family, picks.astype(np.float64)]).ravel(), true, observed)
