"""The incremental scheduling structures give exactly what a full sort gives."""

from __future__ import annotations

import random

import pytest

from evalstop_gym.policies import FIFO, SJFEst, SRTFEst, parse_policy
from evalstop_gym.policies.base import PriorityScheduler
from evalstop_gym.policies.priority_index import PriorityIndex, key_pair
from evalstop_gym.sim.cluster import Cluster, ScheduleRequest
from evalstop_gym.sim.protocols import CONTINUE, Allocation
from evalstop_gym.sim.view import ClusterView, SchedulerJobView
from evalstop_gym.sim.workload import generate_workload

BASES = ["FIFO", "SJF-Est", "SRTF-Est", "LossAware", "EvalSched"]


def job(jid: int, state: str, gpus: int, key: float, arrival: float) -> SchedulerJobView:
    """A view whose SRTF key (remaining estimate) is `key`."""
    return SchedulerJobView(jid, 0, "rlhf", gpus, arrival, state, 1.0 - key / 1000.0, 1.0, (),
                            (), (), 1000.0, 0.0, 0)


def run_plan(sched: PriorityScheduler, cluster: ClusterView, changes, fresh) -> Allocation:
    """Drive a planner the way the cluster does, answering re-view requests from `fresh`."""
    gen = sched.plan(cluster, changes, False)
    try:
        jid = next(gen)
        while True:
            jid = gen.send(fresh[jid])
    except StopIteration as done:
        return done.value


@pytest.mark.parametrize("trial", range(200))
def test_srtf_index_matches_full_sort_on_random_states(trial):
    """Random queues, random key drift of running jobs: the plan equals the sorted pass."""
    rng = random.Random(trial)
    total = rng.choice([8, 16, 40])
    sched = SRTFEst()
    sched.reset()
    running, used, views = [], 0, []
    for jid in range(rng.randint(1, 40)):
        gpus = rng.choice([1, 2, 4, 8])
        if used + gpus <= total and rng.random() < 0.5:
            running.append(job(jid, "running", gpus, rng.uniform(0, 300), rng.uniform(0, 50)))
            used += gpus
        else:
            state = rng.choice(["pending", "preempted"])
            views.append(job(jid, state, gpus, rng.uniform(0, 300), rng.uniform(0, 50)))
    cv = ClusterView(100.0, total, total - used, len(views), len(running))
    run_plan(sched, cv, [(v, i) for i, v in enumerate(running + views)],
             {v.job_id: v for v in running})
    # time passes: running keys only fall (never rise), unreported to the index
    drifted = [job(v.job_id, "running", v.gpus, v.remaining_estimate * rng.uniform(0, 1),
                   v.arrival_time) for v in running]
    fresh = {v.job_id: v for v in drifted}
    got = run_plan(sched, cv, [], fresh)
    assert got == SRTFEst().schedule(cv, tuple(views), tuple(drifted))


@pytest.mark.parametrize("cls", [FIFO, SJFEst])
@pytest.mark.parametrize("trial", range(50))
def test_backfill_by_demand_heaps_matches_the_linear_scan(cls, trial):
    rng = random.Random(1000 + trial)
    views = [job(j, "pending", rng.randint(1, 9), rng.uniform(0, 9), rng.choice([0.0, 1.0, 2.0]))
             for j in range(rng.randint(0, 60))]
    cv = ClusterView(0.0, 64, rng.randint(0, 64), len(views), 0)
    sched = cls()
    assert run_plan(sched, cv, [(v, -1) for v in views], {}) == cls().schedule(cv, tuple(views), ())


