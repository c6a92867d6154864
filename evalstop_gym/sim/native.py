"""The compiled engine: packs jobs into arrays, runs `native_kernel.run`, writes the outcome back.

`Cluster` stays the reference and the only engine for the env, heterogeneous clusters and any
policy written in Python. A policy that can be described by numbers (a priority key and a stop
rule of `rules.py`, preemptive or not) has a compiled form (`protocols.capabilities(policy).
native`, from the base's `native_key` and the detector's `native_rule()`); `simulate` then runs
it here, with results identical to `Cluster.run` bit for bit and several times faster
(PERFORMANCE.md). `engine="python"` (or EVALSTOP_ENGINE=python) forces the reference.
"""

from __future__ import annotations

import importlib.util
import math
import os
from collections.abc import Callable
from typing import Any

import numpy as np

from ..config import SimConfig
from .jobs import STATES, Job, JobState, Observation
from .kernel import SimulationError
from .packing import pack
from .protocols import Policy, capabilities
from .rules import (  # noqa: F401  (the vocabulary, re-exported for callers of the engine)
    KEY_ARRIVAL,
    KEY_DURATION_ESTIMATE,
    KEY_EVAL_DEMOTE,
    KEY_EVAL_SLICE,
    KEY_LOSS_IMPROVEMENT,
    KEY_REMAINING_ESTIMATE,
    RULE_DECLINE_TEST,
    RULE_DECLINES,
    RULE_LOSS_PLATEAU,
    RULE_NONE,
    RULE_PROGRESS,
    NativeSpec,
    disagreement,
)
from .transitions import COMPLETION
from .workload import JOB_TYPES
from .workload_arrays import arrays_of

AVAILABLE = importlib.util.find_spec("numba") is not None   # imported on first compiled run
ENGINES = ("auto", "native", "python")


def select(config: SimConfig, policy: Policy, engine: str | None = None) -> NativeSpec | None:
    """The spec to run `policy` natively, or None for the reference engine.

    `engine`: "auto" (native when possible), "native" (an error when not possible) or "python";
    None reads EVALSTOP_ENGINE, default "auto". A policy whose compiled form would do other than
    it declares (`rules.disagreement`: a time-sliced base whose key does not slice) is refused
    under either, never run differently.
    """
    if engine is None:
        engine = os.environ.get("EVALSTOP_ENGINE", "auto")
    if engine not in ENGINES:
        raise ValueError(f"engine must be one of {', '.join(ENGINES)}; got {engine!r}")
    if engine == "python":
        return None
    spec = capabilities(policy).native
    if config.cluster.kinds:
        why = "heterogeneous clusters (cluster.kinds) run on the reference engine only"
    elif spec is None:
        why = f"policy {policy.name!r} has no native form (protocols.CompiledKey, CompiledRule)"
    elif disagreement(spec):
        raise ValueError(f"policy {policy.name!r} has a native form that disagrees with it: "
                         f"{disagreement(spec)}")
    elif not AVAILABLE:
        why = "numba is not installed"
    else:
        return spec
    if engine == "native":
        raise ValueError(f"engine='native' cannot run this: {why}")
    return None


def run(config: SimConfig, jobs: list[Job], spec: NativeSpec, policy: Policy) -> int:
    """Run `jobs` to their end under `spec`, leaving each job as `Cluster.run` would; returns the
    number of events processed. Stop reasons come from the detector's `reason(job_type, value)`,
    with the value the compiled rule reports."""
    events, packed, out = execute(config, jobs, spec, tuple(policy.milestones))
    _unpack(jobs, packed, out, stop_reasons(packed, out, policy))
    return events


def execute(config: SimConfig, jobs: list[Job], spec: NativeSpec, milestones: tuple[float, ...]
            ) -> tuple[int, dict[str, Any], dict[str, np.ndarray]]:
    """Run `jobs` to their end under `spec` (checking in at the policy's `milestones` too),
    leaving their outcome in arrays: the number of events, the packed arrays (`_pack`) and the
    kernel's outcome arrays by `Outcome`'s field names. The records get their checks only."""
    from . import native_kernel as kernel

    total = config.cluster.gpus
    if any(job.job_id != i for i, job in enumerate(jobs)):
        raise SimulationError("jobs must be numbered 0..n-1 in list order")
    for job in jobs:
        if job.gpus < 1:
            raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs; at least 1")
        if job.gpus > total:
            raise SimulationError(f"job {job.job_id} needs {job.gpus} GPUs; the cluster has "
                                  f"{total} of one kind")
    packed = _pack(jobs, milestones)
    n = len(jobs)
    out = {"state": np.zeros(n, np.int64), "work": np.zeros(n), "next_check": np.zeros(n,
           np.int64), "epoch": np.zeros(n, np.int64), "has_run": np.zeros(n, np.bool_),
           "first_start": np.full(n, np.nan), "end_time": np.full(n, np.nan),
           "gpu_min": np.zeros(n), "gpu_after": np.zeros(n), "n_pre": np.zeros(n, np.int64),
           "phase_start": np.zeros(n),
           "chk_time": np.full(len(packed["chk_prog"]), np.nan), "stop_value": np.full(n, np.nan)}
    status, events = kernel.run(
        total, float(config.cluster.preemption_overhead_min), spec.key, spec.preemptive,
        spec.rule, np.asarray(spec.monitored, np.int64), spec.best_variant, float(spec.p),
        float(spec.threshold), int(spec.window), float(config.cluster.time_slice_share),
        spec.time_sliced, spec.rekeys_at_checks, spec.rekeys_at_passes,
        **{k: v for k, v in packed.items() if k != "chk_score"}, **out)
    if status == kernel.ERR_LEFT_WAITING:
        raise SimulationError("jobs left waiting on an idle cluster: the scheduler never "
                              "started them")
    if status == kernel.ERR_GPUS:
        raise SimulationError("GPU accounting broke: a pass started more than the free GPUs")
    if status != kernel.OK:
        raise SimulationError(f"native engine failed with status {status}")
    return int(events), packed, out


