"""The compiled engine (`sim.native`) against the reference `Cluster`, run for run, bit for bit.

`simulate` picks the compiled engine on its own whenever a policy has a native form, so any
divergence would silently change published numbers: every float is compared by its `repr`
(exact, NaN equal to NaN), over platform variants chosen to reach each path of the kernel
(queueing, preemption with and without a restart, stops by each rule, dense evals, noise).
"""

from __future__ import annotations

import functools
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.config import load_sim_config
from evalstop_gym.policies import EvalStop, SRTFEst, parse_policy
from evalstop_gym.sim import native
from evalstop_gym.sim.cluster import Cluster
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.kernel import SimulationError
from evalstop_gym.sim.native import KEY_REMAINING_ESTIMATE, RULE_DECLINES
from evalstop_gym.sim.view import SchedulerJobView
from evalstop_gym.sim.workload import JOB_TYPES, generate_workload
from evalstop_gym.simulate import run_jobs, score, simulate

REPO = Path(__file__).parent.parent
DEFAULTS = REPO / "configs" / "defaults.yaml"
N_JOBS = 130

# Each variant pushes the kernel down a different path (the defaults charge a 2-minute restart).
VARIANTS: dict[str, dict[str, object]] = {
    "default": {},
    "restart-7min": {"cluster.preemption_overhead_min": 7.0},
    "no-restart": {"cluster.preemption_overhead_min": 0.0},
    "small-16gpu": {"cluster.gpus": 16},
    "heavy-256gpu": {"cluster.gpus": 256, "workload.arrival_rate_per_min": 1.5},
    "light-load": {"workload.arrival_rate_per_min": 0.05},
    "dense-evals": {"evals.interval": 0.05},
    "ar1-noise": {"noise.model": "ar1", "noise.rho": 0.5, "noise.sigma": 0.1},
    "slice-0.4": {"cluster.time_slice_share": 0.4},
    "steady-steps": {f"job_types.{t}.step_time_volatility": 0.0 for t in JOB_TYPES},
    "jittery-steps": {f"job_types.{t}.step_time_volatility": 2.0 for t in JOB_TYPES},
}
POLICIES = ("SRTF-Est", "FIFO", "SJF-Est", "EvalStop-2+SRTF-Est", "EvalStop-3+SRTF-Est",
            "EvalStop-1-best+SJF-Est", "StopAt-0.3+SRTF-Est", "StopAt-0.65+SJF-Est",
            "LossPlateau+FIFO", "LossPlateau+SRTF-Est", "LossPlateau-0.001-5+FIFO", "LossAware",
            "EvalSched", "EvalStop-2+EvalSched", "StopAt-0.5+LossAware",
            "EvalSched-Strict", "EvalStop-2+EvalSched-Strict",
            "LossPlateau+EvalSched", "DeclineTest-0.05+SRTF-Est", "Patience-2+FIFO",
            "Patience-3-0.01+SRTF-Est", "LAS", "EvalStop-2+LAS")
SEEDS = (3, 11)
JOB_FIELDS = ("state", "progress", "work", "check_work", "next_check", "epoch", "has_run",
              "first_start", "end_time", "gpu_minutes", "gpu_minutes_after_peak", "n_preemptions",
              "observations", "stop_reason", "checks", "phase", "phase_start", "kind", "speed")
TWO_KINDS = [{"name": "fast", "count": 16, "speed": 1.5},
             {"name": "slow", "count": 16, "speed": 0.75}]


@functools.cache
def platform(variant: str):
    return load_sim_config(DEFAULTS, overrides={"workload.n_jobs": N_JOBS, **VARIANTS[variant]})


@functools.cache
def run_both(variant: str, policy_name: str, seed: int
             ) -> tuple[list[Job], int, list[Job], int]:
    """(jobs, events) of the reference run, then of the compiled run, on the same workload.

    Cached so the coverage check below reuses the grid instead of running it again."""
    config = platform(variant)
    out = []
    for engine in ("python", "native"):
        policy = parse_policy(policy_name)
        policy.reset()
        jobs = generate_workload(config, seed)
        out += [jobs, run_jobs(config, jobs, policy, native.select(config, policy, engine))]
    return tuple(out)  # type: ignore[return-value]


def exact(value: object) -> str:
    """A value as compared here: `repr` is exact for floats, equal for NaNs, and shows types."""
    return repr(value)


def assert_same_jobs(expected: list[Job], got: list[Job], label: str) -> None:
    assert len(got) == len(expected), label
    for ref, nat in zip(expected, got, strict=True):
        for field in JOB_FIELDS:
            assert exact(getattr(nat, field)) == exact(getattr(ref, field)), (
                f"{label}: job {ref.job_id}.{field} differs")


