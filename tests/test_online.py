"""RunMonitor decides as the simulator does: every registered detector, random eval sequences.

The reference is the real simulator path: hand-made jobs whose observed evals are the given
scores run through `Cluster.run` under `detector + FIFO`, each job taking the whole cluster (so
jobs run one at a time, in arrival order, and cross-run detectors hear each end before the next
job starts). The same scores are then fed eval by eval to RunMonitors of one MonitorGroup, runs
ended in the same order. Stop index and reason must match for every job.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from evalstop_gym.online import MonitorGroup
from evalstop_gym.policies import DETECTORS, FIFO, ComposedPolicy, make_detector
from evalstop_gym.sim.cluster import Cluster
from evalstop_gym.sim.jobs import Job

# A few parameterisations per prefix; a prefix registered later is tried with its default.
# StopAt's p lies on the eval grid (n is a multiple of 10): logs hold no other check point.
NAMES = {
    "EvalStop": ["EvalStop-1", "EvalStop-2", "EvalStop-3-2", "EvalStop-2-best"],
    "StopAt": ["StopAt-0.3", "StopAt-0.5"],
    "LossPlateau": ["LossPlateau", "LossPlateau-0.001-5", "LossPlateau-0.05-2"],
    "BOCPD": ["BOCPD-0.5", "BOCPD-0.3-0.1", "BOCPD-0.7-0.2-2"],
    "CUSUM": ["CUSUM-0-3", "CUSUM-0.5-2", "CUSUM-0-2-0.05"],
    "DeclineTest": ["DeclineTest-0.05", "DeclineTest-0.3"],
    "MedianPruner": ["MedianPruner", "MedianPruner-50-2", "MedianPruner-25-1"],
    "Patience": ["Patience-1", "Patience-2", "Patience-3-0.01"],
}
ALL_NAMES = [name for prefix in DETECTORS for name in NAMES.get(prefix, [prefix])]
WORKLOADS = 4      # random workloads per detector name
JOBS = 14          # jobs per workload (MedianPruner needs 5 completed peers of a type)


def random_job(rng: np.random.Generator, job_id: int, gpus: int) -> Job:
    """A job with a random peaked (or rising) eval curve plus noise, and a random loss curve."""
    n = int(rng.choice([10, 20, 30]))
    points = np.arange(1, n + 1) / n
    peak, height = rng.uniform(0.2, 1.3), rng.uniform(0.3, 0.8)
    curve = height - rng.uniform(0.1, 1.0) * (points - peak) ** 2
    scores = curve + rng.normal(0.0, rng.choice([0.005, 0.03]), n)
    job_type = str(rng.choice(["rlhf", "rlhf", "dpo", "lora"]))
    return Job(job_id=job_id, tenant=0, job_type=job_type, gpus=gpus, arrival=job_id * 1e-3,
               duration_estimate=100.0, duration=100.0, is_hacking=False, peak_progress=1.0,
               eval_points=points, eval_true=scores, eval_observed=scores, eval_minutes=0.0,
               loss_params=(2.0, rng.uniform(0.2, 0.6), rng.uniform(0.2, 0.9), 0.05),
               curve_params=())


def simulated_stops(config, jobs: list[Job], name: str) -> list[tuple[int | None, str]]:
    """(index of the stopping eval or None, reason) per job, from the reference Cluster."""
    policy = ComposedPolicy(make_detector(name), FIFO())
    Cluster(config, jobs, milestones=policy.milestones).run(policy)
    out = []
    for job in jobs:
        n_evals = len(job.observed_scores)
        stopped = job.state.value == "stopped"
        out.append((n_evals - 1 if stopped else None, job.stop_reason if stopped else ""))
    return out


def monitored_stops(jobs: list[Job], name: str) -> list[tuple[int | None, str]]:
    """The same, from RunMonitors of one MonitorGroup fed eval by eval."""
    group = MonitorGroup(name)
    out = []
    for job in jobs:
        n = len(job.eval_points)
        monitor = group.monitor(max_steps=n, job_type=job.job_type)
        for i in range(n):
            p = float(job.eval_points[i])
            decision = monitor.update(i + 1, float(job.eval_observed[i]), loss=job.loss_at(p))
            if decision.stop:
                break
        group.end_run(monitor)
        assert monitor.reason.endswith(f"{monitor.detector.name}: {monitor.detector_reason}"
                                       if monitor.stopped else "")
        out.append((monitor.stop_index, monitor.detector_reason))
    return out


@pytest.mark.parametrize("name", ALL_NAMES)
def test_monitor_decides_as_the_simulator(small_config, name):
    rng = np.random.default_rng(zlib.crc32(name.encode()))
    stops = 0
    for _ in range(WORKLOADS):
        seeds = rng.integers(2**32, size=JOBS)
        gpus = small_config.cluster.gpus       # each job takes the whole cluster
        sim_jobs = [random_job(np.random.default_rng(s), i, gpus) for i, s in enumerate(seeds)]
        run_jobs = [random_job(np.random.default_rng(s), i, gpus) for i, s in enumerate(seeds)]
        expected = simulated_stops(small_config, sim_jobs, name)
        assert monitored_stops(run_jobs, name) == expected
        stops += sum(index is not None for index, _ in expected)
    assert stops > 0, f"{name} never stopped a job: the comparison would be vacuous"


def test_a_live_history_declares_it_folds_and_a_view_s_tuple_does_not():
    """Detectors ask `FoldableHistory` (not an attribute probe) whether to keep a statistic."""
    from evalstop_gym.online import History
    from evalstop_gym.policies.patience import evals_without_improvement
    from evalstop_gym.sim.view import FoldableHistory

    history = History()
    for score in (0.5, 0.6, 0.55, 0.58, 0.57):
        history.append(score)
    window = history.window()
    assert isinstance(window, FoldableHistory) and not isinstance(tuple(window), FoldableHistory)
    wait = evals_without_improvement
    assert wait(window, 0.0) == wait(tuple(window), 0.0) == 3
    assert "Patience.wait" in history.memo   # the live history kept the running statistic
