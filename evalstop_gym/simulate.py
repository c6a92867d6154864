"""One run: a platform config, a policy and a seed in; job records and the paper's metrics out."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import ConfigError, SimConfig, check_feasible
from .experiment import platform_config
from .metrics import aggregate, job_record
from .sim import native
from .sim.cluster import Cluster
from .sim.jobs import Job
from .sim.protocols import Policy
from .workloads import generate_workload


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


def resolve_config(config: str | os.PathLike | SimConfig,
                   overrides: Mapping[str, Any] | None = None) -> SimConfig:
    """An experiment or platform name ("e2", "defaults"), a YAML path, or a SimConfig; then
    dotted overrides ({"noise.sigma": 0.05})."""
    if isinstance(config, bool) or not isinstance(config, (str, os.PathLike, SimConfig)):
        raise ConfigError(f"config={config!r}: expected an experiment or platform name "
                          f"('e2', 'defaults'), a YAML path or a SimConfig")
    if overrides is not None and not isinstance(overrides, Mapping):
        raise ConfigError(f"overrides={overrides!r}: expected a mapping of dotted keys to "
                          f"values, e.g. {{'noise.sigma': 0.05}}")
    base = platform_config(Path(config) if isinstance(config, os.PathLike) else config)
    # a SimConfig built in Python reaches here unchecked for feasibility (load_sim_config checks)
    return check_feasible(base.with_overrides(overrides) if overrides else base)


def resolve_policy(policy: str | Policy) -> Policy:
    """A policy object as given, or one built from its name ("EvalStop-2+SRTF-Est")."""
    if isinstance(policy, str):
        # Local, though the policies sit below: `import evalstop_gym` loads this module and
        # stays light (tests/test_package.py), and the policies load scipy.
        from evalstop_gym.policies import parse_policy

        return parse_policy(policy)
    if not callable(getattr(policy, "reset", None)) or not hasattr(policy, "name"):
        raise TypeError(f"policy={policy!r}: expected a policy name such as "
                        f"'EvalStop-2+SRTF-Est' or a policy object (see sim.protocols.Policy)")
    return policy


def check_seed(seed: Any) -> int:
    """`seed` as an int >= 0; anything else (None, bool, 1.5, '3', -1) is a one-line error."""
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed={seed!r}: expected a whole number >= 0 (an int; a run is "
                         f"always seeded, so the same seed gives the same workload)")
    return int(seed)


def simulate(config: str | os.PathLike | SimConfig, policy: str | Policy, seed: int,
             engine: str | None = None, isolated: bool = False) -> RunResult:
    """Run `policy` on the workload of `seed` to the end and score it.

    `config`: an experiment or platform name, a YAML path or a SimConfig (`resolve_config`);
    `policy`: a name ("EvalStop-2+SRTF-Est", "SRTF-Est") or a policy object; `seed`: int >= 0.
    `engine`: "auto" runs the compiled engine when the policy has a native form (`sim.native`),
    else the reference `Cluster`; "native" insists on the compiled one, "python" on the
    reference. Both give identical results. None reads EVALSTOP_ENGINE (default "auto").
    `isolated`: the policy decides in a child process that sees only serialised views
    (`evalstop_gym.isolation`), on the reference engine; the results are the same.
    """
    seed = check_seed(seed)
    config = resolve_config(config)
    if isolated:
        from .isolation import IsolatedPolicy

        resolve_policy(policy)   # a bad name fails here, before a process starts
        with IsolatedPolicy(policy) as remote:
            return simulate(config, remote, seed, "native" if engine == "native" else "python")
    policy = resolve_policy(policy)
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