@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("policy_name", POLICIES)
@pytest.mark.parametrize("variant", VARIANTS)
def test_compiled_engine_matches_reference_exactly(variant: str, policy_name: str,
                                                   seed: int) -> None:
    """Same events, job states, observations, stop reasons, records and metrics."""
    label = f"{variant} / {policy_name} / seed {seed}"
    ref_jobs, ref_events, nat_jobs, nat_events = run_both(variant, policy_name, seed)
    assert nat_events == ref_events, f"{label}: event count"
    assert_same_jobs(ref_jobs, nat_jobs, label)
    config = platform(variant)
    expected = score(config, ref_events, ref_jobs, policy_name, seed)
    got = score(config, nat_events, nat_jobs, policy_name, seed)
    for ref_rec, nat_rec in zip(expected.records, got.records, strict=True):
        assert exact(nat_rec) == exact(ref_rec), f"{label}: record of job {ref_rec['job_id']}"
    assert list(got.metrics) == list(expected.metrics)
    for name, value in expected.metrics.items():
        assert exact(got.metrics[name]) == exact(value), f"{label}: metric {name}"


def test_the_grid_preempts_restarts_and_stops_by_every_rule() -> None:
    """Equality on runs that never preempt or stop would prove little: the grid must do both."""
    preempted_with_restart = preempted_without = False
    stopped_by: set[str] = set()
    for variant in VARIANTS:
        overhead = platform(variant).cluster.preemption_overhead_min
        for policy_name in POLICIES:
            for seed in SEEDS:
                ref_jobs, _, nat_jobs, _ = run_both(variant, policy_name, seed)
                for jobs in (ref_jobs, nat_jobs):
                    if any(j.n_preemptions > 0 for j in jobs):
                        if overhead > 0:
                            preempted_with_restart = True
                        else:
                            preempted_without = True
                    if any(j.state.value == "stopped" for j in jobs):
                        detector = policy_name.rpartition("+")[0]
                        stopped_by.add(detector.split("-")[0])
    assert preempted_with_restart, "no run preempted a job that then paid a restart"
    assert preempted_without, "no run preempted a job on a cluster without restart overhead"
    assert stopped_by == {"EvalStop", "StopAt", "LossPlateau", "DeclineTest", "Patience"}


def test_compiled_engine_is_deterministic() -> None:
    config = platform("default")
    first = simulate(config, parse_policy("EvalStop-2+SRTF-Est"), 5, engine="native")
    second = simulate(config, parse_policy("EvalStop-2+SRTF-Est"), 5, engine="native")
    assert first.events == second.events
    assert exact(first.records) == exact(second.records)
    assert exact(first.metrics) == exact(second.metrics)


# ---------------------------------------------------------------------------- engine selection


class LongestRemainingFirst(SRTFEst):
    """SRTF-Est with the key turned around: the compiled SRTF key would be wrong for it."""

    def key(self, job: SchedulerJobView) -> float:
        return -job.remaining_estimate


class QuickEvalStop(EvalStop):
    """An EvalStop subclass: it may decide differently, so it has no native form."""


def test_python_engine_always_selects_the_reference() -> None:
    assert native.select(platform("default"), parse_policy("EvalStop-2+SRTF-Est"),
                         "python") is None


def test_auto_selects_the_compiled_engine_for_a_native_policy() -> None:
    spec = native.select(platform("default"), parse_policy("EvalStop-2+SRTF-Est"), "auto")
    k = {"rlhf": 2, "dpo": 3}   # EvalStop-2: k 2 on RLHF, k + 1 on DPO, LoRA unmonitored
    assert spec == native.NativeSpec(key=KEY_REMAINING_ESTIMATE, preemptive=True,
                                     rule=RULE_DECLINES,
                                     monitored=tuple(k.get(t, 0) for t in JOB_TYPES))


UNSUPPORTED = {
    "BOCPD+FIFO": (lambda: parse_policy("BOCPD-0.5+FIFO"), "no native form"),
    "CUSUM+SRTF-Est": (lambda: parse_policy("CUSUM-0-3+SRTF-Est"), "no native form"),
    "SRTF-Est subclass": (LongestRemainingFirst, "no native form"),
    "EvalStop over a subclass": (lambda: EvalStop(2) + LongestRemainingFirst(),
                                 "no native form"),
    "EvalStop subclass": (lambda: QuickEvalStop(2) + SRTFEst(), "no native form"),
    "heterogeneous cluster": (lambda: parse_policy("EvalStop-2+SRTF-Est"), "heterogeneous"),
}


