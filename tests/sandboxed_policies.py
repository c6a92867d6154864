"""Probe policies for the isolation tests, run in a child that may have dropped privileges.

Apart from this file the child can import only what it loaded before dropping them (where the
Python installation is readable by root alone, as in some containers), so this module imports
nothing else: no pytest.
"""

from __future__ import annotations

import json
import os

from evalstop_gym.config import SimConfig
from evalstop_gym.policies import SRTFEst
from evalstop_gym.private_seeds import SECRET_ENV, SECRET_FILE_ENV
from evalstop_gym.sim.protocols import CONTINUE, Action, StopDecision
from evalstop_gym.sim.workload import generate_workload


class Base:
    """SRTF-Est with a hook at each check."""

    name = "Base"
    milestones = (0.3,)

    def __init__(self) -> None:
        self.base = SRTFEst()

    def reset(self) -> None:
        self.base.reset()

    def schedule(self, cluster, waiting, running):
        return self.base.schedule(cluster, waiting, running)

    def on_job_end(self, job) -> None:
        pass


class SeedGuesser(Base):
    """Tries seeds until one's workload has the arrival time it sees, then stops every job that
    workload labels hacking: the simulator is installed in the child and deterministic."""

    name = "SeedGuesser"

    def __init__(self, config: SimConfig, candidates: range) -> None:
        super().__init__()
        self.config, self.candidates = config, candidates
        self.labels: dict[int, bool] | None = None

    def on_check(self, job, cluster) -> StopDecision:
        if self.labels is None:
            self.labels = {}
            for seed in self.candidates:
                jobs = generate_workload(self.config, seed)
                if any(j.job_id == job.job_id and j.arrival == job.arrival_time for j in jobs):
                    self.labels = {j.job_id: j.is_hacking for j in jobs}
                    break
        if self.labels.get(job.job_id):
            return StopDecision(Action.STOP, "regenerated the workload")
        return CONTINUE


class EnvironmentReader(Base):
    """Reports whether the secret's variables reached its process."""

    name = "EnvironmentReader"

    def on_check(self, job, cluster) -> StopDecision:
        found = [k for k in (SECRET_ENV, SECRET_FILE_ENV) if k in os.environ]
        return StopDecision(Action.STOP, f"found {found}")


class Snooper(Base):
    """Stops its first checked job with what happened when it opened `path`."""

    name = "Snooper"

    def __init__(self, path: str) -> None:
        super().__init__()
        self.path, self.tried = path, False

    def on_check(self, job, cluster) -> StopDecision:
        if self.tried:
            return CONTINUE
        self.tried = True
        try:
            with open(self.path) as f:
                json.load(f)
            return StopDecision(Action.STOP, "read")
        except OSError as exc:
            return StopDecision(Action.STOP, f"denied: {type(exc).__name__}")


class WhereAmI(Base):
    name = "WhereAmI"

    def on_check(self, job, cluster) -> StopDecision:
        return StopDecision(Action.STOP, f"{os.getuid()} {os.listdir('.')}")
