"""The one place a run's jobs are made: arrivals x curves x pace.

Arrivals, sizes and labels come from the synthetic generator (`sim.workload.synthetic_specs`) or
a window of the Philly trace (`traces.philly`); curves from the formulas (`sim.workload.
make_jobs`) or the corpus of real runs (`traces.corpus`); step-time jitter last (`sim.pace`).
Each from its own stream of the run's seed. `sim/workload.py` holds the primitives and `traces/`
the readers; this module sits above both, so neither imports the other.
"""

from __future__ import annotations

import numpy as np

from .config import SimConfig
from .sim.curves import eval_noise
from .sim.jobs import JOB_TYPES, Job
from .sim.workload import (
    RunSpecs,
    Streams,
    draw_hacking,
    eval_points,
    finish_jobs,
    make_jobs,
    seed_streams,
    synthetic_specs,
)
from .traces.corpus import corpus_jobs
from .traces.philly import job_type_of, load_trace, select_window, trace_specs


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The jobs of one run, in arrival order, with hidden curves, pre-drawn eval noise and
    step-time jitter. `workload.source: philly` replays a window of the Philly trace;
    `curves.source: corpus` takes each job's curves from a real run."""
    streams = seed_streams(seed)
    source = synthetic_specs if config.workload.source == "synthetic" else philly_specs
    make = corpus_jobs if config.curves.source == "corpus" else make_jobs
    return finish_jobs(config, streams, *source(config, streams), make)


def philly_specs(config: SimConfig, streams: Streams) -> RunSpecs:
    """The job specs of a run replayed from the Philly trace window, in arrival order, with its
    eval points and noise; tenants and labels as for a synthetic workload (`counts`), from the
    run's streams."""
    window = select_window(load_trace(config.trace.path), config.trace)
    n = len(window.submit)
    tenants = streams.arrivals.integers(0, config.workload.n_tenants, n)
    types = np.array([JOB_TYPES.index(job_type_of(float(d), int(g), config.trace))
                      for d, g in zip(window.duration, window.gpus, strict=True)], np.int64)
    hacking = draw_hacking(config.workload, types, streams.curves)
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(streams.noise, (n, len(points)), config.noise, points)
    return trace_specs(config, window, tenants, hacking), points, noise
