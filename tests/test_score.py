"""evalstop-bench score: the suite fixed by its digest, seeds disjoint from every other use,
NoStop 0 and the reference 1 by construction, a user's file scored in one command, the same bytes
on a rerun and after an interrupted run resumed, the leaderboard page."""

from __future__ import annotations

import argparse
import json
import shutil
from pathlib import Path

import pytest
import yaml

from evalstop_gym.benchmarks import cli
from evalstop_gym.benchmarks.rl import learned_seeds, train
from evalstop_gym.benchmarks.score import leaderboard, real, references
from evalstop_gym.benchmarks.score import suite as suite_mod
from evalstop_gym.benchmarks.score.real import file_name
from evalstop_gym.benchmarks.sweep import calibrate, runner
from evalstop_gym.env.cluster_env import UNSEEDED_SEED_RANGE
from evalstop_gym.experiment import PAPER_SEEDS, list_experiments, load_experiment

TINY = {"name": "tiny", "base": "SRTF-Est", "seeds": [9001, 9002], "measure": "informedness",
        "real_split": "test", "real_runs": 6,
        "reference_candidates": ["EvalStop-2", "TrendTest-0.05"],
        "tasks": [{"id": "e2-10", "experiment": "e2",
                   "overrides": {"evals.interval": 0.10, "workload.n_jobs": 40,
                                 "noise.sigma": 0.08}},
                  {"id": "e8-50", "experiment": "e8",
                   "overrides": {"workload.hacking_fraction": 0.5, "workload.n_jobs": 40}},
                  {"id": "real-15", "real": "15%"}]}

USER_DETECTOR = '''
from evalstop_gym.policies.detector import DetectorBase, stop
from evalstop_gym.sim.protocols import CONTINUE


class DropFromBest(DetectorBase):
    """Stops an RLHF job whose latest eval falls `drop` below its best."""

    types = ("rlhf",)
    needs = ("evals",)

    def __init__(self, drop: float = 0.1) -> None:
        self.drop = float(drop)
        self.name = f"DropFromBest-{drop}"

    def _decide(self, job, cluster):
        s = job.eval_scores
        return stop("fell") if len(s) > 1 and max(s) - s[-1] > self.drop else CONTINUE
'''
POLICIES = ["none", "EvalStop-2"]


def score(*argv: str) -> int:
    return cli.main(["score", *argv])


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """A two-task simulated suite (40 jobs, two seeds) and one real task, its anchors measured;
    NoStop, EvalStop-2 and a user's file scored into `out`."""
    root = tmp_path_factory.mktemp("score")
    path = root / "tiny.yaml"
    path.write_text(yaml.safe_dump(TINY))
    (root / "mine.py").write_text(USER_DETECTOR)
    out = root / "out"
    assert score("--suite", str(path), "--measure-references", "--out", str(out)) == 0
    mine = f"{root / 'mine.py'}:DropFromBest-0.1"
    assert score(*POLICIES, mine, "--suite", str(path), "--out", str(out)) == 0
    return path, out, mine


def record(out: Path, policy: str) -> dict:
    return json.loads((out / "scores" / file_name(policy)).read_text())


def test_the_packaged_suite_matches_its_pinned_digest() -> None:
    suite = suite_mod.load_suite("evalstop-v1")
    assert suite.digest == suite_mod.PINNED["evalstop-v1"]
    assert {t.id for t in suite.tasks} == set(suite.references)   # every anchor measured


def test_a_changed_suite_has_another_digest(tmp_path) -> None:
    packaged = suite_mod.suite_path("evalstop-v1")
    copy = tmp_path / "copy.yaml"
    shutil.copy(packaged, copy)
    shutil.copy(suite_mod.references_path(packaged), suite_mod.references_path(copy))
    same = suite_mod.load_suite(copy)
    assert same.digest == suite_mod.load_suite("evalstop-v1").digest
    copy.write_text(packaged.read_text().replace("seeds: [9001,", "seeds: [9004,"))
    assert suite_mod.load_suite(copy).digest != same.digest


def test_test_seeds_are_disjoint_from_every_other_seed() -> None:
    """Not the paper's, no packaged experiment's, not calibrate's, and below every workload
    seed train and learned_seeds draw (their seeds, and unseeded resets, are >= 10000)."""
    seeds = set(suite_mod.load_suite("evalstop-v1").seeds)
    used = set(PAPER_SEEDS)
    for name in list_experiments():
        used |= set(load_experiment(name).seeds)
    for module in (calibrate, train, learned_seeds):
        p = argparse.ArgumentParser()
        module.add_arguments(p)
        defaults = vars(p.parse_args([]))
        given = defaults.get("seeds")
        used |= set(given) if isinstance(given, list) else set()
        used |= set(defaults.get("eval_seeds") or ())
    assert not seeds & used
    lowest_training = min(UNSEEDED_SEED_RANGE[0], train_default("seed"),
                          learned_default("first_seed"))
    assert max(seeds) < lowest_training


