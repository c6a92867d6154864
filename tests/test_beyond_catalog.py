"""BEYOND.md is driven by the catalog as REPRODUCTION.md is: every experiment beyond the paper is
one entry (its config, its section), and the report names none of them."""

from __future__ import annotations

import re
from pathlib import Path

from evalstop_gym.benchmarks import catalog
from evalstop_gym.benchmarks.report import beyond
from evalstop_gym.experiment import list_experiments


def test_every_experiment_is_catalogued_and_every_beyond_one_renders_a_section():
    assert set(catalog.CATALOG) == set(list_experiments())
    assert catalog.BEYOND and all(catalog.CATALOG[n].section is not None for n in catalog.BEYOND)
    assert all(catalog.CATALOG[n].section is None for n in catalog.MATRIX)
    for name in catalog.BEYOND:
        assert catalog.CATALOG[name].load().name == name


def test_the_beyond_report_names_no_experiment():
    """Its experiments, their order and their sections come from the catalog alone."""
    source = Path(beyond.__file__).read_text(encoding="utf-8")
    named = [n for n in catalog.CATALOG if re.search(rf"\b{re.escape(n)}\b", source)]
    assert named == []
