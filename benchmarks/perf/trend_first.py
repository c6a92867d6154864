"""`python -m evalstop_gym.benchmarks.perf.trend_first`: what TrendTest's first decision costs.

TrendTest calibrates its stop threshold for a run's horizon (its number of looks) the first time
it judges the run: a live Hugging Face or Lightning run waits that long at its first evals.
Each horizon is measured in a fresh interpreter (the calibration is memoised per process, so a
second run of the same process would measure a lookup): a `RunMonitor("TrendTest-0.05",
max_steps=H * EVERY)` fed a flat noisy run, one eval every EVERY steps, and the wall time of its
first JUDGED updates, the one that calibrates among them. Later updates cost microseconds. The
target is BUDGET_S at every horizon; the exit code is 1 when a horizon misses it.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
from collections.abc import Sequence

BUDGET_S = 0.5
EVERY = 100                # training steps between evals
JUDGED = 8                 # updates timed: MIN_EVALS (4) and a few beyond
HORIZONS = (10, 100, 256, 1_000, 10_000)   # looks (evals) of a run

PROBE = """
import json, sys, time
import numpy as np
from evalstop_gym.online import RunMonitor

looks, every, judged = map(int, sys.argv[1:4])
monitor = RunMonitor("TrendTest-0.05", mode="max", max_steps=looks * every)
values = 0.5 + 0.01 * np.random.default_rng(0).standard_normal(judged)
start = time.perf_counter()
for i, value in enumerate(values, 1):
    monitor.update(i * every, float(value))
print(json.dumps(time.perf_counter() - start))
"""


def first_decision_s(looks: int, timeout: float = 600.0) -> float:
    """Seconds of the first JUDGED updates of a run of `looks` evals, in a fresh interpreter."""
    done = subprocess.run([sys.executable, "-c", PROBE, str(looks), str(EVERY), str(JUDGED)],
                          capture_output=True, text=True, timeout=timeout, check=True)
    return float(json.loads(done.stdout.strip().splitlines()[-1]))


def table(horizons: Sequence[int]) -> list[tuple[int, float, bool]]:
    return [(h, s, s < BUDGET_S) for h in horizons for s in [first_decision_s(h)]]


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--horizons", type=int, nargs="+", default=list(HORIZONS),
                        help="looks (evals) per run to measure")
    args = parser.parse_args(argv)
    if any(h < 1 for h in args.horizons):
        parser.error(f"--horizons {args.horizons}: expected whole numbers >= 1")
    rows = table(args.horizons)
    print(f"TrendTest-0.05, first {JUDGED} updates (one eval every {EVERY} steps), target "
          f"< {BUDGET_S:g} s")
    print("| looks | max_steps | seconds | within target |\n|---:|---:|---:|:---:|")
    for looks, seconds, ok in rows:
        print(f"| {looks:,} | {looks * EVERY:,} | {seconds:.3f} | {'yes' if ok else 'NO'} |")
    return 0 if all(ok for _, _, ok in rows) else 1


if __name__ == "__main__":
    sys.exit(main())
