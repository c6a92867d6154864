"""A `CompiledBatch` pickled mid-episode steps on exactly as the original: the copy holds the
same state and finds its compiled entry point again (machine code is not pickled)."""

from __future__ import annotations

import pickle

import numpy as np

from evalstop_gym.env.compiled_batch import CompiledBatch


def test_pickled_batch_steps_on_bit_for_bit() -> None:
    batch = CompiledBatch(3, "e2", **{"workload.n_jobs": 12})
    batch.reset([0, 1, 2], [5, 6, 7])
    rng = np.random.default_rng(0)
    for _ in range(5):
        batch.step((rng.random(3) < 0.2).astype(np.int64))
    copy = pickle.loads(pickle.dumps(batch))
    for _ in range(20):
        if batch.terminated.all():
            break
        stop = (rng.random(3) < 0.2).astype(np.int64)
        batch.step(stop)
        copy.step(stop)
        np.testing.assert_array_equal(copy.reward, batch.reward)
        np.testing.assert_array_equal(copy.terminated, batch.terminated)
        for key, rows in batch.obs.items():
            np.testing.assert_array_equal(copy.obs[key], rows)
