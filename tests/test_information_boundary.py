"""No path from anything a policy receives to hidden truth (labels, true duration, curves)."""

from __future__ import annotations

import dataclasses
import gc
import numbers

import numpy as np

from evalstop_gym.sim.cluster import CheckRequest, Cluster, ScheduleRequest
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.protocols import CONTINUE
from evalstop_gym.sim.view import ClusterView, SchedulerJobView, make_view
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.policies import SRTFEst

HIDDEN = {"is_hacking", "peak_progress", "duration", "eval_true", "eval_observed",
          "curve_params", "loss_params", "eval_points", "observations", "gpu_minutes_after_peak"}
PLAIN = (numbers.Number, str, bytes, type(None), tuple, bool)


def reachable(root):
    """Every object reachable from `root` through references (gc.get_referents), excluding types."""
    seen, stack, out = set(), [root], []
    while stack:
        obj = stack.pop()
        if id(obj) in seen or isinstance(obj, type):
            continue
        seen.add(id(obj))
        out.append(obj)
        stack.extend(gc.get_referents(obj))
    return out


def assert_clean(root):
    for obj in reachable(root):
        assert not isinstance(obj, (Job, np.ndarray)), f"{type(obj).__name__} reachable from view"
        assert isinstance(obj, PLAIN + (SchedulerJobView, ClusterView, CheckRequest,
                                        ScheduleRequest)), f"unexpected {type(obj).__name__}"


def test_view_fields_exclude_hidden_names(small_config):
    names = {f.name for f in dataclasses.fields(SchedulerJobView)}
    assert not names & HIDDEN
    view = make_view(generate_workload(small_config, 0)[0], 0.0)
    assert not hasattr(view, "__dict__"), "slots only: no room for smuggled attributes"


def test_everything_a_policy_receives_is_plain_data(small_config):
    jobs = generate_workload(small_config, 4)
    cluster = Cluster(small_config, jobs)
    seen_check = seen_pass = False
    while (req := cluster.next_decision()) is not None:
        assert_clean(req)
        if isinstance(req, CheckRequest):
            seen_check = True
            cluster.answer_check(CONTINUE)
        else:
            seen_pass = True
            cluster.answer_schedule(SRTFEst().schedule(req.cluster, req.waiting, req.running))
        for view in cluster.pop_finished():
            assert_clean(view)
    assert seen_check and seen_pass


def test_a_hacking_and_a_healthy_job_with_equal_observations_look_identical(small_config):
    jobs = generate_workload(small_config, 9)
    hacking = next(j for j in jobs if j.is_hacking)
    healthy = next(j for j in jobs if j.job_type == "rlhf" and not j.is_hacking)
    for field in ("job_id", "tenant", "gpus", "arrival", "duration_estimate", "loss_params",
                  "observations", "progress", "state", "phase", "gpu_minutes", "n_preemptions"):
        setattr(healthy, field, getattr(hacking, field))
    assert hacking.duration != healthy.duration  # hidden truth still differs
    assert make_view(hacking, 50.0) == make_view(healthy, 50.0)