def _pack(jobs: list[Job], milestones: tuple[float, ...]) -> dict[str, Any]:
    """Jobs as arrays named as `native_kernel.run`'s parameters (`packing.pack` of the jobs'
    arrays, at each job's speed); each job gets its checks and their work, as Cluster gives
    each job."""
    packed = pack(arrays_of(jobs), milestones)
    packed["speed"] = np.array([j.speed for j in jobs], np.float64)
    attach_checks(jobs, packed)
    return packed


def attach_checks(jobs: list[Job], packed: dict[str, Any]) -> None:
    """Each job's own list of checks and the work at each, from its span of the packed arrays
    (what `_unpack` and the job's reported progress read)."""
    ptr = packed["chk_ptr"].tolist()
    prog, idx, work = (packed[k].tolist() for k in ("chk_prog", "chk_idx", "chk_work"))
    for k, job in enumerate(jobs):
        lo, hi = ptr[k], ptr[k + 1]
        job.checks = list(zip(prog[lo:hi], idx[lo:hi], strict=True))
        job.check_work = work[lo:hi]


def _no_stops(job_type: str, value: float) -> str:
    raise SimulationError("the compiled rule stopped a job of a policy with no stop rule")


def stop_reasons(packed: dict[str, Any], out: dict[str, np.ndarray], policy: Policy
                 ) -> list[str]:
    """Each job's stop reason ("" if not stopped): the detector's `reason(job_type, value)` with
    the value the compiled rule reported."""
    reason: Callable[[str, float], str] = capabilities(policy).reason or _no_stops
    stopped = STATES.index(JobState.STOPPED)
    reasons: dict[tuple[str, float], str] = {}
    found = [""] * len(out["state"])
    for j in np.flatnonzero(out["state"] == stopped).tolist():
        key = (JOB_TYPES[int(packed["jtype"][j])], float(out["stop_value"][j]))
        if key not in reasons:
            reasons[key] = reason(*key)
        found[j] = reasons[key]
    return found


def _unpack(jobs: list[Job], packed: dict[str, Any], out: dict[str, np.ndarray],
            reasons: list[str]) -> None:
    """Write the kernel's results (and the stop reasons) back into the job records, as
    `Cluster` leaves them."""
    ptr, idx = packed["chk_ptr"].tolist(), packed["chk_idx"].tolist()
    progress, time, loss = (packed["chk_prog"].tolist(), out["chk_time"].tolist(),
                            packed["chk_loss"].tolist())
    score = [s if i >= 0 else None for s, i in zip(packed["chk_score"].tolist(), idx, strict=True)]
    for job, speed in zip(jobs, packed["speed"].tolist(), strict=True):  # time slicing sets it
        job.speed = speed
    columns = zip(jobs, ptr, reasons, *(out[k].tolist() for k in (   # ptr: n + 1 offsets
        "state", "work", "next_check", "epoch", "has_run", "first_start", "end_time",
        "gpu_min", "gpu_after", "n_pre", "phase_start")), strict=False)
    for (job, first, stop_reason, state, work, next_check, epoch, has_run, first_start,
         end_time, gpu_min, gpu_after, n_pre, phase_start) in columns:
        job.state = STATES[state]
        job.work, job.next_check, job.epoch, job.has_run = work, next_check, epoch, has_run
        job.progress = job.reported_progress(work)
        job.first_start = None if math.isnan(first_start) else first_start
        job.end_time = None if math.isnan(end_time) else end_time
        job.gpu_minutes, job.gpu_minutes_after_peak = gpu_min, gpu_after
        job.n_preemptions, job.phase_start = n_pre, phase_start
        last = first + next_check           # the checks passed; completion adds no observation
        if last > first and idx[last - 1] == COMPLETION:
            last -= 1
        job.observations = list(map(Observation._make, zip(
            progress[first:last], time[first:last], loss[first:last], score[first:last],
            strict=True)))
        if stop_reason:
            job.stop_reason = stop_reason
