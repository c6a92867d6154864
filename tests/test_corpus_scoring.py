"""Detectors scored run by run on the shipped corpus, and BEYOND.md's corpus section."""

from __future__ import annotations

import pandas as pd

from evalstop_gym.benchmarks.corpus.scoring import eval_index, score_corpus, summarise_corpus
from evalstop_gym.benchmarks.corpus.tables import corpus_section, target_lines
from evalstop_gym.traces.corpus import corpus_file, load_family


def test_densities_keep_the_evals_a_schedule_would_have_run() -> None:
    run = load_family("reward")[0]
    assert len(eval_index(run, None)) == 60
    assert len(eval_index(run, 0.05)) == 20 and eval_index(run, 0.05)[-1] == 59
    assert len(eval_index(run, 0.15)) == 7


def test_evalstop_false_stops_grow_with_eval_density_and_declinetest_holds_its_budget() -> None:
    """The issue's observation on real curves, and DeclineTest's budget, measured here."""
    summary = summarise_corpus(score_corpus(["EvalStop-2", "DeclineTest-0.05"], ["supervised"]))
    es = summary[summary["detector"] == "EvalStop-2"].set_index("density")["false_stops"]
    assert es["native"] > es["5%"] > es["15%"]
    dt = summary[summary["detector"] == "DeclineTest-0.05"]
    assert (dt["false_stops"] <= 0.05).all() and (dt["recall"] > 0).any()


def test_targets_report_measured_numbers_and_verdicts() -> None:
    corpus = pd.DataFrame([{"family": "reward", "density": "native",
                            "detector": "DeclineTest-0.05", "false_stops": 0.0,
                            "share_lost": 0.02, "recall": 0.9, "recall_early": 0.9,
                            "n_healthy": 38, "n_declining": 10, "evals": 60}])
    e9 = pd.DataFrame([{"group": "gauss0.05", "density": "5%", "detector": "DeclineTest-0.05",
                        "fpr": 0.01, "recall": 0.9, "recall_early": 0.8, "saved_frac": 0.1,
                        "precision": 0.99, "jct_gain": 0.02}])
    lines = target_lines(e9, corpus)
    assert "recall 90.0% at FPR 1.0%" in lines[1] and "not met" in lines[1]
    assert "worst 2.0%" in lines[-1] and "not met" in lines[-1]
    assert "worst 0.0%" in lines[0] and "**met**" in lines[0]
    text = corpus_section(corpus, e9, corpus_file("reward").parent / "provenance.json")
    assert "alpha" in text and "(a) The corpus's runs" in text
