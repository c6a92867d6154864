"""The shipped corpus regenerates: one run of each family, trained again here.

Within one machine a rebuild is bit for bit; across machines (another CPU picks other vectorised
kernels) the promise is `seeding.REPRODUCIBLE`: identity, eval schedule and accuracy counts equal,
other floats within a relative tolerance justified in `corpus/seeding.py`. The comparison itself is
checked on the shipped rows perturbed inside and outside that tolerance.
"""

from __future__ import annotations

import csv

import pytest

from evalstop_gym.benchmarks.corpus import reward_hacking, supervised
from evalstop_gym.benchmarks.corpus.build import COLUMNS, to_csv
from evalstop_gym.benchmarks.corpus.seeding import COUNTS, EXACT, RTOL, differences
from evalstop_gym.traces.corpus import corpus_file

RUNS = {"supervised": "sup-001", "reward": "rew-006"}


def shipped_rows(family: str, run_id: str) -> list[dict[str, str]]:
    with open(corpus_file(family), newline="", encoding="utf-8") as fh:
        return [row for row in csv.DictReader(fh) if row["job_id"] == run_id]


def regenerated_rows(family: str, rows: list[dict[str, object]]) -> list[dict[str, str]]:
    return list(csv.DictReader(to_csv(rows, COLUMNS[family]).splitlines()))


def scaled(rows: list[dict[str, str]], family: str, factor: float) -> list[dict[str, str]]:
    """Every float column that is neither identity nor a count, times `factor`."""
    fixed = set(EXACT) | set(COUNTS.get(family, ()))
    return [{k: v if k in fixed else repr(float(v) * factor) for k, v in row.items()}
            for row in rows]


@pytest.mark.parametrize("family", sorted(RUNS))
def test_the_comparison_allows_the_stated_tolerance_and_no_more(family):
    rows = shipped_rows(family, RUNS[family])
    assert not differences(family, rows, rows)
    assert not differences(family, scaled(rows, family, 1 + RTOL[family] / 2), rows)
    assert differences(family, scaled(rows, family, 1 + 2 * RTOL[family]), rows)
    for column in EXACT[1:] + COUNTS.get(family, ()):
        moved = [dict(r) for r in rows]
        moved[3][column] = "1" if moved[3][column] != "1" else "2"
        assert differences(family, moved, rows), column


@pytest.mark.parametrize("family,generator,pick", [
    ("supervised", supervised, lambda r: not r.large and r.batch_size == 64 and r.steps == 1200),
    ("reward", reward_hacking, lambda r: r.rm_samples == 256 and r.kl_coef == 0.01),
])
def test_one_run_of_each_family_regenerates(family: str, generator, pick) -> None:
    pytest.importorskip("torch")
    pytest.importorskip("sklearn")
    run = next(r for r in generator.run_settings() if pick(r))
    assert run.run_id == RUNS[family]
    expected = shipped_rows(family, run.run_id)
    got = regenerated_rows(family, generator.train_run(run))
    assert len(got) == len(expected) == generator.N_EVALS
    found = differences(family, got, expected)
    assert not found, f"{run.run_id} breaks the cross-machine promise: {found[:3]}"
