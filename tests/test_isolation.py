"""The isolated policy runner: same results as in process; a curious policy finds no hidden job."""

from __future__ import annotations

import gc
import os
import signal
import sys
import threading
import time
import types

import pytest
from sandboxed_policies import Base

from evalstop_gym.isolation import IsolatedPolicy, PolicyProcessError, PolicyTimeout
from evalstop_gym.sim.protocols import CONTINUE, Action, Allocation, StopDecision
from evalstop_gym.sim.view import ClusterView, SchedulerJobView
from evalstop_gym.simulate import simulate


def _same(a, b) -> bool:
    return repr(a) == repr(b)   # NaN == NaN, as text


@pytest.mark.parametrize("policy", ["EvalStop-2+SRTF-Est", "StopAt-0.65+FIFO",
                                    "MedianPruner+SRTF-Est", "CUSUM-0-3+LossAware", "EvalSched",
                                    "EvalStop-2+EvalSched"])
def test_isolated_runs_equal_in_process_runs(small_config, policy):
    """Checks, passes, milestones, ended-job views and EvalSched's time slicing all cross the
    process boundary."""
    here = simulate(small_config, policy, 11)
    there = simulate(small_config, policy, 11, isolated=True)
    assert _same(here.metrics, there.metrics)
    assert _same(here.records, there.records)


def hidden_record(job_id: int) -> object | None:
    """What a curious policy tries: any live object holding job `job_id`'s label, found through
    the garbage collector's list or the local variables of every frame that called it."""
    def holds(obj: object) -> bool:
        try:
            return getattr(obj, "job_id", None) == job_id and hasattr(obj, "is_hacking")
        except Exception:   # lazy proxies (ctypes loaders) raise on attribute access
            return False

    candidates = gc.get_objects()
    frame = sys._getframe()
    while frame is not None:
        for value in frame.f_locals.values():
            candidates.append(value)
            candidates.extend(getattr(value, "jobs", None) or ())   # a cluster's job list
        frame = frame.f_back
    return next((obj for obj in candidates if holds(obj)), None)


class Peeker(Base):
    """SRTF-Est that stops every job whose hidden label it manages to read."""

    name = "Peeker"

    def on_check(self, job, cluster) -> StopDecision:
        found = hidden_record(job.job_id)
        if found is not None and found.is_hacking:
            return StopDecision(Action.STOP, "peeked at the label")
        return CONTINUE


def peeked(result) -> int:
    return sum(r["stop_reason"] == "peeked at the label" for r in result.records)


def test_a_curious_policy_finds_labels_in_process_and_none_isolated(small_config):
    in_process = simulate(small_config, Peeker(), 5)
    hacking = sum(r["is_hacking"] for r in in_process.records)
    assert peeked(in_process) == hacking > 0, "the search works where the jobs live"
    isolated = simulate(small_config, Peeker(), 5, isolated=True)
    assert peeked(isolated) == 0 and isolated.metrics["n_stopped"] == 0


class Liar(Peeker):
    def __init__(self, answer) -> None:
        super().__init__()
        self.answer = answer

    def schedule(self, cluster, waiting, running):
        return self.answer


@pytest.mark.parametrize("answer, message", [
    ("start everything", r"schedule: AttributeError"),
    (Allocation(start=(1.5,)), r"schedule: TypeError"),
])
def test_what_the_child_returns_is_checked(small_config, answer, message):
    with pytest.raises(PolicyProcessError, match=message):
        simulate(small_config, Liar(answer), 1, isolated=True)


def test_the_child_process_ends_with_the_run():
    with IsolatedPolicy("EvalStop-2+SRTF-Est") as policy:
        assert policy.name == "EvalStop-2+SRTF-Est"
        process = policy._process
        assert process.is_alive()
    assert not process.is_alive()


def test_the_cli_isolate_flag_writes_the_same_runs(tmp_path, monkeypatch):
    from evalstop_gym.benchmarks import cli
    from evalstop_gym.config import CONFIG_DIR

    exp = tmp_path / "iso.yaml"
    exp.write_text(f"name: iso\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 15, cluster.gpus: 16}\nseeds: [4]\n"
                   "cells:\n  - {base: SRTF-Est}\n  - {base: SRTF-Est, detector: EvalStop-2}\n")
    assert cli.main(["run", str(exp), "--out", str(tmp_path / "plain")]) == 0
    assert cli.main(["run", str(exp), "--out", str(tmp_path / "isolated"), "--isolate"]) == 0
    for name in ("runs.csv", "jobs.csv"):
        plain, isolated = (tmp_path / d / "iso" / name for d in ("plain", "isolated"))
        assert plain.read_bytes() == isolated.read_bytes()


class Sleeper(Peeker):
    """Never answers a scheduling pass."""

    name = "Sleeper"

    def schedule(self, cluster, waiting, running):
        time.sleep(3600)


def test_a_policy_that_never_answers_fails_the_run_at_its_deadline(small_config):
    with pytest.raises(PolicyTimeout, match=r"^isolated policy 'Sleeper' gave no answer to "
                                            r"schedule within its deadline of 2 s") as info:
        simulate(small_config, Sleeper(), 1, isolated=True, timeout=2)
    assert "\n" not in str(info.value)


