"""How well a policy can read a running job's true duration off its views: the boundary's error.

A view shows a job's progress and the GPU time it has held, and `ClusterView.now` gives the clock;
with step times that drift (`evalstop_gym/sim/pace.py`) they estimate the duration, not give it.
`duration_errors` replays runs, and at every check of a running job scores three estimates a
policy could make against the hidden truth; `duration_leak_table` is BEYOND.md's table of them.
`tests/test_information_boundary.py` holds floors under the same errors.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from evalstop_gym.config import SimConfig, load_sim_config
from evalstop_gym.experiment import load_experiment
from evalstop_gym.policies import SRTFEst
from evalstop_gym.sim.cluster import CheckRequest, Cluster
from evalstop_gym.sim.pace import knot_progress
from evalstop_gym.sim.protocols import CONTINUE
from evalstop_gym.sim.rules import ROUNDING
from evalstop_gym.sim.workload import JOB_TYPES, eval_points
from evalstop_gym.workloads import generate_workload

from .tables import to_markdown

ESTIMATORS = ("mean rate", "last pace", "model-aware")


def duration_errors(config: SimConfig, seeds: Sequence[int]) -> dict[tuple[str, str], list[float]]:
    """Relative errors of what a policy can read off progress and the clock at every check of a
    running job, keyed by (job type, estimator): the training minutes so far over the progress
    (the mean rate); the minutes so far plus the rest at the last interval's pace; and that
    rest as a policy that knows the pace model (pace.py) and the type's volatility expects it,
    the log pace of each later interval a random walk from the last one's."""
    overhead = config.cluster.preemption_overhead_min
    knots = knot_progress(eval_points(config.evals.interval, config.evals.final))
    errors: dict[tuple[str, str], list[float]] = {}
    for seed in seeds:
        jobs = generate_workload(config, seed)
        cluster, base = Cluster(config, jobs), SRTFEst()
        before: dict[int, tuple[float, float]] = {}   # job id -> (progress, trained) last check
        while (req := cluster.next_decision()) is not None:
            if not isinstance(req, CheckRequest):
                cluster.answer_schedule(base.schedule(req.cluster, req.waiting, req.running))
                continue
            v = req.job
            profile = getattr(config.job_types, v.job_type)
            trained = v.attained_minutes - len(v.eval_scores) * profile.eval_minutes \
                - v.n_preemptions * overhead
            p0, t0 = before.get(v.job_id, (0.0, 0.0))
            if 0 < v.progress < 1:
                pace = (trained - t0) / (v.progress - p0)
                later = knots[knots > v.progress + ROUNDING]
                drift = np.exp(profile.step_time_volatility ** 2 * (later - v.progress) / 2)
                guesses = (trained / v.progress, trained + (1 - v.progress) * pace,
                           trained + pace * float(np.sum(np.diff([v.progress, *later]) * drift)))
                truth = jobs[v.job_id].duration
                for name, guess in zip(ESTIMATORS, guesses, strict=True):
                    errors.setdefault((v.job_type, name), []).append(abs(guess / truth - 1))
            before[v.job_id] = (v.progress, trained)
            cluster.answer_check(CONTINUE)
    return errors


def duration_leak_table(seeds: Sequence[int] | None = None) -> str:
    """Median relative error of each estimate per job type, on the default platform under
    SRTF-Est (E2's seeds by default), with the share of checks it gets within 1e-6."""
    seeds = load_experiment("e2").seeds if seeds is None else seeds
    errors = duration_errors(load_sim_config(), seeds)
    rows = []
    for job_type in JOB_TYPES:
        row: dict[str, object] = {"job type": job_type,
                                  "checks": len(errors[(job_type, ESTIMATORS[0])])}
        for name in ESTIMATORS:
            e = np.asarray(errors[(job_type, name)])
            row[f"{name}: median error"] = f"{np.median(e):.1%}"
            row[f"{name}: within 1e-6"] = f"{np.mean(e < 1e-6):.1%}"
        rows.append(row)
    return to_markdown(pd.DataFrame(rows))
