"""How hard detection is: the drop of the hacking curves measured in units of the eval noise,
BEYOND.md's first table (the paper's calibrated collapse against Gao's form)."""

from __future__ import annotations

from collections.abc import Sequence

import pandas as pd

from evalstop_gym.config import CONFIG_DIR, load_sim_config
from evalstop_gym.experiment import load_experiment
from evalstop_gym.sim.workload import drop_to_noise

from .noise_sweep import TABLE_SIGMAS
from .tables import to_markdown

FAMILIES = (("paper collapse 1.5-2.5", "defaults.yaml"),
            ("Gao-faithful collapse 1", "gao_faithful.yaml"))


def drop_to_noise_table(sigmas: Sequence[float] = TABLE_SIGMAS,
                        seeds: Sequence[int] | None = None) -> str:
    """Drop-to-noise of the paper-collapse and Gao-faithful hacking curves (E2 workload and,
    by default, E2's seeds)."""
    seeds = load_experiment("e2").seeds if seeds is None else seeds
    rows = []
    for family, file in FAMILIES:
        for s in sigmas:
            cfg = load_sim_config(CONFIG_DIR / file, {"noise.sigma": s})
            d = drop_to_noise(cfg, seeds)
            rows.append({"curve family": family, "sigma": f"{s:g}",
                         "(peak - final) / sigma": f"{d.peak_to_final:.2f}",
                         "largest post-peak step / (sigma sqrt 2)": f"{d.step:.2f}",
                         "hacking jobs": d.n_hacking})
    return to_markdown(pd.DataFrame(rows))