@pytest.mark.parametrize("case", UNSUPPORTED)
def test_unsupported_runs_fall_back_under_auto_and_fail_under_native(case: str) -> None:
    make_policy, why = UNSUPPORTED[case]
    config = platform("default")
    if case == "heterogeneous cluster":
        config = load_sim_config(DEFAULTS, overrides={"workload.n_jobs": 20, "cluster.gpus": 32,
                                                      "cluster.kinds": TWO_KINDS})
    assert native.select(config, make_policy(), "auto") is None
    with pytest.raises(ValueError, match=why):
        native.select(config, make_policy(), "native")


def test_an_unknown_engine_names_the_allowed_ones() -> None:
    with pytest.raises(ValueError) as err:
        native.select(platform("default"), parse_policy("SRTF-Est"), "numba")
    assert all(engine in str(err.value) for engine in ("auto", "native", "python"))


def test_the_environment_variable_chooses_the_engine(monkeypatch: pytest.MonkeyPatch) -> None:
    config, policy = platform("default"), parse_policy("EvalStop-2+SRTF-Est")
    monkeypatch.delenv("EVALSTOP_ENGINE", raising=False)
    assert native.select(config, policy, None) is not None
    monkeypatch.setenv("EVALSTOP_ENGINE", "python")
    assert native.select(config, policy, None) is None


def test_simulate_refuses_native_for_an_unsupported_policy() -> None:
    with pytest.raises(ValueError, match="CUSUM"):
        simulate(platform("default"), parse_policy("CUSUM-0-3+SRTF-Est"), 0, engine="native")


# ---------------------------------------------------------------------------- errors


def test_a_job_larger_than_the_cluster_fails_like_the_reference() -> None:
    config = platform("small-16gpu")
    policy = parse_policy("SRTF-Est")
    ref_jobs, nat_jobs = generate_workload(config, 0), generate_workload(config, 0)
    ref_jobs[3].gpus = nat_jobs[3].gpus = config.cluster.gpus + 1
    with pytest.raises(SimulationError, match="job 3 needs 17 GPUs"):
        Cluster(config, ref_jobs, milestones=policy.milestones)
    with pytest.raises(SimulationError, match="job 3 needs 17 GPUs"):
        native.run(config, nat_jobs, native.select(config, policy, "native"), policy)


# ---------------------------------------------------------------------------- without numba

PURE_PYTHON_RUN = """
import json
from evalstop_gym.config import load_sim_config
from evalstop_gym.sim import native_kernel
from evalstop_gym.simulate import simulate
from evalstop_gym.policies import parse_policy
config = load_sim_config("configs/defaults.yaml", overrides={"workload.n_jobs": 30})
result = simulate(config, parse_policy("EvalStop-2+SRTF-Est"), 7, engine="native")
print(json.dumps({"kernel": type(native_kernel.advance).__name__, "events": result.events,
                  "metrics": {k: repr(v) for k, v in result.metrics.items()}}))
"""


def test_kernel_runs_as_plain_python_with_the_same_results() -> None:
    """NUMBA_DISABLE_JIT=1 keeps the kernel debuggable (pdb); it must still give the same run."""
    env = {k: v for k, v in os.environ.items() if k != "EVALSTOP_ENGINE"}
    env["NUMBA_DISABLE_JIT"] = "1"
    done = subprocess.run([sys.executable, "-c", PURE_PYTHON_RUN], env=env, cwd=REPO,
                          capture_output=True, text=True, timeout=120, check=False)
    assert done.returncode == 0, done.stderr
    got = json.loads(done.stdout.strip().splitlines()[-1])
    config = load_sim_config(DEFAULTS, overrides={"workload.n_jobs": 30})
    expected = simulate(config, parse_policy("EvalStop-2+SRTF-Est"), 7, engine="python")
    assert got["kernel"] == "function", "the kernel was compiled: the JIT was not disabled"
    assert got["events"] == expected.events
    assert got["metrics"] == {k: repr(v) for k, v in expected.metrics.items()}


# ---------------------------------------------------------------------------- information boundary

HIDDEN_NAMES = {"duration", "peak", "is_hacking", "eval_true", "curve_params", "gpu_after",
                "work", "chk_work"}


def test_the_compiled_policy_logic_takes_no_hidden_array() -> None:
    """The kernel's stand-ins for a policy (stop rules, priority keys) read only what a view shows:
    observed scores, the loss at each check, progress, arrival and the type's estimate."""
    from evalstop_gym.sim import native_kernel

    for fn in (native_kernel.decide, native_kernel.rank_of):
        code = getattr(fn, "py_func", fn).__code__
        params = set(code.co_varnames[:code.co_argcount])
        assert not params & HIDDEN_NAMES, f"{fn.__name__} takes {params & HIDDEN_NAMES}"


@pytest.mark.parametrize("policy_name", ["EvalStop-2+SRTF-Est", "StopAt-0.5+EvalSched",
                                         "LossPlateau+LossAware"])
