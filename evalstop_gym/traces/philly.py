"""Replay a window of the Philly GPU-cluster trace (Jeon et al., ATC'19) as the workload.

The trace gives, per job, a submission time, a duration (s) and a GPU count; it gives no job type,
tenant or training curve. So (documented in `TraceConfig`):
- arrivals are minutes since the window start, durations minutes, both times `time_scale`;
  durations below `min_duration_min` are raised to it (a job must live long enough to evaluate);
- GPU counts are multiplied by `gpu_scale`, rounded, and capped at min(gpu_cap, cluster.gpus);
- the type comes from the job's trace GPU-hours and GPU count (short -> LoRA, medium -> DPO,
  long or >= rlhf_min_gpus GPUs -> RLHF);
- tenants, hacking labels, curves and eval noise are drawn from the run's seed exactly as for a
  synthetic workload (by `evalstop_gym.workloads`, which makes the jobs), so a seed changes the
  curves, never the trace.
The trace is read with the csv module (the simulator core stays pandas-free) and cached per file.
"""

from __future__ import annotations

import csv
import functools
import gzip
import math
from datetime import datetime
from importlib import resources
from pathlib import Path
from typing import NamedTuple

import numpy as np

from ..config import ConfigError, SimConfig, TraceConfig
from ..sim.jobs import JOB_TYPES
from ..sim.workload_arrays import Specs

PACKAGED = "philly.csv.gz"  # the public Philly subset shipped as package data (data/README.md)
COLUMNS = ("timestamp", "duration", "num_gpus", "cluster")
TIME_FORMAT = "%Y-%m-%d %H:%M:%S"


class TraceError(ConfigError):
    """A trace file that cannot be replayed; the message names the file and the line."""


class TraceRows(NamedTuple):
    """Trace jobs sorted by submission: seconds since the epoch, seconds, GPUs, cluster ids."""

    submit: np.ndarray
    duration: np.ndarray
    gpus: np.ndarray
    cluster: np.ndarray


def resolve_path(path: str) -> Path:
    """`path` as given when it names a file; the packaged subset for its name (the default)."""
    p = Path(path).expanduser()
    if p.is_file() or p.is_absolute() or str(path) != PACKAGED:
        return p
    return Path(str(resources.files("evalstop_gym.traces") / "data" / PACKAGED))


def _parse_row(row: dict[str, str], where: str) -> tuple[str, float, int, str]:
    try:
        stamp = row["timestamp"].strip()
        duration, gpus = float(row["duration"]), float(row["num_gpus"])
    except (ValueError, AttributeError) as exc:
        raise TraceError(f"{where}: cannot parse ({exc})") from None
    if not math.isfinite(duration) or duration < 0:
        raise TraceError(f"{where}: duration must be a finite number >= 0, got {duration!r}")
    if gpus != int(gpus) or gpus < 1:
        raise TraceError(f"{where}: num_gpus must be a whole number >= 1, got {row['num_gpus']!r}")
    return stamp, duration, int(gpus), (row["cluster"] or "").strip()


def _read_rows(path: Path) -> list[tuple[str, float, int, str]]:
    opener = gzip.open if path.suffix == ".gz" else open
    with opener(path, "rt", newline="") as fh:
        reader = csv.DictReader(fh)
        missing = [c for c in COLUMNS if c not in (reader.fieldnames or [])]
        if missing:
            raise TraceError(f"{path}: line 1: missing column(s) {', '.join(missing)}; "
                             f"expected {', '.join(COLUMNS)}")
        rows = [_parse_row(r, f"{path}: line {reader.line_num}") for r in reader]
    if not rows:
        raise TraceError(f"{path}: no jobs after the header")
    return rows


def _parse_times(path: Path, stamps: tuple[str, ...]) -> np.ndarray:
    """All timestamps at once; on failure, the first bad one by line (header is line 1)."""
    try:
        return np.array(stamps, dtype="datetime64[s]").astype(np.int64).astype(float)
    except ValueError:
        for i, stamp in enumerate(stamps):
            try:
                datetime.strptime(stamp, TIME_FORMAT)
            except ValueError:
                raise TraceError(f"{path}: line {i + 2}: timestamp {stamp!r} is not "
                                 f"'YYYY-MM-DD HH:MM:SS'") from None
        raise


