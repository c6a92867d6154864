"""Replayed arrivals beyond the paper: BEYOND.md's section on the sweep over a real trace's
arrivals, its experiment table (table.md, written beside its runs) under a word on its source."""

from __future__ import annotations

import pandas as pd

from .section_inputs import SectionInputs


def section(runs: pd.DataFrame | None, inputs: SectionInputs) -> str:
    """"" when the sweep left no table (the trace is not on every machine)."""
    table = inputs.folder / "table.md"
    if not table.exists():
        return ""
    return "\n".join([
        f"## Replayed arrivals: one day of the Philly trace ({inputs.name})\n",
        "Arrivals, durations and GPU counts from Microsoft's Philly trace (virtual "
        f"cluster 6214e9, see configs/{inputs.name}.yaml); job types from GPU-hours; curves and "
        "labels drawn as in E2.\n", table.read_text().split("\n", 1)[1].strip(), ""])
