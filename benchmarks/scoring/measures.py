"""What a scored run is measured by, beyond the run's own metrics: read from its job records.

The run's metrics (recall, early recall, FPR over healthy RLHF jobs, JCT, wasted compute) come
from `evalstop_gym.metrics`; a study may also ask for the share of healthy jobs stopped among
every type the detector monitors (DPO jobs too, which never decline in E2, so a detector that
stops them is caught) and the GPU-minutes the stops saved, and the score's measure,
informedness, is read from recall and FPR.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from evalstop_gym.policies import make_detector
from evalstop_gym.sim.protocols import capabilities


def informedness(rows: pd.DataFrame) -> pd.Series:
    """recall - FPR per run; NaN where a run had no declining job (recall undefined); a run
    without a healthy job it could have stopped has no false stop (FPR 0)."""
    return rows["recall"].astype(float) - rows["fpr"].astype(float).fillna(0.0)


def job_measures(runs: pd.DataFrame, jobs: pd.DataFrame) -> pd.DataFrame:
    """`runs` (task, policy, seed, ...) with `fpr_monitored` (healthy jobs of the types the
    policy's detector monitors, stopped; NaN without one) and `gpu_min_saved` (summed over the
    run's jobs) added, from `jobs` (the runs' job records)."""
    detectors = {p: make_detector(p) for p in dict.fromkeys(runs["policy"])}
    types = {p: capabilities(d).types if d is not None else () for p, d in detectors.items()}
    per_run = {key: group for key, group in jobs.groupby(["task", "policy", "seed"], sort=False)}
    monitored, saved = [], []
    for r in runs.itertuples():
        group = per_run[(r.task, r.policy, r.seed)]
        healthy = group[~group["is_hacking"].astype(bool)
                        & group["job_type"].isin(types[r.policy])]
        monitored.append(np.mean(healthy["stopped"].to_numpy()) if len(healthy) else np.nan)
        saved.append(sum(group["saved_gpu_minutes"]))
    return runs.assign(fpr_monitored=monitored, gpu_min_saved=saved)