def test_the_late_policy_process_is_killed():
    with IsolatedPolicy(Sleeper(), timeout=2) as policy:
        with pytest.raises(PolicyTimeout):
            policy.schedule(ClusterView(0.0, 8, 8, 0, 0), (), ())
        assert not policy._process.is_alive()


def _view(job_id: int, n_evals: int) -> SchedulerJobView:
    scores = tuple(float(job_id + k) for k in range(n_evals))
    return SchedulerJobView(job_id, 0, "rlhf", 1, 0.0, "pending", 0.0, 1.0, scores, scores,
                            scores, 60.0, 0.0, 0)


class Freezer(Peeker):
    """Answers its first check, then stops its own process: the next request is never read."""

    name = "Freezer"

    def on_check(self, job, cluster):
        pid = os.getpid()
        threading.Thread(target=lambda: (time.sleep(0.2), os.kill(pid, signal.SIGSTOP))).start()
        return CONTINUE


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc/<pid>/stat")
def test_a_request_the_child_never_reads_also_has_a_deadline():
    """The parent blocks sending a view larger than the pipe holds: the watchdog kills it."""
    with IsolatedPolicy(Freezer(), timeout=2) as policy:
        cluster = ClusterView(0.0, 8, 8, 0, 0)
        policy.on_check(_view(0, 1), cluster)
        stat = f"/proc/{policy._process.pid}/stat"
        for _ in range(1200):   # until it is stopped (T), a minute at most
            if open(stat).read().rpartition(")")[2].split()[0] == "T":
                break
            time.sleep(0.05)
        else:
            pytest.fail("the child never stopped itself")
        waiting = tuple(_view(i, 2000) for i in range(500))   # ~9 MB, far beyond the buffer
        with pytest.raises(PolicyTimeout, match=r"'Freezer' gave no answer to schedule"):
            policy.schedule(cluster, waiting, ())
        assert not policy._process.is_alive()


class Locked(Peeker):
    name = "Locked"

    def __init__(self, hold) -> None:
        super().__init__()
        self.hold = hold


@pytest.mark.parametrize("hold", [threading.Lock(), lambda job: True], ids=["lock", "lambda"])
def test_an_unpicklable_policy_gets_a_one_line_error(small_config, hold):
    with pytest.raises(TypeError, match=r"^policy 'Locked' cannot be sent to its isolated "
                                        r"process: it must be picklable") as info:
        simulate(small_config, Locked(hold), 1, isolated=True)
    assert "\n" not in str(info.value)


def test_a_policy_class_the_child_cannot_import_is_named(small_config, monkeypatch):
    """Pickled by reference to a module that exists only in the parent."""
    module = types.ModuleType("only_in_the_parent")
    monkeypatch.setitem(sys.modules, module.__name__, module)
    Local = type("Local", (Peeker,), {"__module__": module.__name__, "name": "Local"})
    module.Local = Local
    with pytest.raises(PolicyProcessError, match=r"^isolated policy 'Local' raised in describe"
                                                 r".*importable by name") as info:
        simulate(small_config, Local(), 1, isolated=True)
    assert "\n" not in str(info.value)


@pytest.mark.parametrize("timeout", [0, -1.0, float("nan"), "5", True])
def test_a_bad_timeout_is_refused_before_a_process_starts(small_config, timeout):
    with pytest.raises(ValueError, match=r"^timeout=.*expected seconds > 0"):
        simulate(small_config, "SRTF-Est", 1, isolated=True, timeout=timeout)


def test_isolation_options_need_an_isolated_run(small_config):
    with pytest.raises(ValueError, match=r"apply to isolated runs only"):
        simulate(small_config, "SRTF-Est", 1, timeout=5)


@pytest.mark.parametrize("flags, message", [
    (["--policy-timeout", "5"], "apply to isolated runs: add --isolate"),
    (["--private-seeds"], "apply to isolated runs: add --isolate"),
    (["--isolate", "--policy-timeout", "0"], "--policy-timeout 0.0: expected seconds > 0"),
])
def test_the_isolation_flags_are_checked_before_anything_runs(tmp_path, capsys, flags, message):
    from evalstop_gym.benchmarks import cli

    out = tmp_path / "out"
    assert cli.main(["run", "e2", "--out", str(out), *flags]) == 2
    err = capsys.readouterr().err
    assert message in err and len(err.strip().splitlines()) == 1
    assert not out.exists()


def test_the_native_engine_with_isolation_is_one_line_before_any_process(small_config, capsys,
                                                                          tmp_path):
    """An isolated policy decides in another process, so its runs use the reference engine:
    engine='native' (--engine native --isolate) says so in one line, with what to use."""
    from evalstop_gym.benchmarks import cli

    with pytest.raises(ValueError, match=r"^engine='native' with isolated=True: .* use "
                                         r"engine='auto' or 'python'$"):
        simulate(small_config, "SRTF-Est", 1, "native", isolated=True)
    assert cli.main(["run", "e2", "--seeds", "1", "--engine", "native", "--isolate", "--out",
                     str(tmp_path / "out")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("evalstop-bench run: error: --engine native --isolate: ")
    assert "\n" not in err and "use --engine auto or python with --isolate" in err
    assert not (tmp_path / "out").exists()
