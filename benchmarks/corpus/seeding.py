"""The one determinism regime every corpus generator trains under (what makes a rebuild bit for
bit): the run's seed, one CPU thread, and torch's deterministic kernels."""

from __future__ import annotations


def deterministic_torch(seed: int) -> None:
    import torch

    torch.manual_seed(seed)
    torch.set_num_threads(1)
    torch.use_deterministic_algorithms(True)
