"""Experiment files: every key checked by the config's own mechanism (one line naming the file, the
key path and what is allowed)."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from evalstop_gym.config import ConfigError
from evalstop_gym.experiment import (
    CellSpec,
    ExperimentFile,
    SweepSpec,
    load_experiment,
)

CELLS = "cells:\n  - {base: FIFO}\n  - {base: SRTF-Est}\n"
SWEEP = "sweep: {param: noise.sigma, values: [0.01, 0.02]"

# key path -> (the file's text, the message after "x.yaml: "). Each names what is allowed.
BAD = {
    "name": ("name: a/b\n" + CELLS, "name: 'a/b' is not a plain folder name (letters, digits "
                                    "and _ . + = -, no '..'); it names the output folder"),
    "cells": ("cells: []\n", "cells: expected a non-empty list, got []"),
    "title": ("title: [1]\n" + CELLS, "title: expected printable text, got [1]"),
    "description": ('description: "a\\tb"\n' + CELLS,
                    "description: expected printable text, got 'a\\tb'"),
    "platform": ("platform: 5\n" + CELLS, "platform: expected printable text, got 5"),
    "overrides": ("overrides: [1]\n" + CELLS, "overrides: expected a mapping with text keys, "
                                              "got [1]"),
    "seeds": ("seeds: [1, -1]\n" + CELLS, "seeds[1]: -1 is outside the allowed range [0, inf)"),
    "reference": ("reference: {bse: FIFO}\n" + CELLS, "reference: expected a mapping with keys "
                  "among base, detector, label, value, got {'bse': 'FIFO'}"),
    "extra_references": ("extra_references: {a: {value: [1]}}\n" + CELLS,
                         "extra_references.a.value: expected a number, text or nothing, "
                         "got [1]"),
    "sweep": ("sweep: {param: p}\n" + CELLS, "sweep: missing 'values'"),
    "cells[0].base": ("cells:\n  - {base: 5}\n", "cells[0].base: expected printable text, got 5"),
    "cells[0].detector": ("cells:\n  - {base: FIFO, detector: [x]}\n",
                          "cells[0].detector: expected printable text, got ['x']"),
    "cells[0].label": ("cells:\n  - {base: FIFO, label: {a: 1}}\n",
                       "cells[0].label: expected printable text, got {'a': 1}"),
    "cells[0].overrides": ("cells:\n  - {base: FIFO, overrides: 3}\n",
                           "cells[0].overrides: expected a mapping with text keys, got 3"),
    "cells[0].param": ("cells:\n  - {base: FIFO, param: 2}\n",
                       "cells[0].param: expected printable text, got 2"),
    "cells[0].value": ("cells:\n  - {base: FIFO, value: [2]}\n",
                       "cells[0].value: expected a number, text or nothing, got [2]"),
    "sweep.param": ("sweep: {param: [p], values: [1]}\n" + CELLS,
                    "sweep.param: expected printable text, got ['p']"),
    "sweep.values": ("sweep: {param: p, values: [1, {a: 1}]}\n" + CELLS,
                     "sweep.values[1]: expected a number, text or nothing, got {'a': 1}"),
    "sweep.overrides": (SWEEP + ", overrides: [{}]}\n" + CELLS,
                        "sweep.overrides: expected a list of 2 mappings, one per value, got 1"),
}
MORE = [
    ("junk: 1\n" + CELLS, "unknown key(s) junk; allowed: cells, description, extra_references, "
                          "name, overrides, platform, reference, seeds, sweep"),
    ("seeds: []\n" + CELLS, "seeds: expected a non-empty list, got []"),
    ("seeds: [3, 3]\n" + CELLS, "seeds: expected a list of distinct values, got [3, 3]"),
    ("seeds: [1.5]\n" + CELLS, "seeds[0]: expected a whole number, got 1.5"),
    ("cells:\n  - {detector: EvalStop-2}\n", "cells[0]: missing 'base'"),
    ("cells: [FIFO]\n", "cells[0]: expected a mapping with at least 'base', got 'FIFO'"),
    (SWEEP + ", overrides: [{}, 5]}\n" + CELLS,
     "sweep.overrides[1]: expected a mapping with text keys, got 5"),
    ("sweep: {param: p, values: [1], step: 2}\n" + CELLS,
     "sweep: unknown key(s) step; allowed: overrides, param, values"),
]


def one_line_error(path: Path) -> str:
    with pytest.raises(ConfigError) as info:
        load_experiment(path)
    message = str(info.value)
    assert "\n" not in message and "Traceback" not in message
    return message


@pytest.mark.parametrize("text, expected", [*BAD.values(), *MORE],
                         ids=[*BAD, *(f"more{i}" for i in range(len(MORE)))])
def test_a_bad_value_names_the_file_the_key_and_what_is_allowed(tmp_path, text, expected):
    path = tmp_path / "x.yaml"
    path.write_text(text)
    message = one_line_error(path)
    assert message.startswith(f"x.yaml: {expected}"), message


def test_every_key_of_an_experiment_file_has_a_bad_value_case():
    """A key added to the file's schema without a case here fails, so each stays checked."""
    keys = {f.name for f in dataclasses.fields(ExperimentFile)}
    keys |= {f"cells[0].{f.name}" for f in dataclasses.fields(CellSpec)}
    keys |= {f"sweep.{f.name}" for f in dataclasses.fields(SweepSpec)}
    assert keys == set(BAD)


def test_the_packaged_experiments_are_valid_under_the_schema():
    e6 = load_experiment("e6")
    assert e6.is_sweep and [c.value for c in e6.cells[:2]] == [0.05, 0.05]
    assert e6.extra_references["default_interval"]["value"] == 0.15
    assert load_experiment("e2").seeds == (42, 123, 456, 789, 1024)
