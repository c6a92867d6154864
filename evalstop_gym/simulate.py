"""One run: a platform config, a policy and a seed in; job records and the paper's metrics out."""

from __future__ import annotations

import gc
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

from .config import ConfigError, SimConfig, check_feasible
from .experiment import platform_config, split_policy, user_target
from .metrics import (
    JobTable,
    job_records,
    score_table,
    table_of_arrays,
    table_of_jobs,
    truth_of,
)
from .private_seeds import SeedSecret, check_private_config
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
    private_seed: str = ""   # fingerprint of the secret the workload seed was salted with

    def job_frame(self):
        """Per-job records (with the hidden truth) as a pandas DataFrame."""
        import pandas as pd

        return pd.DataFrame(self.records)


def make_cluster(config: SimConfig, seed: int, milestones=()) -> tuple[Cluster, list[Job]]:
    jobs = generate_workload(config, seed)
    return Cluster(config, jobs, milestones=milestones), jobs


def score(config: SimConfig, events: int, jobs: list[Job], policy_name: str,
          seed: int) -> RunResult:
    """Metrics of a finished run of `events` events, from its `Job` records."""
    return score_run(config, events, table_of_jobs(jobs), [j.stop_reason for j in jobs],
                     policy_name, seed)


def score_run(config: SimConfig, events: int, table: JobTable, stop_reasons: list[str],
              policy_name: str, seed: int) -> RunResult:
    """Metrics of a finished run of `events` events, from its jobs' table (either engine's)."""
    scored, metrics = score_table(table, config.metrics, config.cluster.gpus)
    return RunResult(policy_name, seed, metrics, job_records(table, scored, stop_reasons), events)


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
             engine: str | None = None, isolated: bool = False, *,
             timeout: float | None = None, private_seeds: bool | SeedSecret = False,
             imports: Sequence[str] = ()) -> RunResult:
    """Run `policy` on the workload of `seed` to the end and score it.

    `config`: an experiment or platform name, a YAML path or a SimConfig (`resolve_config`);
    `policy`: a name ("EvalStop-2+SRTF-Est", "SRTF-Est") or a policy object; `seed`: int >= 0.
    `engine`: "auto" runs the compiled engine when the policy has a native form (`sim.native`),
    else the reference `Cluster`; "native" insists on the compiled one, "python" on the
    reference. Both give identical results. None reads EVALSTOP_ENGINE (default "auto").
    `isolated`: the policy decides in a child process that sees only serialised views
    (`evalstop_gym.isolation`), on the reference engine; the results are the same. `timeout`:
    seconds it may take per decision (default `isolation.DEFAULT_TIMEOUT_S`), after which its
    process is killed and the run fails. `private_seeds` (isolated runs only; True or a
    `private_seeds.SeedSecret`): for untrusted policies, the workload is drawn from the seed
    salted with a secret the child never sees, in a hardened child; the result's `private_seed`
    names the secret's fingerprint. Different workloads from the plain run's, reproducible with
    the secret. `imports`: the user's files or modules whose registered names `policy` uses,
    imported first (in the isolated child too). With private seeds a user's file (`imports`,
    `mine.py:Name`) is imported only in the sandboxed child, never in this process.
    """
    seed = check_seed(seed)
    untrusted = isolated and private_seeds is not False   # its code runs in the sandbox only
    if imports and not untrusted:
        from .policies.registry import import_user_modules

        import_user_modules(imports)
    config = resolve_config(config)
    if isolated and engine == "native":
        raise ValueError("engine='native' with isolated=True: an isolated policy decides in "
                         "another process, so it runs on the reference engine; use engine="
                         "'auto' or 'python'")
    if isolated:
        from .isolation import IsolatedPolicy, check_timeout

        timeout = check_timeout(timeout)
        secret = private_secret(private_seeds, config)
        if not (untrusted and (imports or names_user_code(policy))):   # else the child's
            resolve_policy(policy)   # a bad name fails here, before a process starts
        with IsolatedPolicy(policy, timeout, sandbox=secret is not None,
                            imports=imports) as remote:
            result = run_policy(config, remote, seed, "python",
                                secret.workload_seed(seed) if secret else seed)
        result.private_seed = secret.fingerprint if secret else ""
        return result
    if timeout is not None or private_seeds is not False:
        raise ValueError(f"timeout={timeout!r}, private_seeds={private_seeds!r}: these apply to "
                         f"isolated runs only (add isolated=True)")
    return run_policy(config, policy, seed, engine, seed)


def names_user_code(policy: str | Policy) -> bool:
    """Whether building the policy name `policy` runs code from outside the package: a user's
    file or module (`mine.py:Name`) or a saved model (`model:`, unpickled)."""
    return isinstance(policy, str) and any(
        user_target(part) or part.startswith("model:") for part in split_policy(policy))


def run_policy(config: SimConfig, policy: str | Policy, seed: int, engine: str | None,
               workload_seed: int) -> RunResult:
    """`policy` on the workload drawn from `workload_seed`, scored as the run of `seed`."""
    policy = resolve_policy(policy)
    policy.reset()
    spec = native.select(config, policy, engine)
    with collector_paused():
        jobs = generate_workload(config, workload_seed)
        if spec is None:
            return score(config, run_jobs(config, jobs, policy, None), jobs, policy.name, seed)
        events, packed, out = native.execute(config, jobs, spec, tuple(policy.milestones))
        table = table_of_arrays(packed, out, truth_of(jobs))
        return score_run(config, events, table, native.stop_reasons(packed, out, policy),
                         policy.name, seed)


def private_secret(private_seeds: Any, config: SimConfig) -> SeedSecret | None:
    """The secret of a private-seed run (None for a plain one); refuses a config whose curves a
    policy could look up in the shipped corpus."""
    if private_seeds is False:
        return None
    if not (private_seeds is True or isinstance(private_seeds, SeedSecret)):
        raise ValueError(f"private_seeds={private_seeds!r}: expected True, False or a "
                         f"SeedSecret (evalstop_gym.isolation)")
    check_private_config(config)
    return SeedSecret.load() if private_seeds is True else private_seeds


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
