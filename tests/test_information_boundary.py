"""No path from anything a policy receives to hidden truth (labels, true duration, curves)."""

from __future__ import annotations

import dataclasses
import gc
import numbers

import numpy as np
import pytest

from evalstop_gym.benchmarks.analysis.duration_leak import duration_errors
from evalstop_gym.policies import FIFO, SRTFEst
from evalstop_gym.sim.cluster import CheckRequest, Cluster, ScheduleRequest
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.kernel import SimulationError
from evalstop_gym.sim.protocols import CONTINUE, Allocation
from evalstop_gym.sim.view import ClusterView, SchedulerJobView, make_view
from evalstop_gym.sim.workload import generate_workload

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


class Prober:
    """A base scheduler whose fast path asks to view a job of its choosing, then starts nothing
    until the last job has arrived (FIFO after that)."""

    name, milestones = "Prober", ()

    def __init__(self, pick) -> None:
        self.pick, self.seen = pick, []

    def reset(self) -> None:
        self.seen.clear()

    def on_check(self, job, cluster):
        return CONTINUE

    def on_job_end(self, job) -> None:
        pass

    def schedule(self, cluster, waiting, running):
        return FIFO().schedule(cluster, waiting, running)

    def plan(self, cluster, changes, first):
        job_id = self.pick(cluster, changes)
        if job_id is not None:
            self.seen.append((yield job_id))
        return Allocation()


def test_a_planner_cannot_view_a_job_that_has_not_arrived(small_config):
    jobs = generate_workload(small_config, 2)
    future = max(jobs, key=lambda j: j.arrival).job_id
    prober = Prober(lambda cluster, changes: future)
    with pytest.raises(SimulationError, match=f"job {future}, which is neither waiting nor "
                                              "running"):
        Cluster(small_config, jobs).run(prober)
    assert prober.seen == []


def test_a_planner_sees_waiting_jobs_but_not_unknown_ids(small_config):
    jobs = generate_workload(small_config, 2)
    waiting = Prober(lambda cluster, changes: changes[0][0].job_id)
    cluster = Cluster(small_config, jobs)
    cluster.next_decision(views=False)
    cluster.answer_with_plan(waiting.plan)
    assert [v.job_id for v in waiting.seen] == [0] and waiting.seen[0].state == "pending"
    for bad in (len(jobs) + 5, -1, "0", [0]):
        cluster.next_decision(views=False)
        with pytest.raises(SimulationError, match="neither waiting nor running"):
            cluster.answer_with_plan(Prober(lambda cluster, changes, bad=bad: bad).plan)


def test_a_jobs_duration_is_hidden_until_it_has_trained(small_config):
    """Two waiting jobs with the same request but different durations look identical."""
    jobs = generate_workload(small_config, 6)
    a = next(j for j in jobs if j.job_type == "rlhf")
    b = next(j for j in jobs if j.job_type == "rlhf" and j.duration != a.duration and j is not a)
    for field in ("job_id", "tenant", "gpus", "arrival", "loss_params"):
        setattr(b, field, getattr(a, field))
    assert make_view(a, 0.0) == make_view(b, 0.0)


def test_a_running_jobs_duration_is_known_only_to_the_error_view_py_documents(small_config):
    """view.py: with step times that drift, reading the duration off progress and the clock
    misses it (BEYOND.md measures by how much) and almost never hits it; the floors view.py
    states (3% for RLHF, 0.5% for LoRA and DPO) sit under those medians, for sampling room."""
    errors = duration_errors(small_config, seeds=(3, 4, 5, 6, 7))
    floors = {"rlhf": 0.03, "lora": 0.005, "dpo": 0.005}
    for (job_type, name), errs in errors.items():
        assert len(errs) > 50, (job_type, name)
        assert float(np.median(errs)) > floors[job_type], (job_type, name, np.median(errs))
        assert np.mean(np.array(errs) < 1e-6) < 0.01, (job_type, name)
    assert {t for t, _ in errors} == set(floors)


