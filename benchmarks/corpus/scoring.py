"""Every detector on every corpus run, run by run, at each eval density: BEYOND.md's corpus tables.

A detector decides from one run's own evals (or, for the detectors that learn across runs, from
the other runs of the family too, fed as finished peers: leave one out, as `replay` does), so
the natural unit here is the corpus run, each scored once, rather than simulated jobs that draw
runs with replacement (those are e9's, `configs/e9.yaml`). A density keeps the run's evals at
progress 5%, 10%, 15% (`sim.workload.eval_points`, final eval included) or all of them
("native").

Each run is judged as a user's run is: its kept evals fed one by one to an `online.RunMonitor`
made by a `MonitorGroup` (the finished peers are the group's ended runs), so this study and
`replay` ask the detector the same question from the same view (`online.run_view`).

Scores per run: stopped (at any eval), stopped before its last eval, and the share of the gain
lost to the stop: the test score of the checkpoint that stop-and-save keeps (the best eval so
far) against the one kept without a stop, over that one's gain since the first eval (signed:
an early stop can keep a better test checkpoint).
"""

from __future__ import annotations

import hashlib
import json
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalstop_gym.online import MonitorGroup, RunMonitor
from evalstop_gym.policies import make_detector
from evalstop_gym.sim.checkpoint import best_eval
from evalstop_gym.sim.workload import eval_points
from evalstop_gym.traces.corpus import FAMILIES, CorpusRun, at_progress, corpus_file, load_family

from ..durable import write_csv, write_json
from ..sweep.runner import code_digest

DENSITIES: dict[str, float | None] = {"native": None, "5%": 0.05, "10%": 0.10, "15%": 0.15}


def eval_index(run: CorpusRun, interval: float | None) -> np.ndarray:
    """The run's evals kept at an eval interval (all of them when None)."""
    if interval is None:
        return np.arange(len(run.steps))
    return np.unique(at_progress(run, eval_points(interval, final=True)))


def monitor_group(name: str, what: str) -> MonitorGroup:
    """A fresh group judging runs with the detector `name`, as users' runs are judged
    (`online.MonitorGroup`); `what` ends the one-line error for a name that stops nothing."""
    detector = make_detector(name)
    if detector is None:
        raise ValueError(f"detector {name!r} stops nothing; {what}")
    return MonitorGroup(detector)


def feed(monitor: RunMonitor, run: CorpusRun, idx: np.ndarray, decide: bool) -> int | None:
    """The run's kept evals into `monitor` (a loss the run did not log is not given), asking
    the detector at each (`decide`) or only recording them; how many kept evals the run had
    when the detector stopped it, None: never (or not asked)."""
    for n, i in enumerate(idx, start=1):
        loss = float(run.loss[i])
        given = loss if math.isfinite(loss) else None
        if not decide:
            monitor.record(run.steps[i], float(run.eval_score[i]), given)
        elif monitor.update(run.steps[i], float(run.eval_score[i]), given).stop:
            return n
    return None


def end_peers(group: MonitorGroup, peers: Sequence[CorpusRun], interval: float | None) -> None:
    """Each peer's kept evals recorded and its run reported completed, for the detectors that
    learn from ended runs."""
    for peer in peers:
        monitor = group.monitor(peer.max_steps)
        feed(monitor, peer, eval_index(peer, interval), decide=False)
        group.end_run(monitor, completed=True)


def first_stop(group: MonitorGroup, run: CorpusRun, idx: np.ndarray) -> int | None:
    """How many kept evals the run had when the group's detector stopped it; None: never."""
    return feed(group.monitor(run.max_steps), run, idx, decide=True)


def kept_test_score(run: CorpusRun, idx: np.ndarray, n: int) -> float:
    """Test score of the best-eval checkpoint among the first n kept evals (stop-and-save)."""
    best = idx[:n][best_eval(run.eval_score[idx[:n]])]
    return float(run.test_score[best])


def score_run(name: str, run: CorpusRun, peers: Sequence[CorpusRun],
              interval: float | None) -> dict[str, object]:
    group = monitor_group(name, "score_run takes a detector's name")
    end_peers(group, peers, interval)   # finished peers, for the detectors that learn across runs
    idx = eval_index(run, interval)
    at = first_stop(group, run, idx)
    full = kept_test_score(run, idx, len(idx))
    gain = full - float(run.test_score[idx[0]])
    kept = full if at is None else kept_test_score(run, idx, at)
    return {"run_id": run.run_id, "family": run.family, "declines": run.declines,
            "detector": name, "stopped": at is not None,
            "stopped_early": at is not None and at < len(idx), "n_evals": len(idx),
            "share_lost": (full - kept) / gain if gain > 0 else np.nan}


def score_corpus(detectors: Sequence[str], families: Sequence[str] = FAMILIES) -> pd.DataFrame:
    """One row per (density, detector, run) over the shipped corpus."""
    rows = []
    for family in families:
        runs = load_family(family)
        for density, interval in DENSITIES.items():
            for name in detectors:
                for i, run in enumerate(runs):
                    peers = runs[:i] + runs[i + 1:]
                    rows.append({"density": density, **score_run(name, run, peers, interval)})
    return pd.DataFrame(rows)


def scores_stamp(detectors: Sequence[str], families: Sequence[str] = FAMILIES) -> dict[str, Any]:
    """What `score_corpus` depends on: the detectors, the densities, the shipped corpus files,
    the simulator's and policies' source and this module's, so stored scores made under any
    other are known to be stale."""
    def sha(path: Path) -> str:
        return hashlib.sha256(path.read_bytes()).hexdigest()[:16]
    return {"detectors": list(detectors), "densities": dict(DENSITIES),
            "corpus": {f: sha(corpus_file(f)) for f in families}, "code": code_digest(),
            "scoring": sha(Path(__file__))}


def stored_scores(path: Path, detectors: Sequence[str],
                  families: Sequence[str] = FAMILIES) -> pd.DataFrame:
    """The scores stored at `path` when its stamp (`<path stem>.json` beside it) matches what they
    would be computed from now; else scored afresh and stored, the CSV before its stamp, both
    atomically (a kill between the two leaves a stale stamp, so the next call rescores)."""
    path = Path(path)
    stamp_path = path.with_suffix(".json")
    stamp = scores_stamp(detectors, families)
    try:
        fresh = path.exists() and json.loads(stamp_path.read_text()) == stamp
    except (OSError, ValueError):
        fresh = False
    if fresh:
        return pd.read_csv(path)
    scores = score_corpus(detectors, families)
    write_csv(scores, path)
    write_json(stamp_path, stamp)
    return scores


def summarise_corpus(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (family, density, detector): false stops and share of gain lost on healthy runs,
    recall and early recall on declining runs."""
    def one(g: pd.DataFrame) -> pd.Series:
        healthy, bad = g[~g["declines"]], g[g["declines"]]
        return pd.Series({"false_stops": healthy["stopped"].mean(),
                          "share_lost": healthy["share_lost"].mean(),
                          "recall": bad["stopped"].mean() if len(bad) else np.nan,
                          "recall_early": bad["stopped_early"].mean() if len(bad) else np.nan,
                          "n_healthy": len(healthy), "n_declining": len(bad),
                          "evals": g["n_evals"].median()})
    keys = ["family", "density", "detector"]
    return scores.groupby(keys, sort=False)[list(scores.columns)].apply(one).reset_index()
