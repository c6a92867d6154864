"""A detector on the suite's real tasks: the public training runs, each replayed alone.

Each real task is the public runs of the suite's split (`real_split`, the test half: the design
half chose the default detector) at one eval density, scored by `corpus.public_scoring` exactly
as "Which detector?" scores them. A detector's replay of one task is deterministic, so it is one
run; its row is saved in `OUT/<task>/real/` keyed by a digest of the package's code, the
detector's own source and the suite's definition, and reused while they are unchanged. NoStop
stops nothing: its row is computed without a replay. Learned (`model:`) policies act on the
simulator's observation and have no real task.
"""

from __future__ import annotations

import functools
import hashlib
import json
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.policies.registry import user_sources
from evalstop_gym.policies.user_code import MODEL_PREFIX
from evalstop_gym.traces.public_runs import PublicRun, load_public, public_dir

from .. import durable
from ..corpus.public_scoring import score_public
from ..corpus.scoring import DENSITIES
from ..scoring.tasks import Task
from ..sweep.runner import code_digest, read_run
from ..usage import UsageError
from .suite import Suite

NO_STOP = ("none", "NoStop")


def applies(detector: str) -> bool:
    """Whether a policy has real tasks: a detector that reads eval curves, not a model."""
    return not detector.startswith(MODEL_PREFIX)


def public_runs(suite: Suite, measuring: bool = False) -> list[PublicRun]:
    """The split's runs with a clear label (ambiguous runs count in neither recall nor false
    stops), the first `real_runs` of them when the suite says so. Unless `measuring` the
    references, refused in one line where the suite's real references were measured on other
    public runs (the corpus grew or was relabelled: its references no longer anchor it)."""
    stale = sorted(task.id for task in suite.real
                   if suite.references.get(task.id, {}).get("data", data_digest())
                   != data_digest())
    if stale and not measuring:
        raise UsageError(f"suite {suite.name}: the public runs changed since the references of "
                         f"{', '.join(stale)} were measured (data {data_digest()}); a suite "
                         f"whose data changed is a new version: re-measure its references")
    runs = [r for r in load_public() if r.split == suite.real_split
            and r.label.label in ("declining", "healthy")]
    return runs[:suite.real_runs] if suite.real_runs else runs


def replay(detector: str, task: Task, runs: list[PublicRun]) -> dict[str, Any]:
    """The task's metrics for one detector: recall of declines, false stops of healthy runs,
    their difference (the measure), the share of the decline avoided."""
    if detector in NO_STOP:
        declining = sum(r.label.label == "declining" for r in runs)
        return {"recall": 0.0 if declining else np.nan, "fpr": 0.0, "decline_avoided": 0.0}
    rows = score_public([detector], runs, {task.real: DENSITIES[task.real]})
    bad, healthy = rows[rows.label == "declining"], rows[rows.label == "healthy"]
    return {"recall": float(bad.stopped_early.mean()) if len(bad) else np.nan,
            "fpr": float(healthy.stopped_early.mean()) if len(healthy) else np.nan,
            "decline_avoided": float(bad.decline_avoided.mean()) if len(bad) else np.nan}


@functools.cache
def data_digest() -> str:
    """The public runs' bytes (their curves and provenance, labels read from them)."""
    h = hashlib.sha256()
    for path in sorted(public_dir().iterdir()):
        h.update(path.name.encode())
        h.update(path.read_bytes())
    return h.hexdigest()[:16]


def real_digest(detector: str, task: Task, suite: Suite) -> str:
    """What a detector's replay of a task depends on: its name and source, the package's code,
    the public runs' data, and which of them the suite takes."""
    blob = json.dumps([detector, task.real, code_digest(), user_sources([detector]),
                       data_digest(), suite.real_split, suite.real_runs], sort_keys=True)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def file_name(policy: str) -> str:
    safe = "".join(c if c.isalnum() or c in "-_.+=" else "_" for c in policy)[-60:]
    return f"{safe}~{hashlib.sha256(policy.encode()).hexdigest()[:8]}.json"


def real_row(policy: str, detector: str, task: Task, suite: Suite, out: Path,
             runs: list[PublicRun]) -> dict[str, Any]:
    """The saved row when its digest still holds, else a fresh replay saved at once."""
    path = out / task.id / "real" / file_name(policy)
    digest = real_digest(detector, task, suite)
    saved = read_run(path)
    if saved is not None and saved.get("digest") == digest:
        return dict(saved["row"])
    row = {"task": task.id, "policy": policy, "seed": -1, **replay(detector, task, runs)}
    durable.write_json(path, {"digest": digest, "row": row})
    return row
