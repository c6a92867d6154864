"""The shipped corpus regenerates bit for bit: one run of each family, trained again here.

Compared: every logged column of every eval (validation and test scores, training or policy
loss, cross-entropies, proxy reward, KL), exactly, as the CSV stores floats by `repr`.
"""

from __future__ import annotations

import csv

import pytest

from evalstop_gym.benchmarks.corpus import reward_hacking, supervised
from evalstop_gym.benchmarks.corpus.build import COLUMNS, to_csv
from evalstop_gym.traces.corpus import corpus_file

pytest.importorskip("torch")
pytest.importorskip("sklearn")


def shipped_rows(family: str, run_id: str) -> list[dict[str, str]]:
    with open(corpus_file(family), newline="", encoding="utf-8") as fh:
        return [row for row in csv.DictReader(fh) if row["job_id"] == run_id]


def regenerated_rows(family: str, rows: list[dict[str, object]]) -> list[dict[str, str]]:
    return list(csv.DictReader(to_csv(rows, COLUMNS[family]).splitlines()))


@pytest.mark.parametrize("family,generator,pick", [
    ("supervised", supervised, lambda r: not r.large and r.batch_size == 64 and r.steps == 1200),
    ("reward", reward_hacking, lambda r: r.rm_samples == 256 and r.kl_coef == 0.01),
])
def test_one_run_of_each_family_regenerates_exactly(family: str, generator, pick) -> None:
    run = next(r for r in generator.run_settings() if pick(r))
    expected = shipped_rows(family, run.run_id)
    got = regenerated_rows(family, generator.train_run(run))
    assert len(got) == len(expected) == generator.N_EVALS
    assert got == expected, f"{run.run_id} differs from the shipped {family} data"
