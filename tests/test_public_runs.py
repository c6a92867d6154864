"""The corpus of public runs: provenance for every run, labels recomputed from the curves by the
documented rule, the split by repository, and the readers' round trip of each source."""

from __future__ import annotations

import json
import re
from collections import Counter

import numpy as np
import pytest

from evalstop_gym.benchmarks.corpus.public_limit import visible_declines
from evalstop_gym.traces.logs import read_csv_runs
from evalstop_gym.traces.public_runs import (
    KINDS,
    PERMISSIVE,
    PublicRun,
    hindsight_label,
    load_public,
    public_dir,
    robust_noise,
    split_by_repository,
)

HELD_OUT = {"wenxin-jiang/cs577-nlp", "fsschneider/deepobs_baselines",
            "leliuga/cohere-configurations", "petuum/adaptdl", "coralreeffish/whisper-tiny-nbailab",
            "hahaazaza/neiro", "silver-8ce/llamatest", "aigoncharov/trainer_state_viz"}


@pytest.fixture(scope="module")
def provenance() -> list[dict]:
    return json.loads((public_dir() / "provenance.json").read_text(encoding="utf-8"))["runs"]


def test_every_run_has_its_source_and_a_permissive_licence(provenance) -> None:
    runs = load_public()
    assert {r.run_id for r in runs} == {p["run_id"] for p in provenance}
    for p in provenance:
        assert re.fullmatch(r"[\w.-]+/[\w.-]+", p["repo"]), p
        assert re.fullmatch(r"[0-9a-f]{40}", p["commit"]), p
        assert p["path"] and p["licence"] in PERMISSIVE, p
        assert p["licence_evidence"] in ("front matter", "LICENSE file"), p
        assert p["kind"] in KINDS and p["repo"].lower() not in HELD_OUT, p


def test_the_corpus_is_as_large_and_varied_as_promised(provenance) -> None:
    """At least 130 runs from 28 repositories (no repository above 12 runs) and 6 kinds of
    training, LM fine-tunes among them, with 45 declining and 55 healthy runs."""
    sources = {p["original_model"] or p["repo"] for p in provenance}
    repos = Counter(p["repo"] for p in provenance)
    labels = [r.label.label for r in load_public()]
    assert len(provenance) >= 130 and len(repos) >= 28 and len(sources) >= 28
    assert max(repos.values()) <= 12, repos.most_common(3)
    kinds = {p["kind"] for p in provenance}
    assert len(kinds) >= 6 and "causal-lm-finetune" in kinds
    assert labels.count("declining") >= 45 and labels.count("healthy") >= 55
    declining = Counter(p["repo"] for p in provenance if p["label"] == "declining")
    assert len(declining) >= 10 and max(declining.values()) <= 0.2 * sum(declining.values())


def test_no_held_out_repository_is_in_the_corpus(provenance) -> None:
    """The repositories held out to judge the project contribute no run, nor any source."""
    sources = json.loads((public_dir() / "sources.json").read_text(encoding="utf-8"))["sources"]
    used = {p["repo"].lower() for p in provenance} | {s["repo"].lower() for s in sources}
    assert not used & HELD_OUT


def test_no_curve_is_shipped_twice() -> None:
    """A log copied into several places (a fork's untouched template, a second copy of a
    history) is one run: no two runs have the same curve."""
    curves = [tuple(r.value) for r in load_public()]
    assert len(set(curves)) == len(curves)


def test_labels_are_recomputed_from_the_curves_by_the_rule(provenance) -> None:
    recorded = {p["run_id"]: (p["label"], p["best_at"]) for p in provenance}
    for run in load_public():
        label = hindsight_label(run.eval_score)
        assert (label.label, label.best_at) == recorded[run.run_id], run.run_id


def test_the_split_is_by_repository(provenance) -> None:
    """Every repository's half is recorded in sources.json and kept by the rule; a repository
    added later joins a half without moving any recorded one."""
    halves = json.loads((public_dir() / "sources.json").read_text(encoding="utf-8"))["halves"]
    runs = [(p["repo"], p["label"]) for p in provenance]
    split = split_by_repository(runs, halves)
    assert all(p["split"] == split[p["repo"]] == halves[p["repo"]] for p in provenance)
    grown = split_by_repository([*runs, ("new/one", "declining"), ("new/two", "healthy")], halves)
    assert {repo: grown[repo] for repo in split} == split
    halves = {h: [p["label"] for p in provenance if p["split"] == h] for h in ("design", "test")}
    assert abs(halves["design"].count("declining") - halves["test"].count("declining")) <= 8
    assert min(len(h) for h in halves.values()) >= 0.3 * len(provenance)


def test_the_shipped_file_replays_with_the_metric_oriented(provenance) -> None:
    """runs.csv is a replay CSV: eval_score higher-is-better, value in the metric's own units."""
    modes = {p["run_id"]: p["mode"] for p in provenance}
    path = public_dir() / "runs.csv"
    own = {r.run_id: np.array(r.values) for r in read_csv_runs(path, metric="value")}
    for run in read_csv_runs(path):
        sign = 1.0 if modes[run.run_id] == "max" else -1.0
        assert np.array_equal(np.array(run.values), sign * own[run.run_id]), run.run_id


