"""The design of "Which detector?": its candidates, cells, budgets and targets, as data.

The recommendation is the detector with the best mean recall of the public runs' declines
(design half; simulated recall breaks ties) among those that, at every density, keep false
stops of the corpus's healthy runs and of the public design half's within
`MAX_CORPUS_FALSE_STOPS` / `MAX_PUBLIC_FALSE_STOPS`, E2's FPR within `MAX_FPR` and its AR(1) FPR
within `MAX_AR1_FPR`. The test half is reported, never chosen on.
"""

from __future__ import annotations

import pandas as pd

from .. import sections
from ..scoring.tasks import Task

DETECTORS = ("EvalStop-2", "Patience-3", "BOCPD-0.5", "DeclineTest-0.05", "TrendTest-0.05",
             "PeerPrior-0.05", "MaterialDecline-0.05", "MaterialDecline-0.02")
ORACLE = "Oracle"
BASE = "SRTF-Est"
DENSITIES = {"5%": 0.05, "10%": 0.10, "15%": 0.15, "native": 1.0 / 60.0}
NOISES = {"gauss": {"noise.model": "gaussian", "noise.sigma": 0.05},
          "ar1": {"noise.model": "ar1", "noise.rho": 0.5, "noise.sigma": 0.10},
          # fitted to the public corpus's design half (corpus noise-fit, docs/noise.md)
          "drift": {"noise.model": "drift", "noise.sigma": 0.128, "noise.drift_share": 0.983,
                    "noise.drift_scale": 0.25}}
SEEDS = (42, 123, 456, 789, 1024)
MAX_CORPUS_FALSE_STOPS = 0.02
MAX_PUBLIC_FALSE_STOPS = 0.02   # of the public corpus's healthy runs (design half), every density
MAX_AR1_FPR = 0.05
MAX_FPR = 0.01      # E2, Gaussian noise: the simulator's promise
E2_RECALL_PROMISE = 0.726   # E2, Gaussian noise, evals every 5%: the recall a default keeps
RECALL_TARGETS = {"native": 0.70, "5%": 0.70, "10%": 0.60, "15%": 0.50}   # public test half
ORACLE_FPR = 0.01   # the oracle's own row: its recall at FPR <= 1% (the detectors' bar)
PUBLIC_COLUMNS = ("design_recall", "design_false_stops", "test_recall", "test_false_stops",
                  "test_decline_avoided", "test_gain_lost", "test_drop_share")
# Detectors whose false-stop budget rests on the group's healthy peers resembling the run being
# judged (PeerPrior's: up to 2 alpha where they do not): recommended for groups of runs, never
# as the default that a lone run, or a group of unlike runs, gets without asking.
PEER_BUDGET = ("PeerPrior",)
START, END = sections.markers(sections.WHICH_DETECTOR)


def study_tasks(overrides: dict[str, object]) -> dict[tuple[str, str], Task]:
    """The simulated cells as scoring tasks, by (noise, density): E2 at each noise and eval
    density, with `overrides` (the quick run's fewer jobs) on top."""
    return {(noise, density): Task(f"e2-{noise}-{density.rstrip('%')}", "e2",
                                   {**NOISES[noise], "evals.interval": DENSITIES[density],
                                    **overrides})
            for noise in NOISES for density in DENSITIES}


def pct(x: float) -> str:
    return "n/a" if pd.isna(x) else f"{100 * x:.1f}%"
