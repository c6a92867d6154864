"""Results do not depend on the joblib backend or the number of workers."""

from __future__ import annotations

import pytest

from evalstop_gym.benchmarks.sweep.runner import run_sweep
from evalstop_gym.config import CONFIG_DIR
from evalstop_gym.experiment import load_experiment

SMALL = """
name: small
platform: {defaults}
overrides: {{workload.n_jobs: 20, cluster.gpus: 16}}
seeds: [7, 8]
reference: {{base: SRTF-Est, detector: none}}
cells:
  - {{base: SRTF-Est, detector: none}}
  - {{base: SRTF-Est, detector: EvalStop-2}}
  - {{base: SJF-Est, detector: LossPlateau}}
"""


@pytest.fixture()
def small(tmp_path):
    path = tmp_path / "small.yaml"
    path.write_text(SMALL.format(defaults=CONFIG_DIR / "defaults.yaml"))
    return load_experiment(path)


def _csv(result, tmp_path, name):
    path = tmp_path / f"{name}.csv"
    result.runs.to_csv(path, index=False)
    return path.read_bytes()


def test_loky_two_workers_equals_serial(small, tmp_path):
    serial = run_sweep(small, tmp_path / "serial", workers=1)
    loky = run_sweep(small, tmp_path / "loky", workers=2, backend="loky")
    assert _csv(serial, tmp_path, "a") == _csv(loky, tmp_path, "b")
    assert serial.jobs.equals(loky.jobs)


def test_dask_local_cluster_equals_serial(small, tmp_path):
    distributed = pytest.importorskip("dask.distributed")
    serial = run_sweep(small, tmp_path / "serial")
    with distributed.LocalCluster(n_workers=2, processes=True, threads_per_worker=1,
                                  dashboard_address=None) as cluster:
        dask = run_sweep(small, tmp_path / "dask", backend="dask",
                         address=cluster.scheduler_address)
    assert dask.n_ran == len(serial.runs)
    assert _csv(serial, tmp_path, "a") == _csv(dask, tmp_path, "b")


def test_ray_local_cluster_equals_serial(small, tmp_path):
    """Ray runs as plain ray tasks, each result saved as it arrives, with the serial results."""
    ray = pytest.importorskip("ray")
    serial = run_sweep(small, tmp_path / "serial")
    via_ray = run_sweep(small, tmp_path / "ray", workers=2, backend="ray")
    assert via_ray.n_ran == len(serial.runs)
    assert not ray.is_initialized(), "a cluster the sweep started is shut down after it"
    assert _csv(serial, tmp_path, "a") == _csv(via_ray, tmp_path, "b")
    assert serial.jobs.equals(via_ray.jobs)
