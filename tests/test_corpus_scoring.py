"""Detectors scored run by run on the shipped corpus, and BEYOND.md's corpus section."""

from __future__ import annotations

import pandas as pd
import pytest

from evalstop_gym.benchmarks.analysis.corpus_tables import corpus_section, target_lines
from evalstop_gym.benchmarks.corpus.scoring import (
    eval_index,
    score_corpus,
    score_run,
    summarise_corpus,
)
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


def _e9(recall: float, fpr: float = 0.01, n_seeds: int = 2) -> pd.DataFrame:
    return pd.DataFrame([{"group": "gauss0.05", "density": "5%", "detector": "DeclineTest-0.05",
                          "fpr": fpr, "recall": recall, "recall_early": 0.8, "saved_frac": 0.1,
                          "precision": 0.99, "jct_gain": 0.02, "n_seeds": n_seeds}])


def _corpus() -> pd.DataFrame:
    return pd.DataFrame([{"family": "reward", "density": "native",
                          "detector": "DeclineTest-0.05", "false_stops": 0.0,
                          "share_lost": 0.0, "recall": 0.9, "recall_early": 0.9,
                          "n_healthy": 38, "n_declining": 10, "evals": 60}])


def test_the_why_paragraph_appears_only_when_a_recall_target_is_missed() -> None:
    """Its eval counts come from eval_points for e9's densities, not typed in."""
    from evalstop_gym.benchmarks.analysis.corpus_tables import e9_setup
    from evalstop_gym.sim.workload import eval_points

    provenance = corpus_file("reward").parent / "provenance.json"
    _, _, evals = e9_setup()
    assert evals["5%"] == len(eval_points(0.05, True)) and evals["15%"] == len(
        eval_points(0.15, True))
    missed = corpus_section(_corpus(), _e9(recall=0.5), provenance)
    assert "Why the recall targets are missed" in missed
    assert f"the {evals['15%']} to {evals['5%']} evals of a 15% or 5% schedule" in missed
    met = corpus_section(_corpus(), _e9(recall=0.99), provenance)
    assert "Why the recall targets are missed" not in met


def test_the_description_reads_seeds_jobs_and_evals_from_the_runs_and_config() -> None:
    from evalstop_gym.experiment import load_experiment

    provenance = corpus_file("reward").parent / "provenance.json"
    text = corpus_section(_corpus(), _e9(recall=0.99, n_seeds=2), provenance)
    n_jobs = load_experiment("e9").config.workload.n_jobs
    assert f"(2 seeds, {n_jobs} jobs each, evals every 5%, 10%, 15% or at the corpus's " \
           "native 60 per run)" in text


def test_the_gao_fit_reads_the_simulators_ranges_from_the_config() -> None:
    from evalstop_gym.benchmarks.corpus.gao_fit import fit_hacking_runs
    from evalstop_gym.config import load_sim_config

    runs = load_family("reward")
    fit = fit_hacking_runs(runs, corpus_file("reward"))
    sim = load_sim_config().curves.rlhf_hacking
    assert fit["simulator"]["collapse"] == list(sim.collapse)
    assert fit["simulator"]["peak_progress"] == list(sim.peak_progress)
    assert fit["simulator"]["gain"] == list(sim.gain)


def test_stored_scores_are_reused_only_while_detectors_corpus_and_code_are_unchanged(
        tmp_path, monkeypatch) -> None:
    """corpus_scores.csv is kept beside a stamp; another detector list, corpus file or code
    digest rescores it (and a CSV with no stamp, as older reports left it, is rescored too)."""
    from evalstop_gym.benchmarks.corpus import scoring

    calls: list[tuple] = []

    def fake(detectors, families):
        calls.append((tuple(detectors), tuple(families)))
        return pd.DataFrame({"detector": list(detectors), "n": len(calls)})

    monkeypatch.setattr(scoring, "score_corpus", fake)
    path = tmp_path / "corpus_scores.csv"
    first = scoring.stored_scores(path, ["EvalStop-2"], ["reward"])
    assert len(calls) == 1 and path.exists() and path.with_suffix(".json").exists()
    again = scoring.stored_scores(path, ["EvalStop-2"], ["reward"])
    assert len(calls) == 1 and again.equals(first)
    scoring.stored_scores(path, ["EvalStop-2", "CUSUM-0-3"], ["reward"])
    assert len(calls) == 2
    monkeypatch.setattr(scoring, "code_digest", lambda: "other-code")
    scoring.stored_scores(path, ["EvalStop-2", "CUSUM-0-3"], ["reward"])
    assert len(calls) == 3
    monkeypatch.setattr(scoring, "corpus_file", lambda f: scoring.Path(__file__))
    scoring.stored_scores(path, ["EvalStop-2", "CUSUM-0-3"], ["reward"])
    assert len(calls) == 4
    path.with_suffix(".json").unlink()
    scoring.stored_scores(path, ["EvalStop-2", "CUSUM-0-3"], ["reward"])
    assert len(calls) == 5
    assert not list(tmp_path.glob(".tmp-*"))


def test_a_name_that_stops_nothing_is_refused_in_one_line() -> None:
    run = load_family("reward")[0]
    with pytest.raises(ValueError, match=r"^detector 'NoStop' stops nothing; score_run takes a "
                                         r"detector's name$"):
        score_run("NoStop", run, [], None)
