"""One run: a platform config, a policy and a seed in; job records and the paper's metrics out."""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from .config import SimConfig
from .metrics import aggregate, job_record
from .sim import native
from .sim.cluster import Cluster
from .sim.jobs import Job
from .sim.protocols import Policy
from .sim.workload import generate_workload


@dataclass
class RunResult:
    policy: str
    seed: int
    metrics: dict[str, float]
    records: list[dict[str, Any]]
    events: int

    def job_frame(self):
        """Per-job records (with the hidden truth) as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.records)


def make_cluster(config: SimConfig, seed: int, milestones=()) -> tuple[Cluster, list[Job]]:
    jobs = generate_workload(config, seed)
    return Cluster(config, jobs, milestones=milestones), jobs


def score(config: SimConfig, events: int, jobs: list[Job], policy_name: str,
          seed: int) -> RunResult:
    """Metrics of a finished run of `events` events."""
    records = [job_record(j, config.metrics) for j in jobs]
    metrics = aggregate(records, config.cluster.gpus)
    return RunResult(policy_name, seed, metrics, records, events)


def simulate(config: SimConfig, policy: Policy, seed: int, engine: str | None = None
             ) -> RunResult:
    """Run `policy` on the workload of `seed` to the end and score it.

    `engine`: "auto" runs the compiled engine when the policy has a native form (`sim.native`),
    else the reference `Cluster`; "native" insists on the compiled one, "python" on the
    reference. Both give identical results. None reads EVALSTOP_ENGINE (default "auto").
    """
    policy.reset()
    spec = native.select(config, policy, engine)
    with collector_paused():
        jobs = generate_workload(config, seed)
        events = run_jobs(config, jobs, policy, spec)
        return score(config, events, jobs, policy.name, seed)


def run_jobs(config: SimConfig, jobs: list[Job], policy: Policy,
             spec: native.NativeSpec | None) -> int:
    """Run `jobs` to their end under `policy` (already reset), on the compiled engine if `spec` is
    given (see `native.select`), else on the reference; returns the number of events."""
    if spec is not None:
        return native.run(config, jobs, spec, policy)
    cluster = Cluster(config, jobs, milestones=policy.milestones)
    cluster.run(policy)
    return cluster.queue.popped


@contextmanager
def collector_paused() -> Iterator[None]:
    """Pause Python's cyclic garbage collector for one run, then restore it.

    A run allocates many objects (jobs, views, records) but no cycles that need the collector
    (reference counting frees them), while each full collection walks every job record: about
    10% of a 30k-job run. Results are unaffected; any leftovers are collected afterwards.
    """
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            gc.enable()
