"""A workload drawn into arrays is the workload the job-by-job path drew, to the bit.

`tests/data/workload_digests.json` holds, for each config of `GRID` and seeds 0-11, a SHA-256 of
every field of every job `generate_workload` made and of the dict `native._pack` made from them
(with each job's checks), computed by the job-by-job implementation this one replaced (main at
56c6fa0). The arrays path must give the same digests: the same draws, in the same order, into
the same fields, with the same types.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.env.batch_arrays import Extra, load_truth
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.sim import native
from evalstop_gym.sim.jobs import Job
from evalstop_gym.sim.packing import pack
from evalstop_gym.sim.workload_arrays import arrays_of, jobs_of
from evalstop_gym.simulate import resolve_config
from evalstop_gym.workloads import draw_workload, generate_workload

DIGESTS = json.loads((Path(__file__).parent / "data" / "workload_digests.json").read_text())
FIELDS = ("job_id", "tenant", "job_type", "gpus", "arrival", "duration_estimate", "duration",
          "is_hacking", "peak_progress", "eval_points", "eval_true", "eval_observed",
          "eval_minutes", "loss_params", "curve_params", "eval_work", "peak_work")
GRID = {
    "e2": ("e2", {}), "e1": ("e1", {}), "e8": ("e8", {}), "philly": ("philly", {}),
    "corpus": ("e2", {"curves.source": "corpus"}),
    "corpus_added": ("e2", {"curves.source": "corpus", "curves.corpus_noise": "added"}),
    "philly_corpus": ("philly", {"curves.source": "corpus"}),
    "exact": ("e2", {"workload.counts": "exact"}),
    "philly_exact": ("philly", {"workload.counts": "exact"}),
    "ar1_pergpu": ("e2", {"noise.model": "ar1", "noise.rho": 0.5, "evals.cost": "per_gpu"}),
    "drift_i05": ("e2", {"noise.model": "drift", "evals.interval": 0.05}),
    "t_nofinal": ("e2", {"noise.model": "student_t", "evals.final": False,
                         "evals.interval": 0.3}),
    "calm": ("e2", {"job_types.rlhf.step_time_volatility": 0.0,
                    "job_types.lora.step_time_volatility": 0.0}),
}
MILESTONES = [(), (0.25, 0.5, 0.75), (0.1, 0.33)]
SEEDS = range(12)


def _bytes(v: object) -> bytes:
    """A value with its type: arrays with dtype and shape, tuples element by element."""
    if isinstance(v, np.ndarray):
        return repr((v.dtype.str, v.shape)).encode() + v.tobytes()
    if isinstance(v, tuple):
        return b"(" + b",".join(_bytes(x) for x in v) + b")"
    return repr((type(v).__name__, v)).encode()


def job_digest(jobs: list[Job]) -> str:
    h = hashlib.sha256()
    for job in jobs:
        for field in FIELDS:
            h.update(_bytes(getattr(job, field)))
    return h.hexdigest()


def pack_digest(jobs: list[Job], milestones: tuple[float, ...]) -> str:
    packed = native._pack(jobs, milestones)
    h = hashlib.sha256()
    for key in sorted(packed):
        h.update(key.encode() + _bytes(packed[key]))
    for job in jobs:
        h.update(_bytes(tuple(job.checks)) + _bytes(tuple(job.check_work)))
    return h.hexdigest()


@pytest.mark.parametrize("name", sorted(GRID))
def test_jobs_and_packed_arrays_are_the_job_by_job_paths(name: str) -> None:
    config = resolve_config(*GRID[name])
    for seed in SEEDS:
        jobs = generate_workload(config, seed)
        milestones = MILESTONES[seed % len(MILESTONES)]
        assert [job_digest(jobs), pack_digest(jobs, milestones)] == DIGESTS[f"{name}/{seed}"], \
            f"{name} seed {seed}"


@pytest.mark.parametrize("name", sorted(GRID))
def test_packing_the_drawn_arrays_is_packing_the_records(name: str) -> None:
    """The vector env's reset (draw, pack) gives the dict `native.run` packs from the records."""
    config = resolve_config(*GRID[name])
    for seed in SEEDS[:4]:
        milestones = MILESTONES[seed % len(MILESTONES)]
        direct = pack(draw_workload(config, seed), milestones)
        via_jobs = native._pack(generate_workload(config, seed), milestones)
        assert sorted(direct) == sorted(via_jobs)
        for key, value in via_jobs.items():
            assert direct[key].dtype == value.dtype and direct[key].tobytes() == value.tobytes(), \
                f"{name} seed {seed}: {key}"


def test_records_and_arrays_round_trip() -> None:
    """arrays -> records -> arrays is the identity; so is records -> arrays -> records, also for
    hand-made jobs that do not share one schedule."""
    w = draw_workload(resolve_config("e2", {"curves.source": "corpus"}), 3)
    again = arrays_of(jobs_of(w))
    for field, a, b in zip(w._fields, w, again, strict=True):
        assert a.dtype == b.dtype and a.tobytes() == b.tobytes(), field
    jobs = generate_workload(resolve_config("e2"), 5)[:6]
    for k, job in enumerate(jobs[:3]):    # three jobs on schedules of their own
        job.eval_points = job.eval_points[: 5 + k].copy()
        job.eval_true, job.eval_observed = job.eval_true[: 5 + k], job.eval_observed[: 5 + k]
        job.set_pace(None if job.eval_work is None else job.eval_work[: 5 + k])
    assert job_digest(jobs_of(arrays_of(jobs))) == job_digest(jobs)
    flat = arrays_of(jobs).eval_points_flat()
    assert flat.tobytes() == np.concatenate([j.eval_points for j in jobs]).tobytes()
    assert pack_digest(jobs_of(arrays_of(jobs)), (0.5,)) == pack_digest(jobs, (0.5,))


def test_the_hidden_truth_loaded_is_each_jobs() -> None:
    w = draw_workload(resolve_config("e2"), 2)
    jobs, n, n_ev = jobs_of(w), w.n_jobs, int(w.ev_ptr[-1])
    extra = Extra(np.zeros((2, n), bool), np.zeros((2, n)), np.zeros((2, n_ev)),
                  np.zeros((2, n_ev)))
    load_truth(extra, 1, w)
    assert extra.is_hacking[1].tolist() == [j.is_hacking for j in jobs]
    assert extra.peak_prog[1].tolist() == [j.peak_progress for j in jobs]
    assert extra.ev_point[1].tolist() == np.concatenate([j.eval_points for j in jobs]).tolist()
    assert extra.ev_true[1].tolist() == np.concatenate([j.eval_true for j in jobs]).tolist()
    assert not extra.is_hacking[0].any()
    assert w.planned_gpu_minutes().tolist() == [j.planned_gpu_minutes for j in jobs]


def test_an_episode_of_the_vector_env_builds_no_job_record(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Resets, steps and scoring run on arrays: with Job.__init__ made to fail, three episodes
    reset, run to their end and are scored."""
    batch = CompiledBatch(3, "e2", **{"workload.n_jobs": 30})

    def refuse(*args: object, **kwargs: object) -> None:
        raise AssertionError("a job record was built")

    with monkeypatch.context() as patch:
        patch.setattr(Job, "__init__", refuse)
        batch.reset([0, 1, 2], [1, 2, 3])
        while not batch.terminated.all():
            batch.step(np.zeros(3, np.int64))
        scores = [batch.metrics(i) for i in range(3)]
    assert all(scores) and scores[0] != scores[1]