def train_default(name: str) -> int:
    p = argparse.ArgumentParser()
    train.add_arguments(p)
    return int(getattr(p.parse_args([]), name))


def learned_default(name: str) -> int:
    p = argparse.ArgumentParser()
    learned_seeds.add_arguments(p)
    return int(getattr(p.parse_args([]), name))


def test_nostop_scores_zero_and_the_reference_one_on_every_task(tiny) -> None:
    path, out, _ = tiny
    suite = suite_mod.load_suite(path)
    nostop = record(out, "none")
    assert {t["task"] for t in nostop["tasks"]} == {t.id for t in suite.tasks}
    assert all(t["normalised"] == 0.0 for t in nostop["tasks"])
    oracle = leaderboard.oracle_record(suite)
    assert [t["normalised"] for t in oracle["tasks"]] == pytest.approx([1.0, 1.0], abs=1e-12)
    best = suite.references["real-15"]["source"].removeprefix("best known: ")
    real = next(t for t in record(out, best)["tasks"] if t["task"] == "real-15")
    assert real["normalised"] == 1.0


def test_the_oracle_threshold_is_the_best_mean_informedness() -> None:
    import pandas as pd

    jobs = pd.DataFrame({"seed": [1, 1, 1, 1], "is_hacking": [True, True, False, False],
                         "peak": [0.9, 0.7, 0.6, 0.1]})
    best = references.best_threshold(jobs)   # between the healthy 0.6 and the hacking 0.7
    assert best["value"] == 1.0 and 0.6 <= best["threshold"] < 0.7
    assert best["per_seed"] == {"1": 1.0}


def test_a_users_file_is_scored_in_one_command_and_recorded(tiny) -> None:
    path, out, mine = tiny
    r = record(out, mine)
    suite = suite_mod.load_suite(path)
    assert r["suite"] == "tiny" and r["suite_digest"] == suite.digest
    assert r["package_version"] and r["code_digest"] == runner.code_digest()
    assert r["policy_digest"]   # the user's source, hashed
    assert r["aggregate"]["simulated"]["tasks"] == 2 and r["aggregate"]["real"]["tasks"] == 1
    assert mine in (out / "scores.csv").read_text()


def test_a_rerun_gives_the_same_bytes(tiny, tmp_path) -> None:
    path, out, _ = tiny
    before = (out / "scores" / file_name("EvalStop-2")).read_bytes()
    assert score("EvalStop-2", "--suite", str(path), "--out", str(tmp_path)) == 0
    assert (tmp_path / "scores" / file_name("EvalStop-2")).read_bytes() == before


def test_an_interrupted_run_resumes_to_the_same_file(tiny, tmp_path, monkeypatch) -> None:
    """Ctrl-C after two runs: those are kept, the command exits 130 without a score file; the
    same command again runs only the rest and writes the file an uninterrupted run wrote."""
    path, out, _ = tiny
    real_run, calls = runner.run_one, []

    def interrupted(spec):
        if len(calls) == 2:
            raise KeyboardInterrupt
        calls.append(spec.filename)
        return real_run(spec)

    monkeypatch.setattr(runner, "run_one", interrupted)
    assert score("EvalStop-2", "--suite", str(path), "--out", str(tmp_path)) == 130
    assert len(list(tmp_path.glob("*/runs/*.json"))) == 2
    assert not (tmp_path / "scores").exists()
    resumed = []
    monkeypatch.setattr(runner, "run_one", lambda spec: resumed.append(spec) or real_run(spec))
    assert score("EvalStop-2", "--suite", str(path), "--out", str(tmp_path)) == 0
    assert len(resumed) == 4 - 2
    name = file_name("EvalStop-2")
    assert (tmp_path / "scores" / name).read_bytes() == (out / "scores" / name).read_bytes()


def test_the_leaderboard_ranks_every_score_file_beside_the_oracle(tiny, tmp_path) -> None:
    path, out, mine = tiny
    page = tmp_path / "leaderboard.md"
    assert score("--suite", str(path), "--out", str(out), "--leaderboard", str(page)) == 0
    text = page.read_text()
    for name in ("NoStop", "EvalStop-2", mine, leaderboard.ORACLE):
        assert f"| `{name}` |" in text
    assert "--isolate --private-seeds" in text and "## Add a row" in text
    assert (tmp_path / "figures" / f"{leaderboard.PAGE_FIGURE}.png").stat().st_size > 0