def test_with_every_step_alike_the_rate_reveals_the_duration_exactly(small_config):
    """The upper bound view.py names: `step_time_volatility: 0` for every type."""
    steady = small_config.with_overrides({f"job_types.{t}.step_time_volatility": 0.0
                                          for t in ("lora", "dpo", "rlhf")})
    errors = duration_errors(steady, seeds=(3,))
    everything = [e for (_, name), errs in errors.items() if name == "mean rate" for e in errs]
    assert len(everything) > 100 and float(np.median(everything)) < 1e-12


@pytest.mark.parametrize("name", ["PeerPrior-0.05", "TrendTest-0.05", "MedianPruner"])
def test_detectors_that_learn_from_ended_runs_see_only_views(small_config, name):
    """A detector that learns from peers gets views (no label) at checks and at ends, and its
    own source never names the hidden label."""
    import inspect

    from evalstop_gym.policies import make_detector

    detector = make_detector(name)
    assert "is_hacking" not in inspect.getsource(inspect.getmodule(type(detector)))
    cluster = Cluster(small_config, generate_workload(small_config, 5))
    ended = 0
    while (req := cluster.next_decision()) is not None:
        assert_clean(req)
        if isinstance(req, CheckRequest):
            cluster.answer_check(detector.decide(req.job, req.cluster))
        else:
            cluster.answer_schedule(SRTFEst().schedule(req.cluster, req.waiting, req.running))
        for view in cluster.pop_finished():
            assert_clean(view)
            detector.on_job_end(view)
            ended += 1
    assert ended == small_config.workload.n_jobs


@pytest.mark.parametrize("engine", ["auto", "python"])
def test_the_full_control_vector_env_observes_no_hidden_truth(monkeypatch, engine):
    """control="full", batched, on the compiled core and on N single envs: with every hidden
    label, peak and true curve moved and the same actions, no observation row and no action
    mask moves (through autoresets), while the reward, which uses the truth, does; infos hold
    masks and end-of-episode metrics only."""
    import importlib

    import gymnasium as gym

    import evalstop_gym  # noqa: F401  (registers the env)

    simulate_module = importlib.import_module("evalstop_gym.simulate")
    compiled_module = importlib.import_module("evalstop_gym.env.compiled_batch")
    original = simulate_module.generate_workload

    def run(scramble: bool) -> tuple[list, list, list]:
        def workload(config, seed):
            jobs = original(config, seed)
            for job in jobs if scramble else ():
                job.is_hacking, job.peak_progress = not job.is_hacking, 1.0 - job.peak_progress
                job.eval_true = job.eval_true[::-1].copy()
            return jobs

        monkeypatch.setattr(simulate_module, "generate_workload", workload)   # the single env's
        monkeypatch.setattr(compiled_module, "draw_workload", workload)   # the core's (records
        # are packed through their arrays)
        venv = gym.make_vec("EvalStopCluster-v0", num_envs=3, control="full", max_jobs=8,
                            vectorization_mode="vector_entry_point", engine=engine,
                            **{"workload.n_jobs": 12})
        space, rng = venv.single_action_space, np.random.default_rng(1)
        obs, info = venv.reset(seed=4)
        seen, masks, rewards = [obs], [venv.action_masks()], []
        for _ in range(120):
            space.seed(int(rng.integers(2**31)))
            actions = np.stack([space.sample(mask=m) for m in info["action_mask"]])
            obs, reward, _, _, info = venv.step(actions)
            assert set(info) <= {"action_mask", "_action_mask", "metrics", "_metrics",
                                 "reward_terms", "_reward_terms"}
            seen.append(obs)
            masks.append(venv.action_masks())
            rewards.append(reward)
        return seen, masks, rewards

    plain, scrambled = run(False), run(True)
    for a, b in zip(plain[0], scrambled[0], strict=True):
        assert all(a[k].tobytes() == b[k].tobytes() for k in a)
    assert all(a.tobytes() == b.tobytes() for a, b in zip(plain[1], scrambled[1], strict=True))
    assert any(a.tobytes() != b.tobytes() for a, b in zip(plain[2], scrambled[2], strict=True)), \
        "the moved truth never reached the reward: the test would prove nothing"
