"""What a section of BEYOND.md reads besides its experiment's runs.

Each experiment beyond the paper renders its own section (`catalog.Entry.section`) from its runs;
some also draw a figure beside the document or score the corpus's runs, which every section
shares and which is costly, so the report computes it once and only when a section asks.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pandas as pd


@dataclass
class SectionInputs:
    """`name`: the catalogued experiment; `folder`: where its runs were written (a --set
    variant's own); `figures_dir`: where the document's figures go, their paths appended to
    `drawn`; `corpus`: every corpus detector scored run by run on the corpus, summarised."""

    name: str
    folder: Path
    figures_dir: Path
    corpus: Callable[[], pd.DataFrame]
    drawn: list[Path] = field(default_factory=list)


Section = Callable[["pd.DataFrame | None", SectionInputs], str]   # "" when it has nothing to show