def test_compiled_decisions_ignore_hidden_labels(policy_name: str) -> None:
    """Flip every hacking label and move every true peak and true curve: what the compiled
    engine decides (events, stops, ends, preemptions, what each job observed) stays the same."""
    config = platform("heavy-256gpu")
    runs = []
    for scramble in (False, True):
        jobs = generate_workload(config, 5)
        if scramble:
            for job in jobs:
                job.is_hacking = not job.is_hacking
                job.peak_progress = 1.0 - job.peak_progress
                job.eval_true = job.eval_true[::-1].copy()
                job.curve_params = ()
        policy = parse_policy(policy_name)
        policy.reset()
        events = native.run(config, jobs, native.select(config, policy, "native"), policy)
        runs.append((events, [(j.state, repr(j.end_time), j.n_preemptions, j.stop_reason,
                               j.observations) for j in jobs]))
    assert runs[0] == runs[1]


# ---------------------------------------------------------------------------- the resumable loop


def _outcome_arrays(n: int, n_checks: int):
    from evalstop_gym.sim import native_kernel as kernel

    return kernel.Outcome(
        np.zeros(n, np.int64), np.zeros(n), np.zeros(n, np.int64), np.zeros(n, np.int64),
        np.zeros(n, np.bool_), np.full(n, np.nan), np.full(n, np.nan), np.zeros(n), np.zeros(n),
        np.zeros(n, np.int64), np.zeros(n), np.full(n_checks, np.nan), np.full(n, np.nan))


@pytest.mark.parametrize("policy_name", ["EvalStop-2+SRTF-Est", "StopAt-0.5+FIFO",
                                         "EvalStop-3+EvalSched", "Patience-2+LossAware"])
def test_the_loop_paused_for_each_check_gives_the_same_run(policy_name: str) -> None:
    """Under RULE_AGENT `advance` pauses at every monitored check; answering each pause with the
    rule's own value (`_decide`) resumes to the very run `run` gives without pausing."""
    from evalstop_gym.sim import native_kernel as kernel

    config = platform("small-16gpu")
    policy = parse_policy(policy_name)
    spec = native.select(config, policy, "native")
    jobs = generate_workload(config, 3)
    packed = {k: v for k, v in native._pack(jobs, tuple(policy.milestones)).items()
              if k != "chk_score"}
    n, n_checks = len(jobs), len(packed["chk_prog"])
    k_by_type = np.asarray(spec.monitored, np.int64)
    platform_args = (config.cluster.gpus, float(config.cluster.preemption_overhead_min),
                     spec.key, spec.preemptive)
    tail = (k_by_type, spec.best_variant, float(spec.p), float(spec.threshold),
            int(spec.window), float(config.cluster.time_slice_share), spec.time_sliced,
            spec.rekeys_at_checks, spec.rekeys_at_passes)
    whole, whole_speed = _outcome_arrays(n, n_checks), packed["speed"].copy()
    status, events = kernel.run(*platform_args, spec.rule, *tail,
                                **{**packed, "speed": whole_speed}, **whole._asdict())
    assert status == kernel.OK
    jobs_arrays = kernel.Jobs(**{**packed, "speed": packed["speed"].copy()})
    out = _outcome_arrays(n, n_checks)
    loop = kernel.new_loop(config.cluster.gpus, packed["arrival"], packed["gpus"], n_checks)
    paused = kernel.Platform(*platform_args, kernel.RULE_AGENT, *tail)
    pauses = 0
    while (status := kernel.advance(paused, jobs_arrays, out, loop,
                                    kernel.scratch(n))) != kernel.OK:
        if status == kernel.ROOM:
            loop = kernel.with_room(loop)
            continue
        assert status == kernel.DECISION
        pauses += 1
        j = loop.int_slots[kernel.S_PENDING]
        J = jobs_arrays
        progress = kernel.reported(j, out.work[j], J.paced, J.chk_ptr, out.next_check,
                                    J.chk_prog, J.chk_work)
        loop.float_slots[kernel.F_ANSWER] = kernel.decide(
            j, spec.rule, k_by_type, spec.best_variant, float(spec.p), float(spec.threshold),
            int(spec.window), J.jtype, progress, J.chk_ptr, J.chk_idx, J.chk_loss,
            out.next_check, J.ev_ptr, J.ev_score, J.ev_prog)
    assert pauses > 50 and loop.int_slots[kernel.S_POPPED] == events
    assert np.any(out.state == kernel.STOPPED)
    for name, expected in whole._asdict().items():
        assert getattr(out, name).tobytes() == expected.tobytes(), name
    assert jobs_arrays.speed.tobytes() == whole_speed.tobytes()   # time slicing alike
