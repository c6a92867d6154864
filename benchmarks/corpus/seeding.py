"""The one determinism regime every corpus generator trains under, and what it promises.

Within one machine a rebuild is bit for bit: the run's seed, one CPU thread, and torch's
deterministic kernels. Across machines it is not, and cannot be: torch picks its vectorised kernels
by CPU (AVX2, AVX-512, none), and each sums in its own order. What holds across machines is
`REPRODUCIBLE`: identity, eval schedule and counts equal, floats within `RTOL`, labels equal.

Why these tolerances. The supervised family trains in float32 (unit roundoff 2**-24, about 6e-8);
a different summation order moves each logged loss by a few units in the last place, and every SGD
step feeds that back into the weights, so by the end of 1,200-1,800 steps a stable run's losses
differ by thousands of roundoffs: `RTOL` allows 1e-3, about 1e4 roundoffs (the regeneration
test's runs stay inside it on every kernel path torch offers here). The reward family computes in
float64 (roundoff 1.1e-16) over 600-900 steps: 1e-9. Accuracies are counts of correct predictions
over a fixed split: a last-bit difference flips a prediction only at a near tie, which no kernel
path here did on those runs, so they are compared exactly. A run whose training is chaotic (a
high learning rate with label noise) can drift further on another CPU: a full rebuild there keeps
its labels and schedule, not its floats.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

RTOL = {"supervised": 1e-3, "reward": 1e-9}
EXACT = ("job_id", "step", "family", "max_steps")        # identity and the eval schedule
COUNTS = {"supervised": ("eval_score", "test_score")}     # accuracies: correct / split size


def deterministic_torch(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)


def differences(family: str, got: Sequence[dict[str, str]],
                expected: Sequence[dict[str, str]]) -> list[str]:
    """Where a regenerated run breaks `REPRODUCIBLE` against the shipped one (empty: it holds)."""
    if len(got) != len(expected):
        return [f"{len(got)} evals, expected {len(expected)}"]
    exact = set(EXACT) | set(COUNTS.get(family, ()))
    found = []
    for g, e in zip(got, expected, strict=True):
        if g.keys() != e.keys():
            return [f"columns {sorted(g)}, expected {sorted(e)}"]
        for col in e:
            same = (g[col] == e[col] if col in exact
                    else math.isclose(float(g[col]), float(e[col]), rel_tol=RTOL[family]))
            if not same:
                found.append(f"{e['job_id']} step {e['step']} {col}: {g[col]} != {e[col]}")
    return found


REPRODUCIBLE = (f"identity and eval schedule ({', '.join(EXACT)}) and accuracy counts equal; "
                f"other floats within relative {RTOL['supervised']:g} (supervised, float32) and "
                f"{RTOL['reward']:g} (reward, float64); labels equal")
