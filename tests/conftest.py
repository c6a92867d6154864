"""Shared fixtures: small, fast platform configs built from the real defaults."""

from __future__ import annotations

import atexit
import logging
import shutil
import sys
import tempfile
from pathlib import Path

import pytest

from evalstop_gym.config import SimConfig, load_sim_config


def _probes_readable_by_anyone() -> None:
    """Import the isolation tests' probe policies from a copy every user can read. A private
    policy's process drops to user nobody before it imports the policy's module by name, and the
    checkout need not be readable by nobody (a clone in a fresh temporary folder is not)."""
    folder = Path(tempfile.mkdtemp(prefix="evalstop-probes-"))
    atexit.register(shutil.rmtree, folder, ignore_errors=True)
    folder.chmod(0o755)
    copy = shutil.copy(Path(__file__).with_name("sandboxed_policies.py"), folder)
    Path(copy).chmod(0o644)
    sys.path.insert(0, str(folder))


_probes_readable_by_anyone()

MAX_WORKERS = 4   # each worker imports torch, Ray and Dask: about 1.5 GB of memory apiece


def _names_one_file(args: list[str]) -> bool:
    return len(args) == 1 and Path(args[0].split("::")[0]).is_file()


@pytest.hookimpl(tryfirst=True)
def pytest_cmdline_main(config: pytest.Config) -> None:
    """The suite runs on every core (pytest-xdist, from the dev extra), one test file per worker
    so a file's module fixtures (the docs site, the mypy tree) are built once; `-n 0` or
    `-p no:xdist` runs it serially, and so does a run of a single file. Runs before xdist's own
    hook, which turns `numprocesses` into workers."""
    if (not config.pluginmanager.hasplugin("xdist") or hasattr(config, "workerinput")
            or config.option.numprocesses is not None or config.option.dist != "no"
            or config.getoption("usepdb") or _names_one_file(config.args)):
        return
    config.option.numprocesses = "auto"
    config.option.maxprocesses = config.option.maxprocesses or MAX_WORKERS
    config.option.dist = "loadfile"


@pytest.fixture(scope="session")
def e2_config() -> SimConfig:
    return load_sim_config()


@pytest.fixture(scope="session")
def small_config() -> SimConfig:
    """60 jobs on 24 GPUs: every code path (queueing, preemption, stops) in well under a second."""
    return load_sim_config(overrides={"workload.n_jobs": 60, "cluster.gpus": 24})


@pytest.fixture(autouse=True)
def no_process_outlives_its_test():
    """A process a test started through sweep_gate.start (a sweep it interrupts), or a worker of
    one, still running when the test ends, failed or not, is killed; a passing test that left
    one fails, naming it."""
    from sweep_gate import reap

    yield
    left = reap()
    assert not left, f"processes still running after the test (now killed): {left}"


@pytest.fixture(autouse=True)
def registry_restored():
    """Names a test registers (a user's detector or base, through --import or in process) are
    gone after it, so no later test sees them among the package's own."""
    from evalstop_gym.policies import registry

    saved = [(table, dict(table)) for table in (registry.BASES, registry.DETECTORS,
                                                 registry.USAGE)]
    yield
    for table, before in saved:
        table.clear()
        table.update(before)


@pytest.fixture
def library_log(caplog):
    """Capture a library's own logger (transformers, ray) once, whatever ran before.

    Such loggers do not propagate by default, but a library loaded earlier in the session may
    turn propagation on; the root logger also holds caplog's handler, so each record would then
    be captured twice. Call it with the logger's name and the level to capture at."""
    restore = []

    def capture(name: str, level: int | str = logging.INFO):
        logger = logging.getLogger(name)
        restore.append((logger, logger.level, logger.propagate))
        logger.addHandler(caplog.handler)
        logger.setLevel(level)
        logger.propagate = False
        return caplog

    yield capture
    for logger, level, propagate in restore:
        logger.setLevel(level)
        logger.propagate = propagate
        logger.removeHandler(caplog.handler)
