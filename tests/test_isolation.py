"""The isolated policy runner: same results as in process; a curious policy finds no hidden job."""

from __future__ import annotations

import gc
import sys

import pytest

from evalstop_gym.isolation import IsolatedPolicy, PolicyProcessError
from evalstop_gym.policies import SRTFEst
from evalstop_gym.sim.protocols import CONTINUE, Action, Allocation, StopDecision
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


class Peeker:
    """SRTF-Est that stops every job whose hidden label it manages to read."""

    name = "Peeker"
    milestones = (0.3,)

    def __init__(self) -> None:
        self.base = SRTFEst()

    def reset(self) -> None:
        self.base.reset()

    def schedule(self, cluster, waiting, running):
        return self.base.schedule(cluster, waiting, running)

    def on_job_end(self, job) -> None:
        pass

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
        plain, isolated = (tmp_path / d / name for d in ("plain", "isolated"))
        assert plain.read_bytes() == isolated.read_bytes()
