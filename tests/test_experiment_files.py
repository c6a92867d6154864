"""Experiment files: every key checked by the config's own mechanism (one line naming the file, the
key path and what is allowed), and a user's file outside the package starting from packaged ones
(`extends: e2`, `platform: gao_faithful.yaml`)."""

from __future__ import annotations

import dataclasses
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalstop_gym.config import ConfigError, load_sim_config
from evalstop_gym.experiment import (
    CellSpec,
    ExperimentFile,
    SweepSpec,
    load_experiment,
    platform_config,
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
    "extends": ("extends: 5\n" + CELLS, "extends: expected a file name, got 5"),
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
    "imports": ("imports: [5]\n" + CELLS, "imports[0]: expected printable text, got 5"),
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
    ("junk: 1\n" + CELLS, "unknown key(s) junk; allowed: cells, description, extends, "
                          "extra_references, imports, name, overrides, platform, reference, "
                          "seeds, sweep"),
    ("seeds: []\n" + CELLS, "seeds: expected a non-empty list, got []"),
    ("seeds: [3, 3]\n" + CELLS, "seeds: expected a list of distinct values, got [3, 3]"),
    ("seeds: [1.5]\n" + CELLS, "seeds[0]: expected a whole number, got 1.5"),
    ("cells:\n  - {detector: EvalStop-2}\n", "cells[0]: missing 'base'"),
    ("cells: [FIFO]\n", "cells[0]: expected a mapping with at least 'base', got 'FIFO'"),
    (SWEEP + ", overrides: [{}, 5]}\n" + CELLS,
     "sweep.overrides[1]: expected a mapping with text keys, got 5"),
    ("sweep: {param: p, values: [1], step: 2}\n" + CELLS,
     "sweep: unknown key(s) step; allowed: overrides, param, values"),
    ("imports: []\n" + CELLS, "imports: expected a non-empty list, got []"),
    ("imports: [nothere.py]\n" + CELLS, "imports[0]: 'nothere.py' is neither beside the file"),
    ("platform: nothere.yaml\n" + CELLS, "platform: 'nothere.yaml' is neither beside the file"),
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


# ------------------------------------------------------------------ files outside the package

MINE = ("extends: e2\n"
        "overrides: {noise.sigma: 0.05}\n"
        "cells:\n  - {base: SRTF-Est, detector: none}\n"
        "  - {base: SRTF-Est, detector: EvalStop-3}\n")


def test_a_user_experiment_extends_a_packaged_one(tmp_path):
    path = tmp_path / "mine_e2.yaml"
    path.write_text(MINE)
    mine, e2 = load_experiment(path), load_experiment("e2")
    assert mine.name == "mine_e2" and mine.seeds == e2.seeds and mine.reference == e2.reference
    assert [c.policy for c in mine.cells] == ["SRTF-Est", "EvalStop-3+SRTF-Est"]
    assert mine.config == e2.config.with_overrides({"noise.sigma": 0.05})
    assert mine.config.cluster.gpus == 64 and mine.title == e2.title


def test_a_file_beside_wins_over_the_packaged_one_of_that_name(tmp_path):
    (tmp_path / "e2.yaml").write_text("name: e2\nplatform: defaults.yaml\nseeds: [7]\n" + CELLS)
    (tmp_path / "mine.yaml").write_text("extends: e2\n")
    mine = load_experiment(tmp_path / "mine.yaml")
    assert mine.seeds == (7,) and [c.policy for c in mine.cells] == ["FIFO", "SRTF-Est"]


def test_platform_names_resolve_from_the_package(tmp_path):
    path = tmp_path / "gao.yaml"
    path.write_text("platform: gao_faithful.yaml\n" + CELLS)
    assert load_experiment(path).config.curves.rlhf_hacking.collapse == (1.0, 1.0)
    platform = tmp_path / "plat.yaml"
    platform.write_text("extends: defaults\noverrides: {noise.sigma: 0.07}\n")
    assert load_sim_config(platform) == load_sim_config().with_overrides({"noise.sigma": 0.07})


def test_an_experiment_without_cells_of_its_own_is_still_an_experiment(tmp_path):
    path = tmp_path / "sigma.yaml"
    path.write_text("extends: e2\noverrides: {noise.sigma: 0.05}\n")
    assert platform_config(path) == load_experiment("e2").config.with_overrides(
        {"noise.sigma": 0.05})


def test_a_name_found_nowhere_is_one_line_naming_both_places(tmp_path):
    path = tmp_path / "x.yaml"
    path.write_text("extends: e99\n")
    message = one_line_error(path)
    assert message.startswith(f"x.yaml: extends: 'e99' is neither beside the file "
                              f"({tmp_path / 'e99.yaml'}) nor a packaged config (one of ")
    assert "e2.yaml" in message and "defaults.yaml" in message


def test_the_cli_runs_a_user_experiment_from_another_folder(tmp_path):
    """The issue's case: `evalstop-bench run mine_e2.yaml` where the file stands alone."""
    path = tmp_path / "mine_e2.yaml"
    path.write_text(MINE)
    bench = Path(sys.executable).parent / "evalstop-bench"
    done = subprocess.run([str(bench), "run", str(path), "--seeds", "42", "--set",
                           "workload.n_jobs=20", "--out", str(tmp_path / "out")],
                          cwd=tmp_path, capture_output=True, text=True, timeout=600,
                          env={**os.environ, "MPLBACKEND": "Agg"}, check=False)
    assert done.returncode == 0, done.stderr
    assert "EvalStop-3+SRTF-Est" in done.stdout
    assert list((tmp_path / "out").glob("mine_e2*/table.md"))   # its own folder, not e2's
