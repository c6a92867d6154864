"""A compiled form does what its policy declares, or the compiled engine refuses it.

The kernel time-slices and re-keys at checks because `NativeSpec` says so, and `capabilities`
fills those words from the policy's own declarations (`time_sliced`, `key_rises_at_checks`); a
key that would slice or re-key otherwise is refused in one line, never run differently.
"""

from __future__ import annotations

import pytest
from test_native import DEFAULTS, assert_same_jobs

from evalstop_gym.config import load_sim_config
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.policies import EvalSched, SRTFEst
from evalstop_gym.policies.base import PriorityScheduler
from evalstop_gym.policies.eval_sched import past_peak
from evalstop_gym.sim import native
from evalstop_gym.sim.protocols import capabilities
from evalstop_gym.sim.rules import (
    KEY_EVAL_SLICE,
    KEY_LOSS_IMPROVEMENT,
    KEY_REMAINING_ESTIMATE,
    disagreement,
)
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import run_jobs, simulate


class SlicedSRTF(SRTFEst):
    """Time-sliced past its peak, but its compiled key (remaining estimate) never demotes."""

    name = "Sliced-SRTF"
    native_key = KEY_REMAINING_ESTIMATE

    def time_sliced(self, job) -> bool:
        return past_peak(job)


class SliceKeyUnsliced(PriorityScheduler):
    """EvalSched's key with no slicing declared: the kernel would slice what Python does not."""

    name = "SliceKey-Unsliced"
    native_key = KEY_EVAL_SLICE
    preemptive = incremental = key_rises_at_checks = True


class StaleLossAware(PriorityScheduler):
    """LossAware's key declared as one that never rises at a check."""

    name = "Stale-LossAware"
    native_key = KEY_LOSS_IMPROVEMENT
    preemptive = incremental = True


class MyEvalSched(EvalSched):
    """EvalSched re-declared: its key slices and it says so."""

    native_key = KEY_EVAL_SLICE


def config(**overrides: object):
    return load_sim_config(DEFAULTS, overrides={"workload.n_jobs": 120,
                                                "cluster.time_slice_share": 0.4, **overrides})


@pytest.mark.parametrize(("policy", "said"), [(SlicedSRTF, "declares time-sliced"),
                                               (SliceKeyUnsliced, "declares not time-sliced"),
                                               (StaleLossAware, "not re-keyed at checks")])
@pytest.mark.parametrize("engine", ["auto", "native"])
def test_a_compiled_form_that_disagrees_is_refused_in_one_line(policy, said, engine) -> None:
    spec = capabilities(policy()).native
    assert spec is not None and said in disagreement(spec)
    with pytest.raises(ValueError, match=said) as caught:
        native.select(config(), policy(), engine)
    assert "\n" not in str(caught.value) and policy.name in str(caught.value)
    with pytest.raises(ValueError, match=said):
        simulate(config(), policy(), seed=1, engine=engine)


def test_the_python_engine_runs_a_disagreeing_policy_as_declared() -> None:
    assert native.select(config(), SlicedSRTF(), "python") is None


def test_the_compiled_batch_refuses_a_disagreeing_base(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalstop_gym.env import compiled_batch

    monkeypatch.setattr(compiled_batch, "make_base", lambda name: SlicedSRTF())
    with pytest.raises(ValueError, match="declares time-sliced"):
        CompiledBatch(2, config(), base_scheduler="Sliced-SRTF")


def test_a_time_sliced_base_with_a_native_key_runs_sliced_on_both_engines() -> None:
    spec = capabilities(MyEvalSched()).native
    assert spec is not None and spec.time_sliced and spec.rekeys_at_checks
    cfg = config()
    runs = []
    for engine in ("python", "native"):
        policy = MyEvalSched()
        jobs = generate_workload(cfg, 5)
        runs.append((jobs, run_jobs(cfg, jobs, policy, native.select(cfg, policy, engine))))
    (ref, ref_events), (nat, nat_events) = runs
    assert nat_events == ref_events
    assert_same_jobs(ref, nat, "MyEvalSched")
    assert any(job.speed == 0.4 for job in ref), "no job ended its run sliced"