@functools.lru_cache(maxsize=4)
def _load_cached(path: Path, mtime: float) -> TraceRows:
    stamps, duration, gpus, cluster = zip(*_read_rows(path), strict=True)
    # Trace times are naive local clock times; seconds since the epoch of that clock.
    submit = _parse_times(path, stamps)
    order = np.argsort(submit, kind="stable")
    return TraceRows(submit[order], np.array(duration)[order], np.array(gpus)[order],
                     np.array(cluster)[order])


def load_trace(path: str | Path) -> TraceRows:
    """The whole trace, validated and sorted by submission time."""
    p = resolve_path(str(path))
    if not p.is_file():
        raise TraceError(f"{p}: trace file not found; set trace.path to a copy of philly.csv "
                         f"(relative to the current directory) or to {PACKAGED!r}, the packaged "
                         f"subset")
    return _load_cached(p, p.stat().st_mtime)


def select_window(rows: TraceRows, cfg: TraceConfig) -> TraceRows:
    """The jobs of one virtual cluster (or all) submitted within [start, start + hours)."""
    keep = rows.cluster == cfg.cluster if cfg.cluster else np.ones(len(rows.submit), bool)
    if not keep.any():
        known = ", ".join(sorted(set(rows.cluster.tolist())))
        raise ConfigError(f"trace.cluster: {cfg.cluster!r} is not in the trace; known: {known}")
    start = (float(np.datetime64(cfg.start, "s").astype(np.int64)) if cfg.start
             else float(rows.submit[keep].min()))
    keep &= (rows.submit >= start) & (rows.submit < start + cfg.hours * 3600.0)
    idx = np.flatnonzero(keep)
    if cfg.max_jobs:
        idx = idx[:cfg.max_jobs]
    if len(idx) == 0:
        raise ConfigError(f"trace: no jobs in cluster {cfg.cluster or '(all)'} from "
                          f"{cfg.start or 'the first job'} for {cfg.hours:g} h; move trace.start")
    return TraceRows(rows.submit[idx] - start, rows.duration[idx], rows.gpus[idx],
                     rows.cluster[idx])


def job_type_of(duration_s: float, gpus: int, cfg: TraceConfig) -> str:
    """LoRA / DPO / RLHF from trace GPU-hours, with many-GPU jobs always RLHF."""
    return JOB_TYPES[int(trace_types(np.array([duration_s]), np.array([gpus]), cfg)[0])]


def trace_types(duration_s: np.ndarray, gpus: np.ndarray, cfg: TraceConfig) -> np.ndarray:
    """`job_type_of` of each trace job, as type codes (indices in JOB_TYPES)."""
    gpu_hours = duration_s * gpus / 3600.0
    rlhf = (gpus >= cfg.rlhf_min_gpus) | (gpu_hours > cfg.dpo_max_gpu_hours)
    lora = gpu_hours <= cfg.lora_max_gpu_hours
    codes = np.where(lora, JOB_TYPES.index("lora"), JOB_TYPES.index("dpo"))
    return np.where(rlhf, JOB_TYPES.index("rlhf"), codes).astype(np.int64)


def trace_specs(config: SimConfig, window: TraceRows, tenants: np.ndarray, types: np.ndarray,
                hacking: np.ndarray) -> Specs:
    """Arrival, duration, GPUs and type of each windowed trace job, scaled to the cluster."""
    cfg = config.trace
    cap = min(cfg.gpu_cap, config.cluster.gpus)
    gpus = np.minimum(cap, np.maximum(1, np.rint(window.gpus * cfg.gpu_scale))).astype(np.int64)
    duration = np.maximum(cfg.min_duration_min, window.duration / 60.0 * cfg.time_scale)
    return Specs(np.asarray(tenants, np.int64), types, window.submit / 60.0 * cfg.time_scale,
                 duration.astype(np.float64), gpus, (types == JOB_TYPES.index("rlhf")) & hacking)
