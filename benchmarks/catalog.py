"""Every experiment the benchmarks know, in one place: the report it belongs to, the claims it
checks, the figures it draws, its section of BEYOND.md and its role in the calibration.

Its config is `configs/<name>.yaml` (`Entry.load`). Everything else the commands need about an
experiment is read from `CATALOG`, so a new experiment is a YAML file and one entry here:
`evalstop-bench run all` and `report` take the paper's matrix (`MATRIX`), `report --beyond` the
rest (`BEYOND`), REPRODUCTION.md and BEYOND.md the claims, BEYOND.md the sections (in catalog
order), `run` the figures. The figure writers import matplotlib when they draw, so reading the
catalog stays light.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from evalstop_gym.config import SimConfig
from evalstop_gym.experiment import Experiment, load_experiment

from .analysis import (
    base_rate,
    corpus_tables,
    noise_sweep,
    paper_claims,
    replayed_trace,
    seed_power,
)
from .analysis.claims import Row
from .analysis.section_inputs import Section

log = logging.getLogger(__name__)

PAPER, BEYOND_PAPER = "REPRODUCTION.md", "BEYOND.md"   # the report an experiment feeds
VARIANT_SEP = "__"   # between an experiment's name and its --set overrides (pipeline.variant)
Reference = Any      # an experiment's `reference` (cell fields to match), or None
Claims = Callable[[pd.DataFrame], list[Row]]
Figures = Callable[[pd.DataFrame, Path, Reference, "SimConfig | None"], list[Path]]


@dataclass(frozen=True)
class Entry:
    """One experiment: `claims` turns its runs into its report's stated figures with verdicts;
    `figures` draws the paper's figures from its runs (written under a directory); `section`
    renders its part of BEYOND.md, whose opening counts the seeds of the sections that do not
    state their own (`states_seeds`)."""

    name: str
    report: str
    claims: Claims | None = None
    figures: Figures | None = None
    validates_calibration: bool = False   # its claims are checked after a calibration
    section: Section | None = None
    states_seeds: bool = False

    def load(self) -> Experiment:
        return load_experiment(self.name)


def _fig2(runs: pd.DataFrame, directory: Path, reference: Reference,
          config: SimConfig | None) -> list[Path]:
    """Fig. 2 draws a synthetic job's true curves (corpus jobs have no closed-form curves)."""
    from .analysis import figures

    if config is None or config.curves.source != "synthetic":
        return []
    return figures.fig2(config, int(runs["seed"].iloc[0]), directory)


def _fig3(runs: pd.DataFrame, directory: Path, reference: Reference,
          config: SimConfig | None) -> list[Path]:
    from .analysis import figures

    return figures.fig3(runs, directory, reference)


def _fig4(runs: pd.DataFrame, directory: Path, reference: Reference,
          config: SimConfig | None) -> list[Path]:
    from .analysis import figures

    return figures.fig4(runs, directory, reference)


def _fig5a(runs: pd.DataFrame, directory: Path, reference: Reference,
           config: SimConfig | None) -> list[Path]:
    from .analysis import figures

    return figures.fig5(runs, directory, "eval noise sigma (score units)",
                        "fig5a_precision_vs_sigma", reference=reference)


def _fig5b(runs: pd.DataFrame, directory: Path, reference: Reference,
           config: SimConfig | None) -> list[Path]:
    from .analysis import figures

    return figures.fig5(runs, directory, "hacking base rate (fraction of RLHF jobs)",
                        "fig5b_precision_vs_base_rate", identity=True, reference=reference)


CATALOG: dict[str, Entry] = {e.name: e for e in (
    Entry("e1", PAPER, paper_claims.e1, validates_calibration=True),
    Entry("e2", PAPER, paper_claims.e2, _fig2),    # the calibration's target (calibrate.py)
    Entry("e3", PAPER, paper_claims.e3, validates_calibration=True),
    Entry("e4", PAPER, paper_claims.e4),
    Entry("e5", PAPER, paper_claims.e5, _fig3),
    Entry("e6", PAPER, paper_claims.e6, _fig4),
    Entry("e7", PAPER, paper_claims.e7, _fig5a),
    Entry("e8", PAPER, paper_claims.e8, _fig5b),
    Entry("e7x", BEYOND_PAPER, noise_sweep.claims, section=noise_sweep.section),
    Entry("e8x", BEYOND_PAPER, section=base_rate.section),
    Entry("e2x", BEYOND_PAPER, seed_power.claims, section=seed_power.section,
          states_seeds=True),
    Entry("philly", BEYOND_PAPER, section=replayed_trace.section, states_seeds=True),
    Entry("e9", BEYOND_PAPER, corpus_tables.claims, section=corpus_tables.section,
          states_seeds=True),
)}
MATRIX = tuple(n for n, e in CATALOG.items() if e.report == PAPER)        # the paper's E1-E8
BEYOND = tuple(n for n, e in CATALOG.items() if e.report == BEYOND_PAPER)
CLAIMS: dict[str, Claims] = {n: e.claims for n, e in CATALOG.items() if e.claims is not None}
VALIDATION = tuple(n for n, e in CATALOG.items() if e.validates_calibration)


def base_name(name: str) -> str:
    """The catalogued experiment a variant (`e2__noise.sigma=0.05`) belongs to."""
    return name.partition(VARIANT_SEP)[0]


def experiment_figures(name: str, runs: pd.DataFrame, directory: Path,
                       config: SimConfig | None = None,
                       reference: Reference = None) -> list[Path]:
    """The figures experiment `name` draws (a variant draws what its experiment draws); an
    experiment without a sweep also gets its results figure. `reference` (the experiment's
    reference cell fields) is marked in every figure."""
    entry = CATALOG.get(base_name(name))
    paths = entry.figures(runs, directory, reference, config) if entry and entry.figures else []
    if runs["value"].isna().all():
        from .analysis import figures

        paths += figures.results_figure(runs, directory, name, reference)
    for p in paths:
        log.info("wrote %s", p)
    return paths
