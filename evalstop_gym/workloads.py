"""The one place a run's jobs are made: arrivals x curves x pace.

Arrivals, sizes and labels come from the synthetic generator (`sim.workload.synthetic_specs`) or
a window of the Philly trace (`traces.philly`); curves from the formulas (`sim.workload.
make_jobs`) or the corpus of real runs (`traces.corpus`); step-time jitter last (`sim.pace`).
Each from its own stream of the run's seed. `sim/workload.py` holds the primitives and `traces/`
the readers; this module sits above both, so neither imports the other.
"""

from __future__ import annotations

from .config import SimConfig
from .sim.jobs import Job
from .sim.workload import finish_jobs, make_jobs, seed_streams, synthetic_specs
from .traces.corpus import corpus_jobs
from .traces.philly import trace_workload


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The jobs of one run, in arrival order, with hidden curves, pre-drawn eval noise and
    step-time jitter. `workload.source: philly` replays a window of the Philly trace;
    `curves.source: corpus` takes each job's curves from a real run."""
    streams = seed_streams(seed)
    source = synthetic_specs if config.workload.source == "synthetic" else trace_workload
    make = corpus_jobs if config.curves.source == "corpus" else make_jobs
    return finish_jobs(config, streams, *source(config, streams), make)