def test_bad_input_is_one_line(tmp_path, capsys) -> None:
    assert score("EvalStop-2", "--suite", "nosuch", "--out", str(tmp_path)) == 2
    assert capsys.readouterr().err.count("\n") == 1
    bad = dict(TINY, tasks=[{"id": "x", "experiment": "e2", "real": "5%"}])
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(bad))
    assert score("EvalStop-2", "--suite", str(tmp_path / "bad.yaml"), "--out",
                 str(tmp_path / "o")) == 2
    assert "give one of 'experiment'" in capsys.readouterr().err
    assert score("EvalStop-2", "EvalStop-2", "--out", str(tmp_path / "o")) == 2


def test_training_runs_score_as_one_row(tiny, tmp_path) -> None:
    """`--as NAME`: several policies (a learned policy's training seeds) pooled in one row, each
    member's runs kept apart, so the CI resamples members within each task."""
    path, out, mine = tiny
    members = [mine, mine.replace("-0.1", "-0.2")]
    assert score(*members, "--as", "Drop", "--suite", str(path), "--out", str(tmp_path)) == 0
    r = record(tmp_path, "Drop")
    assert {m["member"] for m in r["runs"]} == set(members)
    assert len([m for m in r["runs"] if m["task"] == "e2-10"]) == 2 * len(TINY["seeds"])
    assert set(r["policy_digest"]) == set(members)
    alone = record(out, mine)
    assert [m for m in r["runs"] if m["member"] == mine] == alone["runs"]


def test_an_isolated_score_matches_and_skips_the_real_tasks(tiny, tmp_path) -> None:
    """--isolate decides in another process on serialised views: the same simulated runs, and
    no real task (its replay would run the policy here)."""
    path, out, _ = tiny
    assert score("EvalStop-2", "--isolate", "--suite", str(path), "--out", str(tmp_path)) == 0
    isolated, plain = record(tmp_path, "EvalStop-2"), record(out, "EvalStop-2")
    assert isolated["isolated"] and isolated["aggregate"]["real"]["tasks"] == 0
    simulated = [r for r in plain["runs"] if r["task"] != "real-15"]
    assert isolated["runs"] == simulated


def test_a_packaged_suite_whose_content_changed_is_refused(monkeypatch) -> None:
    """A packaged version is its pinned digest: content that no longer matches is an error
    that says to make a new version, never a silent redefinition."""
    monkeypatch.setitem(suite_mod.PINNED, "evalstop-v1", "0" * 16)
    with pytest.raises(suite_mod.UsageError, match="a changed suite is a new version"):
        suite_mod.load_suite("evalstop-v1")


def test_a_models_training_is_read_from_what_train_saved(tmp_path) -> None:
    """A learned row says how its models were trained: train's saved arguments, read back."""
    from evalstop_gym.benchmarks.score.command import training

    suite = suite_mod.load_suite("evalstop-v1")
    args = {"algo": "ppo", "control": "stop", "config": "e2", "total_timesteps": 20000,
            "num_envs": 64, "seed": 11000, "out": str(tmp_path)}
    (tmp_path / "results.json").write_text(json.dumps({"args": args}))
    got = training(f"model:{tmp_path / 'ppo_stop.zip'}", suite)
    assert got is not None and got["seed"] == 11000 and got["total_timesteps"] == 20000
    assert training("EvalStop-2", suite) is None
    lines = leaderboard.training_lines([{"policy": "PPO", "training": {"m": got}}])
    assert "--total-timesteps 20000 --seed SEED`, SEED = 11000." in lines[-1]


def test_real_references_measured_on_other_public_runs_are_refused(tiny, tmp_path,
                                                                   capsys) -> None:
    """The real tasks' references record the public runs they were measured on: once the corpus
    changes, scoring is refused in one line until they are measured again."""
    path, _, _ = tiny
    copy = tmp_path / "tiny.yaml"
    shutil.copy(path, copy)
    refs = json.loads(suite_mod.references_path(path).read_text())
    assert refs["real-15"]["data"] == real.data_digest()
    refs["real-15"]["data"] = "0" * 16
    suite_mod.references_path(copy).write_text(json.dumps(refs))
    assert score("EvalStop-2", "--suite", str(copy), "--out", str(tmp_path / "out")) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the public runs changed" in err[0] and "real-15" in err[0]
