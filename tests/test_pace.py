"""Step-time jitter (sim/pace.py): what it draws, how the engines use it, what it leaves alone."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from evalstop_gym.config import ConfigError, SimConfig, load_sim_config
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim.cluster import CheckRequest, Cluster
from evalstop_gym.sim.pace import (
    draw_eval_work,
    knot_progress,
    point_work,
    progress_between,
    work_at,
)
from evalstop_gym.sim.protocols import CONTINUE
from evalstop_gym.sim.view import make_view
from evalstop_gym.sim.workload import JOB_TYPES, eval_points, generate_workload

POINTS = eval_points(0.15, True)


def test_work_rises_from_0_to_1_and_volatility_0_is_even() -> None:
    rng = np.random.default_rng(0)
    work = draw_eval_work(POINTS, np.array([0.0, 0.3, 3.0]), rng)
    assert work.shape == (3, len(POINTS))
    assert np.all(np.diff(work, axis=1) > 0) and np.all(work[:, 0] > 0)
    assert np.all(work[:, -1] == 1.0)
    np.testing.assert_allclose(work[0], POINTS, rtol=1e-12)
    assert not np.allclose(work[1], POINTS, atol=1e-3)


def test_the_last_knot_is_1_when_the_final_eval_is_not_run() -> None:
    points = eval_points(0.15, False)
    assert knot_progress(points)[-1] == 1.0 and len(knot_progress(points)) == len(points) + 2
    work = draw_eval_work(points, np.array([0.5]), np.random.default_rng(1))
    assert work.shape == (1, len(points)) and work[0, -1] < 1.0
    assert work_at(points, work[0], np.array([1.0]))[0] == 1.0


def test_work_at_hits_the_knots_exactly_and_rows_agree_with_single_jobs() -> None:
    work = draw_eval_work(POINTS, np.full(4, 0.8), np.random.default_rng(2))
    assert np.array_equal(work_at(POINTS, work[1], POINTS), work[1])
    assert work_at(POINTS, work[1], np.array([0.0, 1.0])).tolist() == [0.0, 1.0]
    probes = np.array([0.0, 0.05, 0.15, 0.2, 0.61, 0.99, 1.0])
    matrix = work_at(POINTS, work, probes)
    for row in range(4):   # the native engine packs rows; Cluster asks job by job
        assert matrix[row].tobytes() == work_at(POINTS, work[row], probes).tobytes()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0.0, 1.0), max_size=4), st.floats(0.0, 3.0),
       st.sampled_from([0.15, 0.3, 0.5]), st.booleans(), st.integers(0, 2**32 - 1))
def test_point_work_is_work_at_to_the_bit(probes: list[float], volatility: float,
                                          interval: float, final: bool, seed: int) -> None:
    """The packer's compiled form of `work_at` (one job, one progress) gives its bits, at the
    knots, between them and past the last eval point."""
    points = eval_points(interval, final)
    row = draw_eval_work(points, np.array([volatility]), np.random.default_rng(seed))[0]
    progress = np.array([*probes, *points, 0.0, 1.0])
    knots = knot_progress(points)
    one_by_one = np.array([point_work(knots, row, p) for p in progress])
    assert one_by_one.tobytes() == work_at(points, row, progress).tobytes()


@settings(max_examples=200, deadline=None)
@given(st.floats(0.0, 1.0), st.floats(0.0, 3.0), st.integers(0, 2**32 - 1))
def test_reported_progress_inverts_work_between_checks(progress: float, volatility: float,
                                                       seed: int) -> None:
    row = draw_eval_work(POINTS, np.array([volatility]), np.random.default_rng(seed))[0]
    x = knot_progress(POINTS)
    w = np.concatenate([[0.0], row])
    k = min(int(np.searchsorted(x, progress, side="right")) - 1, len(x) - 2)
    done = float(work_at(POINTS, row, np.array([progress]))[0])
    back = progress_between(done, x[k], w[k], x[k + 1], w[k + 1])
    assert back == pytest.approx(progress, abs=1e-12)


def test_a_lone_jobs_clock_between_evals_is_its_work_not_its_progress() -> None:
    config = SimConfig().with_overrides({"workload.n_jobs": 1, "cluster.gpus": 64})
    job = generate_workload(config, 9)[0]
    assert job.eval_work is not None
    Cluster(config, [job]).run(parse_policy("FIFO"))
    times = [o.time for o in job.observations]
    trained = np.diff([job.first_start, *times]) - job.eval_minutes   # a check ends its eval
    expected = np.diff([0.0, *job.eval_work]) * job.duration
    np.testing.assert_allclose(trained, expected, rtol=1e-9)
    assert job.end_time - job.first_start == pytest.approx(
        job.duration + len(job.eval_points) * job.eval_minutes, rel=1e-12)


def test_a_running_jobs_reported_progress_rises_and_meets_each_check() -> None:
    config = SimConfig().with_overrides({"workload.n_jobs": 1})
    job = generate_workload(config, 10)[0]
    cluster, fifo, seen = Cluster(config, [job]), parse_policy("FIFO"), []
    while (request := cluster.next_decision()) is not None:
        if isinstance(request, CheckRequest):
            assert request.job.progress == job.checks[job.next_check - 1][0]
            cluster.answer_check(CONTINUE)
        else:
            cluster.answer_schedule(fifo.schedule(request.cluster, request.waiting,
                                                  request.running))
        if cluster.queue:   # the job's state holds until the next event: view it in between
            for t in np.linspace(cluster.now, cluster.queue.peek_time(), 9):
                seen.append((float(t), make_view(job, float(t)).progress))
    progress = [p for _, p in sorted(seen)]   # a pass at a check's time views it again
    assert len(progress) > 50 and np.all(np.diff(progress) >= 0) and progress[-1] == 1.0


def test_jitter_draws_from_its_own_stream_and_knows_no_label() -> None:
    """Volatility rescales the same draws and leaves every other draw alone; the pace of a job
    does not move with its hacking label (the label draw changes, the pace does not)."""
    base = SimConfig().with_overrides({"workload.n_jobs": 80})
    calm = base.with_overrides({f"job_types.{t}.step_time_volatility": 0.05 for t in JOB_TYPES})
    flipped = base.with_overrides({"workload.hacking_fraction": 0.1})
    a, b, c = (generate_workload(cfg, 4) for cfg in (base, calm, flipped))
    for ja, jb, jc in zip(a, b, c, strict=True):
        assert (ja.arrival, ja.duration, ja.gpus, ja.eval_observed.tobytes()) == (
            jb.arrival, jb.duration, jb.gpus, jb.eval_observed.tobytes())
        assert ja.eval_work.tobytes() == jc.eval_work.tobytes()
        assert np.sign(np.diff(np.log(np.diff([0, *ja.eval_work]) / np.diff([0, *POINTS])))
                       ).tolist() == np.sign(np.diff(np.log(
                           np.diff([0, *jb.eval_work]) / np.diff([0, *POINTS])))).tolist()
    assert [j.is_hacking for j in a] != [j.is_hacking for j in c]


def test_same_seed_same_pace_bytes() -> None:
    config = SimConfig().with_overrides({"workload.n_jobs": 50})
    one, two = generate_workload(config, 77), generate_workload(config, 77)
    assert b"".join(j.eval_work.tobytes() for j in one) == b"".join(
        j.eval_work.tobytes() for j in two)


def test_volatility_0_leaves_a_job_evenly_paced() -> None:
    config = SimConfig().with_overrides({"job_types.lora.step_time_volatility": 0.0,
                                         "workload.n_jobs": 100})
    for job in generate_workload(config, 3):
        assert (job.eval_work is None) == (job.job_type == "lora")
        if job.eval_work is None:
            assert job.peak_work == job.peak_progress


@pytest.mark.parametrize("value", [-0.1, 4.0])
def test_a_volatility_outside_0_to_3_names_the_field_and_its_range(value: float) -> None:
    with pytest.raises(ConfigError, match=r"job_types\.rlhf\.step_time_volatility: .*\[0, 3\]"):
        load_sim_config(overrides={"job_types.rlhf.step_time_volatility": value})


@pytest.mark.parametrize("value", [float("nan"), float("inf"), "fast"])
def test_a_volatility_that_is_not_a_finite_number_names_the_field(value: object) -> None:
    with pytest.raises(ConfigError, match=r"job_types\.rlhf\.step_time_volatility: .*number"):
        load_sim_config(overrides={"job_types.rlhf.step_time_volatility": value})


def test_a_workloads_peaks_are_placed_as_each_job_would_place_its_own() -> None:
    """draw_pace computes every job's peak work at once (row_work_at); it must be the very
    float `Job.work_at` gives."""
    config = SimConfig().with_overrides({"workload.n_jobs": 120})
    for job in generate_workload(config, 8):
        assert job.peak_work == job.work_at(job.peak_progress)
