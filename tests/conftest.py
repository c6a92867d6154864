"""Shared fixtures: small, fast platform configs built from the real defaults."""

from __future__ import annotations

import pytest

from evalstop_gym.config import SimConfig, load_sim_config


@pytest.fixture(scope="session")
def e2_config() -> SimConfig:
    return load_sim_config()


@pytest.fixture(scope="session")
def small_config() -> SimConfig:
    """60 jobs on 24 GPUs: every code path (queueing, preemption, stops) in well under a second."""
    return load_sim_config(overrides={"workload.n_jobs": 60, "cluster.gpus": 24})
