"""The hacking base-rate sweep beyond the paper: BEYOND.md's precision / FPR table of it."""

from __future__ import annotations

import pandas as pd

from evalstop_gym.experiment import load_experiment

from .noise_models import NOISE_NAMES
from .section_inputs import SectionInputs
from .tables import pct, to_markdown


def base_rate_table(runs: pd.DataFrame) -> str:
    """Precision and FPR of every detector at each hacking base rate."""
    cells = runs[runs["detector"] != "none"]
    mean = cells.groupby(["detector", "value"], sort=False)[["precision", "fpr"]].mean()
    wide = mean.reset_index().pivot(index="detector", columns="value")
    order = list(dict.fromkeys(cells["detector"]))
    frame = pd.DataFrame({"detector": order})
    for v in sorted(cells["value"].unique()):
        frame[f"P/FPR @{v:g}"] = [f"{pct(wide.loc[d, ('precision', v)])} / "
                                  f"{pct(wide.loc[d, ('fpr', v)])}" for d in order]
    return to_markdown(frame)


def section(runs: pd.DataFrame | None, inputs: SectionInputs) -> str:
    """The table under a heading naming the sweep's noise, read from its config."""
    if runs is None:
        return ""
    noise = load_experiment(inputs.name).config.noise
    return "\n".join([f"## Hacking base rate ({inputs.name}, "
                      f"{NOISE_NAMES.get(noise.model, noise.model)} sigma {noise.sigma:g}): "
                      "precision / FPR\n", base_rate_table(runs), ""])