@pytest.mark.parametrize("cls", [SJFEst, SRTFEst])
@pytest.mark.parametrize("trial", range(10))
def test_index_matches_the_sort_as_ids_demands_and_states_change(cls, trial):
    """Ids past the arrays' first size, demands first seen late, waiting jobs that end or start:
    after every batch of changes the plan equals the sorted pass."""
    rng = random.Random(2000 + trial)
    sched, total = cls(), 64
    known: dict[int, SchedulerJobView] = {}
    for step in range(12):
        changes = []
        for _ in range(rng.randint(1, 30)):
            jid = len(known) if rng.random() < 0.6 or not known else rng.choice(list(known))
            gpus = known[jid].gpus if jid in known else rng.choice([1, 2, 4, 8, 3 + step])
            state = rng.choice(["pending", "preempted", "running", "completed"])
            view = job(jid, state, gpus, rng.uniform(0, 300), known[jid].arrival_time
                       if jid in known else rng.uniform(0, 50))
            known[jid] = view
            changes.append((view, jid))
        running = [v for v in known.values() if v.state == "running"]
        while sum(v.gpus for v in running) > total:     # what a cluster could hold
            gone = running.pop()
            known[gone.job_id] = job(gone.job_id, "completed", gone.gpus, 0.0, 0.0)
            changes.append((known[gone.job_id], gone.job_id))
        waiting = tuple(v for v in known.values() if v.state in ("pending", "preempted"))
        cv = ClusterView(1.0, total, total - sum(v.gpus for v in running), len(waiting),
                         len(running))
        got = run_plan(sched, cv, changes, {v.job_id: v for v in running})
        assert got == cls().schedule(cv, waiting, tuple(sorted(running, key=lambda v: v.job_id)))


def test_index_forgets_ended_jobs_and_reindexes_changed_ones():
    index = PriorityIndex(lambda v: v.remaining_estimate, preemptive=True)
    index.update(job(1, "pending", 2, 10.0, 0.0), -1)
    assert 1 in index.waiting and index.cls_size.sum() == 1
    index.update(job(1, "running", 2, 10.0, 0.0), 1)
    assert 1 not in index.waiting and index.cls_size.sum() == 0 and index.run_pos[1] >= 0
    assert (index.major[1], index.minor[1]) == (0.0, pytest.approx(10.0))
    index.update(job(1, "completed", 2, 0.0, 0.0), -1)
    assert index.run_pos[1] < 0 and 1 not in index.waiting


def test_index_takes_numbers_and_pairs_as_keys_and_refuses_others():
    assert key_pair(3) == (0.0, 3.0) and key_pair((-1, 2.5)) == (-1.0, 2.5)
    for bad in ("3", (1, 2, 3), None):
        with pytest.raises(TypeError, match="a number or a \\(major, minor\\) pair"):
            key_pair(bad)


@pytest.mark.parametrize("spec", [*BASES, "EvalStop-2+SRTF-Est", "StopAt-0.65+LossAware"])
def test_planned_run_equals_the_plain_protocol(small_config, spec):
    """`Cluster.run` (planner) and the pull API with sorted tuples end in identical states."""
    planned = parse_policy(spec)
    jobs_a = generate_workload(small_config, 3)
    Cluster(small_config, jobs_a, milestones=planned.milestones).run(planned)
    plain = parse_policy(spec)
    jobs_b = generate_workload(small_config, 3)
    cluster = Cluster(small_config, jobs_b, milestones=plain.milestones)
    cluster.adopt(plain)   # the platform side of the policy (EvalSched's time slicing)
    while (req := cluster.next_decision()) is not None:
        if isinstance(req, ScheduleRequest):
            assert isinstance(req.waiting, tuple) and isinstance(req.running, tuple)
            cluster.answer_schedule(plain.schedule(req.cluster, req.waiting, req.running))
        else:
            cluster.answer_check(plain.on_check(req.job, req.cluster))
    for a, b in zip(jobs_a, jobs_b, strict=True):
        assert (a.state, a.end_time, a.progress, a.gpu_minutes, a.n_preemptions) == \
               (b.state, b.end_time, b.progress, b.gpu_minutes, b.n_preemptions)


def test_a_scheduler_without_the_declaration_gets_no_planner():
    class Custom(PriorityScheduler):
        preemptive = True

        def key(self, view):
            return -view.attained_minutes   # rises while running: not incremental-safe

    assert Custom().plan is None and SRTFEst().plan is not None
    assert CONTINUE.action.value == "continue"
