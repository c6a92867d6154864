"""Wall time of the whole experiment matrix (`evalstop-bench run all`) from scratch.

    python -m evalstop_gym.benchmarks.perf.matrix_walltime --workers 2

Runs every experiment into a fresh temporary directory (nothing is reused) and prints the wall
time, the summed per-run simulation time and the slowest cells, so the "whole matrix in under two
minutes on two cores" target can be checked on any machine.
"""

from __future__ import annotations

import argparse
import os
import tempfile
import time
from pathlib import Path

import pandas as pd

from ..catalog import MATRIX
from ..sweep.pipeline import prepare, run_experiment


def measure(workers: int, out: Path) -> tuple[float, pd.DataFrame]:
    """(wall seconds, per-run timings) of the full matrix run into `out`."""
    start = time.perf_counter()
    timings = []
    for name in MATRIX:
        done = run_experiment(prepare(name), out, workers=workers)
        timings.append(done.sweep.timing.assign(experiment=name))
    return time.perf_counter() - start, pd.concat(timings, ignore_index=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--workers", type=int, default=os.cpu_count() or 1)
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory() as tmp:
        wall, timing = measure(args.workers, Path(tmp))
    per_exp = timing.groupby("experiment")["wall_s"].agg(["count", "sum"]).round(1)
    print(per_exp.to_string())
    print(timing.groupby(["experiment", "cell"])["wall_s"].mean().nlargest(5).round(2)
          .to_string())
    print(f"matrix: {len(timing)} runs, {timing['wall_s'].sum():.1f} s summed simulation, "
          f"wall time {wall:.1f} s with {args.workers} worker(s) on {os.cpu_count()} CPU(s)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
