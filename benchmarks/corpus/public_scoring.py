"""Every detector on every public run, alone, at each eval density: the real-run columns.

Each public run (`traces.public_runs`) is replayed on its own (no peers: what a practitioner's
lone run gets), at its logged density and at evals every 5, 10 and 15% of the run
(`scoring.eval_index`). Per run and detector:
- `stopped_early`: stopped before its last eval (recall on declining runs; a false stop on
  healthy ones);
- `decline_avoided`: of the evals after the best, the share the stop spared (declining runs);
- `share_lost`: of the gain since the first eval, what the stop's kept checkpoint (the best so
  far) loses against the whole run's best (healthy runs; `scoring.score_run`'s measure);
- `drop_units`, `drop_share`: how far below its best so far the run was when stopped, in the
  metric's units and as a share of what it had gained by its best.
Ambiguous runs are scored but counted in neither recall nor false stops.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalstop_gym.sim.fall import fall_since_best
from evalstop_gym.traces.public_runs import PublicRun, load_public

from .scoring import DENSITIES, end_peers, eval_index, first_stop, monitor_group


def score_public_run(name: str, run: PublicRun, interval: float | None,
                     peers: Sequence[PublicRun] = ()) -> dict[str, object]:
    """One run replayed at one density, after `peers` (at the same density) have ended."""
    group = monitor_group(name, "name a detector")
    end_peers(group, [peer.as_corpus_run() for peer in peers], interval)
    corpus_run = run.as_corpus_run()
    idx = eval_index(corpus_run, interval)
    at = first_stop(group, corpus_run, idx)
    s = run.eval_score[idx]
    n = len(idx) if at is None else at
    whole, seen = fall_since_best(s), fall_since_best(s[:n])   # over the run; up to the stop
    gain = float(s.max() - s[0])
    early = at is not None and at < len(idx)
    return {"run_id": run.run_id, "kind": run.kind, "split": run.split,
            "label": run.label.label, "detector": name, "n_evals": len(idx),
            "stopped_early": early, "stop_eval": at,
            "decline_avoided": (len(idx) - n) / whole.after if whole.after > 0 else np.nan,
            "share_lost": float(s.max() - s[:n].max()) / gain if gain > 0 else np.nan,
            "drop_units": abs(seen.latest_drop) if early else np.nan,
            "drop_share": seen.latest_drop / seen.gain if early and seen.gain > 0 else np.nan}


def score_public(detectors: Sequence[str], runs: Sequence[PublicRun] | None = None,
                 densities: dict[str, float | None] = DENSITIES,
                 grouped: bool = False) -> pd.DataFrame:
    """One row per (density, detector, run): each run alone, or (`grouped`) after the other
    runs of its repository have ended (a practitioner's earlier runs, for the detectors that
    learn from ended runs; leave one out)."""
    runs = load_public() if runs is None else runs
    def peers(run: PublicRun) -> list[PublicRun]:
        repo = run.provenance["repo"]
        return [p for p in runs if grouped and p.provenance["repo"] == repo and p is not run]
    return pd.DataFrame([{"density": density, "grouped": grouped,
                          **score_public_run(name, run, interval, peers(run))}
                         for density, interval in densities.items()
                         for name in detectors for run in runs])


def summarise_public(scores: pd.DataFrame) -> pd.DataFrame:
    """Per (split, density, detector): recall before the last eval, healthy runs stopped early,
    the share of the decline avoided, the share of gain lost by false stops, the drop at stops."""
    def one(g: pd.DataFrame) -> pd.Series:
        bad, healthy = g[g.label == "declining"], g[g.label == "healthy"]
        caught = bad[bad.stopped_early]
        return pd.Series({
            "recall": bad.stopped_early.mean() if len(bad) else np.nan,
            "false_stops": healthy.stopped_early.mean() if len(healthy) else np.nan,
            "decline_avoided": bad.decline_avoided.mean() if len(bad) else np.nan,
            "gain_lost": healthy.share_lost.mean() if len(healthy) else np.nan,
            "drop_share": caught.drop_share.median() if len(caught) else np.nan,
            "n_declining": len(bad), "n_healthy": len(healthy),
            "caught": len(caught), "stopped_healthy": int(healthy.stopped_early.sum())})
    keys = ["split", "density", "detector"]
    return scores.groupby(keys, sort=False)[list(scores.columns)].apply(one).reset_index()