@pytest.mark.parametrize("curve,label", [
    ([0.5, 0.6, 0.7, 0.8, 0.85, 0.86, 0.87, 0.87, 0.88, 0.88], "healthy"),
    ([0.5, 0.7, 0.8, 0.85, 0.84, 0.82, 0.80, 0.78, 0.76, 0.75], "declining"),
    ([0.5, 0.7, 0.8, 0.85, 0.849, 0.85, 0.851, 0.85, 0.849, 0.848], "healthy"),
    ([0.5, 0.7, 0.8, 0.85, 0.845, 0.84, 0.835, 0.83, 0.83, 0.83], "ambiguous"),
    ([0.5, 0.7, 0.8, 0.85, 0.85, 0.84, 0.85, 0.83, 0.84, 0.83], "healthy"),
])
def test_the_hindsight_rule_on_plain_shapes(curve, label) -> None:
    """A rise to a plateau is healthy; a fall of a fifth of the range out of noise declines; a
    smooth fall of a few percent of the range, between the two, is ambiguous; the same fall in
    a plateau's wiggles is within noise, healthy."""
    assert hindsight_label(np.array(curve)).label == label


def test_the_command_rebuilds_runs_from_a_snapshot_at_their_commit(tmp_path) -> None:
    """`corpus public`'s build reads each source at its recorded commit from a git snapshot (a
    later commit changing the file does not move it), labels it by the rule, and leaves out a
    source whose licence is not permissive, saying why."""
    import subprocess

    from evalstop_gym.benchmarks.corpus import public

    repo = tmp_path / "snaps" / "someone+run"
    repo.mkdir(parents=True)
    git = ["git", "-C", str(repo), "-c", "user.name=t", "-c", "user.email=t@t"]
    subprocess.run([*git[:3], "init", "-q"], check=True)
    rise = [0.3 + 0.4 * (1 - np.exp(-i / 3)) for i in range(12)]
    curve = rise + [rise[-1] - 0.03 * i for i in range(1, 13)]
    rows = "epoch,loss,val_accuracy\n" + "".join(
        f"{i},{1.0 / (i + 1):.4f},{v:.4f}\n" for i, v in enumerate(curve))
    (repo / "history.csv").write_text(rows)
    subprocess.run([*git, "add", "history.csv"], check=True)
    subprocess.run([*git, "commit", "-q", "-m", "run"], check=True)
    commit = subprocess.run([*git, "rev-parse", "HEAD"], check=True, capture_output=True,
                            text=True).stdout.strip()
    (repo / "history.csv").write_text("epoch,val_accuracy\n0,0.1\n")      # a later commit
    subprocess.run([*git, "commit", "-q", "-am", "later"], check=True)
    source = {"repo": "someone/run", "commit": commit, "path": "history.csv",
              "licence": "mit", "licence_evidence": "LICENSE", "kind": "classic-cnn-rnn",
              "format": "keras-csv"}
    out, doc = public.build([source, {**source, "path": "history.csv", "licence": "gpl-3.0"}],
                            tmp_path / "snaps")
    assert [r["label"] for r in doc["runs"]] == ["declining"]
    assert [round(r["value"], 4) for r in out] == [round(v, 4) for v in curve]
    assert doc["runs"][0]["commit"] == commit and doc["runs"][0]["metric"] == "val_accuracy"
    assert len(doc["skipped"]) == 1 and "not permissive" in doc["skipped"][0]["why"]


def _run(scores: list[float], split: str = "test") -> PublicRun:
    n = len(scores)
    s = np.array(scores, dtype=float)
    return PublicRun("synthetic", np.arange(1, n + 1), s, s, np.full(n, np.nan), n,
                     {"kind": "vision", "split": split})


def test_the_known_noise_reading_sees_what_the_evals_before_the_last_show() -> None:
    """The rule told a run's noise reads the evals before the last: a fall from the middle is
    seen at every density; a fall only at the last eval is seen at none; a rise, never. Told
    the noise its own curve shows, the rule gives its own label."""
    rng = np.random.default_rng(0)
    p = np.linspace(0.01, 1.0, 100)
    wiggle = 0.002 * rng.standard_normal(100)
    middle = 0.8 - 0.3 * (p - 0.4) ** 2 + wiggle
    late = np.where(p < 0.995, 0.5 + 0.3 * p, 0.2) + wiggle   # falls at the last eval only
    rise = 0.5 + 0.3 * np.sqrt(p) + wiggle
    for curve in (middle, late, rise):
        assert hindsight_label(curve, noise=robust_noise(curve)) == hindsight_label(curve)
    assert hindsight_label(late).label == "declining"
    for curve, seen in ((middle, 1.0), (late, 0.0)):
        table = visible_declines([_run(list(curve))])
        assert table.visible.tolist() == [seen] * 4
    table = visible_declines([_run(list(rise))])
    assert table.healthy_read_declining.tolist() == [0.0] * 4
