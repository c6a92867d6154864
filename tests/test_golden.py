"""Bit-identical results: every base scheduler and the E2 detectors against committed fixtures.

Each fixture was written once from the reference implementation; performance work must reproduce
every metric and every job's outcome exactly (floats compared by their full `repr`), so a faster
simulator is provably the same simulator. Each run is checked under the reference engine
("python") and under "auto", which takes the compiled engine (`sim.native`) for every policy
that has a native form. Two platforms, each a frozen copy of the defaults beside its fixture:
`golden_e2_small` predates step-time jitter and sets it to 0, so the model with every step
alike is held to the very numbers it gave before jitter existed; `golden_e2_paced` has the
jitter of the current defaults. Write a fixture anew only when the model itself changes on
purpose (always from the reference engine): `python tests/test_golden.py --write paced`
(or `small`).
"""

from __future__ import annotations

import csv
import functools
import sys
from pathlib import Path

import pytest

from evalstop_gym.config import load_sim_config
from evalstop_gym.policies import parse_policy
from evalstop_gym.simulate import simulate

DATA = Path(__file__).parent / "data"
FIXTURES = ("small", "paced")   # golden_e2_<name>.csv, written on golden_e2_<name>.yaml
POLICIES = ("FIFO", "SJF-Est", "SRTF-Est", "LossAware", "EvalSched", "EvalStop-2+SRTF-Est",
            "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est", "EvalSched-Strict")
SEEDS = (42, 123)
ENGINES = ("python", "auto")   # "auto" runs the compiled engine where a policy has a native form
JOB_FIELDS = ("outcome", "end_time", "end_progress", "gpu_minutes", "gpu_minutes_after_peak",
              "n_preemptions")
HEADER = ("policy", "seed", "key", "value")


def fixture_path(name: str) -> Path:
    return DATA / f"golden_e2_{name}.csv"


def golden_rows(fixture: str, policy: str, seed: int, engine: str | None = None
                ) -> list[tuple[str, str, str, str]]:
    """One run as rows: each metric, then a digest of each job, every float as its repr."""
    platform = fixture_path(fixture).with_suffix(".yaml")   # the frozen defaults it was written on
    config = load_sim_config(platform, overrides={"workload.n_jobs": 200})
    result = simulate(config, parse_policy(policy), seed, engine=engine)
    rows = [(policy, str(seed), f"metric.{k}", repr(v)) for k, v in result.metrics.items()]
    for rec in result.records:
        digest = " ".join(repr(rec[f]) for f in JOB_FIELDS)
        rows.append((policy, str(seed), f"job.{rec['job_id']}", digest))
    return rows


@functools.cache
def _fixture(name: str) -> dict[tuple[str, str], list[tuple[str, ...]]]:
    runs: dict[tuple[str, str], list[tuple[str, ...]]] = {}
    with fixture_path(name).open(newline="") as fh:
        for row in csv.DictReader(fh):
            runs.setdefault((row["policy"], row["seed"]), []).append(
                tuple(row[h] for h in HEADER))
    return runs


@pytest.mark.parametrize("engine", ENGINES)
@pytest.mark.parametrize("policy", POLICIES)
@pytest.mark.parametrize("seed", SEEDS)
@pytest.mark.parametrize("fixture", FIXTURES)
def test_run_matches_fixture(fixture: str, policy: str, seed: int, engine: str) -> None:
    """Metrics and per-job digests equal the committed fixture exactly, on either engine."""
    expected = _fixture(fixture)[(policy, str(seed))]
    got = golden_rows(fixture, policy, seed, engine)
    assert len(got) == len(expected)
    for g, e in zip(got, expected, strict=True):
        assert g == e, (f"{policy} seed {seed} ({engine}): {g[2]} is {g[3]!r}, "
                        f"fixture has {e[3]!r}")


def test_jitter_changes_the_runs() -> None:
    """The two fixtures differ where step times matter (a check the paced one is not a copy)."""
    small, paced = _fixture("small"), _fixture("paced")
    assert small.keys() == paced.keys()
    assert small[("SRTF-Est", "42")] != paced[("SRTF-Est", "42")]


def write_fixture(name: str) -> None:
    path = fixture_path(name)
    with path.open("w", newline="") as fh:
        writer = csv.writer(fh, lineterminator="\n")
        writer.writerow(HEADER)
        for policy in POLICIES:
            for seed in SEEDS:
                writer.writerows(golden_rows(name, policy, seed, engine="python"))


if __name__ == "__main__" and "--write" in sys.argv:
    write_fixture(sys.argv[sys.argv.index("--write") + 1])
