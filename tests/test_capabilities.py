"""`sim.protocols.capabilities`: the one answer to what a policy offers beyond the protocol."""

from __future__ import annotations

from evalstop_gym.policies import FIFO, EvalSched, EvalStop, MedianPruner, Patience, SRTFEst
from evalstop_gym.sim.protocols import Allocation, capabilities
from evalstop_gym.sim.rules import KEY_ARRIVAL, KEY_EVAL_SLICE, RULE_DECLINES, NativeSpec
from evalstop_gym.sim.workload import JOB_TYPES


def test_a_base_scheduler_alone_offers_its_pass_and_its_compiled_form():
    caps = capabilities(FIFO())
    assert caps.native == NativeSpec(key=KEY_ARRIVAL, preemptive=False)
    assert caps.plan is not None and caps.time_sliced is None and caps.reason is None
    assert caps.types == JOB_TYPES and not caps.learns


def test_a_composition_offers_its_base_s_pass_and_slicing_and_both_parts_compiled_form():
    detector, base = EvalStop(2), EvalSched()
    caps = capabilities(detector + base)
    assert caps.native is not None and caps.native.key == KEY_EVAL_SLICE
    assert caps.native.rule == RULE_DECLINES and caps.native.preemptive
    assert caps.time_sliced == base.time_sliced and caps.plan is not None
    assert caps.reason == detector.reason and caps.types == ("rlhf", "dpo")


def test_a_compiled_form_belongs_to_the_class_that_declares_it():
    class Quieter(EvalStop):
        pass

    class Longest(SRTFEst):
        def key(self, job):
            return -job.remaining_estimate

    assert capabilities(Quieter(2) + SRTFEst()).native is None
    assert capabilities(EvalStop(2) + Longest()).native is None
    assert capabilities(Longest()).native is None and capabilities(Longest()).plan is not None


def test_a_detector_alone_says_what_it_watches_and_reads():
    assert capabilities(Patience(3)).needs == ("evals",)
    assert capabilities(Patience(3)).native is None     # no base: nothing to compile
    pruner = MedianPruner(n_min=1)
    caps = capabilities(pruner)
    assert "runs" in caps.needs and caps.learns
    assert capabilities(Patience(3)).has_peers is None       # judges a run by its own evals
    assert caps.has_peers is not None and not caps.has_peers("rlhf")   # no ended peer yet


def test_an_instance_may_offer_time_slicing_as_an_isolated_policy_does():
    class Remote:
        name, milestones = "remote", ()

        def __init__(self):
            self.time_sliced = lambda job: True

        def on_check(self, job, cluster): ...

        def schedule(self, cluster, waiting, running):
            return Allocation()

        def on_job_end(self, job): ...

        def reset(self): ...

    caps = capabilities(Remote())
    assert caps.time_sliced is not None and caps.native is None and caps.plan is None
