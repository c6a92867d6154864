"""What TrendTest costs on a live run (`evalstop-bench which-detector --trend-cost`)."""

from __future__ import annotations

import math
import time
import tracemalloc
from collections.abc import Sequence

import pandas as pd

from evalstop_gym.online import RunMonitor
from evalstop_gym.policies.trend_null import grid_threshold, null_paths

COST_SIZES = (1_000, 10_000)


def trend_cost(sizes: Sequence[int] = COST_SIZES) -> pd.DataFrame:
    """What TrendTest costs on a live run of n evals (a RunMonitor fed a rising curve, so every
    eval is judged): the calibration from cold (seconds, tracemalloc peak MB) and then the
    monitor's updates (microseconds per eval, peak MB). Printed by `--trend-cost`; not a test:
    the rates move on a shared machine, the memory does not."""
    rows = []
    for n in sizes:
        null_paths.cache_clear()
        grid_threshold.cache_clear()
        tracemalloc.start()
        t0 = time.perf_counter()
        monitor = RunMonitor("TrendTest-0.05", mode="max", max_steps=n)
        monitor.update(1, 0.0)
        for i in range(2, 5):            # the first judged eval calibrates for n looks
            monitor.update(i, 0.001 * i)
        calibrate = time.perf_counter() - t0
        cal_peak = tracemalloc.get_traced_memory()[1] / 1e6
        tracemalloc.reset_peak()
        t1 = time.perf_counter()
        for i in range(5, n + 1):
            monitor.update(i, 0.001 * i + 0.0001 * math.sin(i))
        per_eval = (time.perf_counter() - t1) / max(n - 4, 1)
        rows.append({"evals": n, "calibration_s": calibrate, "calibration_peak_mb": cal_peak,
                     "us_per_eval": 1e6 * per_eval,
                     "monitor_peak_mb": tracemalloc.get_traced_memory()[1] / 1e6})
        tracemalloc.stop()
    return pd.DataFrame(rows)
