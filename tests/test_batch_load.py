"""The compiled vector env loads a reset's workload inside its compiled step (`env/batch_load.py`).

A reset stages the drawn workload; the compiled code packs it into the env's row with the packer
`native.run` uses. These tests check what lands in the row, the staging's round trip, and that
a vector step whose envs autoreset is one compiled call (the equivalence with the single env is
`test_vector_equivalence.py`'s).
"""

from __future__ import annotations

from typing import Any

import gymnasium as gym
import numpy as np

from evalstop_gym.env.batch_load import stage, staged_workload
from evalstop_gym.env.compiled_batch import CompiledBatch
from evalstop_gym.sim.native_kernel import Jobs
from evalstop_gym.sim.packing import check_layout, check_losses, check_pointers, pack
from evalstop_gym.simulate import resolve_config
from evalstop_gym.workloads import draw_workload

CONFIG = resolve_config("e2", {"workload.n_jobs": 30})


def test_staged_workloads_come_back_field_for_field() -> None:
    """Three workloads of different sizes staged together: workload k's part of every field
    is its own arrays, with their dtypes."""
    workloads = [draw_workload(resolve_config("e2", {"workload.n_jobs": n}), seed)
                 for n, seed in ((30, 1), (5, 2), (12, 3))]
    parts = []
    for w in workloads:
        layout = check_layout(w, (0.5,))
        chk_ptr = check_pointers(w, layout)
        parts.append((w, layout, chk_ptr, check_losses(w, layout, chk_ptr)))
    staged = stage(parts)
    for k, (w, layout, chk_ptr, loss) in enumerate(parts):
        back_w, back_layout, back_ptr, back_loss = staged_workload(staged, k)
        for name, a, b in zip((*w._fields, *layout._fields, "chk_ptr", "chk_loss"),
                              (*w, *layout, chk_ptr, loss),
                              (*back_w, *back_layout, back_ptr, back_loss), strict=True):
            assert a.dtype == b.dtype and a.shape == b.shape and a.tobytes() == b.tobytes(), \
                (k, name)


def test_a_reset_packs_into_its_row_what_pack_packs() -> None:
    """After resets (the second on a bigger workload, which grows every row), env i's row
    holds `pack`'s arrays of its workload in its first n / checks / evals entries."""
    big = resolve_config("e2", {"workload.n_jobs": 45})

    class Growing(CompiledBatch):
        def _workload(self, seed: int) -> Any:
            return draw_workload(big if seed == 6 else CONFIG, seed)

    batch = Growing(2, CONFIG, milestones=(0.25, 0.5))
    batch.reset([0, 1], [4, 5])
    batch.reset([1], [6])
    for i, (config, seed) in enumerate(((CONFIG, 4), (big, 6))):
        packed = pack(draw_workload(config, seed), (0.25, 0.5))
        for name in Jobs._fields:
            stored = getattr(batch._arrays.jobs, name)[i, :len(packed[name])]
            assert stored.tobytes() == packed[name].tobytes(), (i, name)


def test_a_vector_step_with_autoresets_is_one_compiled_call() -> None:
    venv = gym.make_vec("EvalStopCluster-v0", num_envs=3, vectorization_mode="vector_entry_point",
                        **{"workload.n_jobs": 12})
    core = venv.unwrapped.core
    assert isinstance(core, CompiledBatch)
    calls = []
    step_all = core._step_all

    def counted(*args: Any) -> None:
        calls.append(args)
        step_all(*args)

    core._step_all = counted   # type: ignore[method-assign]
    venv.reset(seed=3)
    resets = 0
    for _ in range(400):
        calls.clear()
        autoreset = venv.unwrapped._autoreset.copy()
        venv.step(np.ones(3, np.int64))
        resets += int(autoreset.sum())
        assert len(calls) == 1
    assert resets >= 3
