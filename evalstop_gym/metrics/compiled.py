"""The per-job loops compiled (imported on first use, so `import evalstop_gym` loads no numba)."""

from __future__ import annotations

import numpy as np

from ..sim.checkpoint import best_eval, true_score_at
from ..sim.jit import jitable, njit
from ..sim.kernel_jobs import reported
from . import per_job

for _plain in (best_eval, true_score_at, per_job.useful_time, per_job.saved_minutes,
               per_job.highest):
    jitable(_plain)

score_jobs = njit(cache=True)(per_job.score_jobs)


@njit(cache=True)
def reported_all(work, paced, chk_ptr, next_check, chk_prog, chk_work):
    """Each job's reported progress once `work` is done (`Job.reported_progress`)."""
    progress = np.empty(len(work))
    for j in range(len(work)):
        progress[j] = reported(j, work[j], paced, chk_ptr, next_check, chk_prog, chk_work)
    return progress
