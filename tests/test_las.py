"""LAS (Tiresias' least attained service): the job that has held the fewest GPU-minutes runs.

Both engines run it alike (tests/test_native.py's grid, tests/test_vector_equivalence.py); here
its own behaviour: the key is the view's GPU-minutes, a newcomer displaces a served job.
"""

from __future__ import annotations

import dataclasses

from test_native import DEFAULTS

from evalstop_gym.config import load_sim_config
from evalstop_gym.policies import make_base
from evalstop_gym.sim.protocols import capabilities
from evalstop_gym.sim.view import SchedulerJobView
from evalstop_gym.simulate import simulate

VIEW = SchedulerJobView(0, 0, "rlhf", 4, 10.0, "running", 0.3, 1.0, (), (), (), 600.0, 50.0, 0)


def test_the_key_is_the_gpu_minutes_held_so_fresh_jobs_go_first() -> None:
    las = make_base("LAS")
    fresh = dataclasses.replace(VIEW, job_id=1, gpus=8, arrival_time=20.0, attained_minutes=0.0,
                                state="pending")
    assert las.key(VIEW) == (0, 4 * 50.0)
    assert las.key(fresh) < las.key(VIEW)   # fewer GPU-minutes, whatever its size or arrival


def test_it_declares_a_key_that_rises_while_jobs_run() -> None:
    las = make_base("LAS")
    spec = capabilities(las).native
    assert spec is not None and spec.preemptive and spec.rekeys_at_passes
    assert capabilities(las).plan is None   # no incremental pass: every pass ranks afresh


def test_a_loaded_cluster_preempts_served_jobs_for_newcomers() -> None:
    config = load_sim_config(DEFAULTS, overrides={"workload.n_jobs": 80, "cluster.gpus": 16})
    preempted = {name: sum(r["n_preemptions"] for r in simulate(config, name, seed=3).records)
                 for name in ("LAS", "SRTF-Est")}
    assert preempted["LAS"] > 10 * preempted["SRTF-Est"] > 0
