"""BEYOND.md is driven by the catalog as REPRODUCTION.md is: every experiment beyond the paper is
one entry (its config, its section, its claims), the report names none of them, and each claim it
states is checked against the runs, so each can fail."""

from __future__ import annotations

import re
from pathlib import Path

import pandas as pd
import pytest

from evalstop_gym.benchmarks import catalog
from evalstop_gym.benchmarks.analysis import corpus_tables, noise_sweep, seed_power
from evalstop_gym.benchmarks.analysis.claims import FAILS, HOLDS
from evalstop_gym.benchmarks.analysis.section_inputs import SectionInputs
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


def noise_runs(fpr: float, recall: float, blind_jct: float) -> pd.DataFrame:
    """The noise sweep's shape: a reference cell and, per noise model, CUSUM (`fpr`, `recall`)
    and StopAt-0.65, which stops every RLHF job (FPR 100%) and finishes at `blind_jct`."""
    rows = []
    for sigma in (0.05, 0.10):
        for seed in (1, 2):
            rows.append({"label": "SRTF-Est", "value": sigma, "seed": seed, "jct": 1000.0,
                         "precision": 0.0, "recall": 0.0, "fpr": 0.0})
            for model in ("gaussian", "ar1"):
                rows += [{"label": f"CUSUM-0-3@{model}", "value": sigma, "seed": seed,
                          "jct": 950.0, "precision": 0.9, "recall": recall, "fpr": fpr},
                         {"label": f"StopAt-0.65@{model}", "value": sigma, "seed": seed,
                          "jct": blind_jct, "precision": 0.5, "recall": 1.0, "fpr": 1.0}]
    return pd.DataFrame(rows)


def verdicts(name: str, runs: pd.DataFrame) -> list[str]:
    claims = catalog.CATALOG[name].claims
    assert claims is not None
    return [row.verdict for row in claims(runs)]


def test_noise_sweep_claims_hold_and_fail_with_the_runs():
    assert verdicts("e7x", noise_runs(0.02, 0.85, 600.0)) == [HOLDS, HOLDS]
    assert verdicts("e7x", noise_runs(0.02, 0.60, 600.0)) == [FAILS, HOLDS]   # recall short
    assert verdicts("e7x", noise_runs(0.08, 0.85, 600.0)) == [FAILS, FAILS]   # none capped
    assert verdicts("e7x", noise_runs(0.02, 0.85, 990.0)) == [HOLDS, FAILS]   # blind gains less


def seed_runs(speedup: float, seeds: int = 8) -> pd.DataFrame:
    rows = []
    for seed in range(seeds):
        base = 1000.0 + 200.0 * (seed % 3)
        rows += [{"policy": "SRTF-Est", "seed": seed, "jct": base, "wasted_frac": 0.2},
                 {"policy": "EvalStop-2+SRTF-Est", "seed": seed,
                  "jct": base * (1 - speedup) + seed % 2, "wasted_frac": 0.16 + 0.001 * seed}]
    return pd.DataFrame(rows)


def test_seed_power_claims_hold_and_fail_with_the_runs():
    assert verdicts("e2x", seed_runs(0.05)) == [HOLDS, HOLDS]
    assert verdicts("e2x", seed_runs(-0.05))[0] == FAILS   # EvalStop-2 slower
    power = pd.DataFrame({"welch_p": [0.01, 0.3], "paired_p": [0.2, 0.01]})
    assert seed_power.sharper_claim(power, "e2x").verdict == FAILS   # Welch's finds one alone
    assert seed_power.sharper_claim(power.iloc[1:], "e2x").verdict == HOLDS
    both = pd.DataFrame({"welch_p": [0.01], "paired_p": [0.01]})
    assert seed_power.sharper_claim(both, "e2x").verdict == FAILS   # finds nothing more


def e9_runs(gaussian_fpr: float) -> pd.DataFrame:
    rows = []
    for value in (0.05, 0.1):
        for seed in (1, 2):
            rows += [{"label": "SRTF-Est", "value": value, "seed": seed, "jct": 1000.0},
                     {"label": f"{corpus_tables.HEADLINE}@gauss0.05", "value": value,
                      "seed": seed, "jct": 990.0, "fpr": gaussian_fpr}]
    frame = pd.DataFrame(rows)
    for metric in ("recall", "recall_early", "saved_frac", "precision"):
        frame[metric] = 0.5
    return frame


def test_corpus_claim_holds_and_fails_with_the_runs():
    assert verdicts("e9", e9_runs(0.0)) == [HOLDS]
    assert verdicts("e9", e9_runs(corpus_tables.ALPHA + 0.01)) == [FAILS]


def test_beyond_md_prints_each_claim_with_its_measure_and_verdict(tmp_path):
    """The checks open the document, in REPRODUCTION.md's columns; the sections follow in
    catalog order."""
    runs = {"e7x": noise_runs(0.02, 0.60, 600.0), "e2x": seed_runs(0.05)}

    def no_corpus() -> pd.DataFrame:
        raise AssertionError("neither section reads the corpus")

    inputs = {n: SectionInputs(n, tmp_path / n, tmp_path / "figures", no_corpus) for n in runs}
    text = beyond.render(runs, inputs, "drop table")
    checks = text[text.index("## Checks"):text.index("## How hard")]
    assert "| experiment | claim | stated | measured | verdict | why |" in checks
    assert "3 holds, 1 fails (of 4 checks)" in checks
    rows = [line for line in checks.splitlines() if line.startswith(("| e7x", "| e2x"))]
    assert [r.split(" | ")[4] for r in rows] == [FAILS, HOLDS, HOLDS, HOLDS]
    assert text.index("## Every detector") < text.index("## E2's deltas")
    assert (tmp_path / "figures" / "beyond_noise.png").is_file()


@pytest.mark.parametrize("claims", [noise_sweep.claims, seed_power.claims, corpus_tables.claims])
def test_claims_are_the_catalogs(claims):
    """One declaration: the catalog's entries hold the claim functions the modules define."""
    assert claims in {e.claims for e in catalog.CATALOG.values()}
