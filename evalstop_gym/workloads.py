"""The one place a run's jobs are drawn: arrivals x curves x pace, into arrays.

Arrivals, sizes and labels come from the synthetic generator (`sim.workload.synthetic_specs`) or
a window of the Philly trace (`traces.philly`); curves from the formulas (`sim.workload.
formula_curves`) or the corpus of real runs (`traces.corpus`); step-time jitter last
(`sim.workload.draw_pace`). Each from its own stream of the run's seed, straight into a
`WorkloadArrays` (`draw_workload`: what the compiled vector env loads); `generate_workload`
makes the job records from those arrays. `sim/workload.py` holds the primitives and `traces/`
the readers; this module sits above both, so neither imports the other.
"""

from __future__ import annotations

from .config import SimConfig
from .sim.curves import eval_noise
from .sim.jobs import Job
from .sim.workload import (
    RunSpecs,
    Streams,
    draw_hacking,
    eval_points,
    finish_arrays,
    formula_curves,
    seed_streams,
    synthetic_specs,
)
from .sim.workload_arrays import WorkloadArrays, jobs_of
from .traces.corpus import corpus_curves
from .traces.philly import load_trace, select_window, trace_specs, trace_types


def draw_workload(config: SimConfig, seed: int) -> WorkloadArrays:
    """The jobs of one run as arrays, in arrival order, with hidden curves, pre-drawn eval noise
    and step-time jitter. `workload.source: philly` replays a window of the Philly trace;
    `curves.source: corpus` takes each job's curves from a real run. The one drawing of a
    workload: `generate_workload` makes the job records from it."""
    streams = seed_streams(seed)
    source = synthetic_specs if config.workload.source == "synthetic" else philly_specs
    curves = corpus_curves if config.curves.source == "corpus" else formula_curves
    return finish_arrays(config, streams, *source(config, streams), curves)


def generate_workload(config: SimConfig, seed: int) -> list[Job]:
    """The job records of one run (`draw_workload`'s arrays, a record per job)."""
    return jobs_of(draw_workload(config, seed))


def philly_specs(config: SimConfig, streams: Streams) -> RunSpecs:
    """The job specs of a run replayed from the Philly trace window, in arrival order, with its
    eval points and noise; tenants and labels as for a synthetic workload (`counts`), from the
    run's streams."""
    window = select_window(load_trace(config.trace.path), config.trace)
    n = len(window.submit)
    tenants = streams.arrivals.integers(0, config.workload.n_tenants, n)
    types = trace_types(window.duration, window.gpus, config.trace)
    hacking = draw_hacking(config.workload, types, streams.curves)
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(streams.noise, (n, len(points)), config.noise, points)
    return trace_specs(config, window, tenants, types, hacking), points, noise
