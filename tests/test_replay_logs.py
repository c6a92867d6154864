"""Training-log replay: reading HF trainer_state.json and CSV logs, validation, the replay table."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from evalstop_gym.benchmarks import replay
from evalstop_gym.traces.logs import (
    LogError,
    choose_metric,
    read_csv_runs,
    read_logs,
    read_trainer_state,
    replay_views,
)

DATA = Path(__file__).parent / "data"
CSV = DATA / "eval_logs_sample.csv"
STATE = DATA / "trainer_state_sample.json"


def write_csv(tmp_path: Path, body: str) -> Path:
    path = tmp_path / "logs.csv"
    path.write_text("job_id,step,eval_score,loss\n" + body)
    return path


def test_trainer_state_default_metric_skips_loss_and_throughput():
    run = read_trainer_state(STATE)
    assert run.metric == "eval_accuracy"
    assert run.steps == (100, 200, 300, 400, 500, 600, 700, 800)
    assert run.scores[3] == 0.62
    assert len(run.losses) == len(run.steps)          # latest training loss before each eval


def test_trainer_state_metric_choice_and_negated_eval_loss(tmp_path):
    assert read_trainer_state(STATE, metric="eval_loss").scores[0] == pytest.approx(0.8)
    history = [{"eval_loss": 1.0, "eval_runtime": 3.0, "step": 10},
               {"eval_loss": 0.8, "eval_runtime": 3.0, "step": 20}]
    assert choose_metric(history) == ("eval_loss", -1.0)
    path = tmp_path / "trainer_state.json"
    path.write_text(json.dumps({"log_history": history}))
    run = read_trainer_state(tmp_path)                 # a checkpoint directory works too
    assert run.metric == "-eval_loss" and run.scores == (-1.0, -0.8)
    assert run.run_id == tmp_path.name and run.losses == ()


def test_csv_runs_in_order_of_appearance():
    runs = read_csv_runs(CSV)
    assert [r.run_id for r in runs] == ["healthy-a", "hacking-b"]
    assert runs[1].scores[3] == 0.63 and len(runs[1].losses) == 7


@pytest.mark.parametrize("body, message", [
    ("a,10,0.5,1\na,20,nan,1\n", r"line 3: eval_score is 'nan'"),
    ("a,10,0.5,1\na,20,inf,1\n", r"line 3: eval_score is 'inf'"),
    ("a,10,0.5,1\na,10,0.6,1\n", r"line 3: step 10 of run 'a' does not increase"),
    ("a,10,0.5,1\na,5,0.6,1\n", r"line 3: step 5"),
    ("a,10,x,1\n", r"line 2: eval_score is not a number"),
    ("a,1.5,0.5,1\n", r"line 2: step must be a whole number"),
    (",10,0.5,1\n", r"line 2: empty job_id"),
    ("", r"no rows after the header"),
])
def test_csv_validation_names_file_and_row(tmp_path, body, message):
    path = write_csv(tmp_path, body)
    with pytest.raises(LogError, match=message) as err:
        read_csv_runs(path)
    assert str(path) in str(err.value)


def test_csv_missing_column_and_missing_file(tmp_path):
    path = tmp_path / "bad.csv"
    path.write_text("job,step,score\n")
    with pytest.raises(LogError, match="missing column"):
        read_csv_runs(path)
    with pytest.raises(LogError, match="no such file"):
        read_logs([tmp_path / "absent.csv"])


def test_trainer_state_validation(tmp_path):
    path = tmp_path / "state.json"
    path.write_text(json.dumps({"log_history": [{"eval_acc": 0.5, "step": 10},
                                                {"eval_acc": float("nan"), "step": 20}]}))
    with pytest.raises(LogError, match=r"log_history\[1\]: eval_acc is nan"):
        read_trainer_state(path)
    path.write_text(json.dumps({"log_history": [{"loss": 1.0, "step": 10}]}))
    with pytest.raises(LogError, match="no eval_"):
        read_trainer_state(path)
    path.write_text(json.dumps({"log_history": [{"eval_acc": 0.5, "step": 10}]}))
    with pytest.raises(LogError, match="has no evals"):
        read_trainer_state(path, metric="eval_f1")
    path.write_text("{not json")
    with pytest.raises(LogError, match="not a readable trainer_state.json"):
        read_trainer_state(path)


def test_replay_views_use_only_logged_evals():
    run = read_csv_runs(CSV)[1]
    views = replay_views(run)
    assert views[2].eval_scores == run.scores[:3]
    assert views[-1].progress == 1.0 and views[0].progress == pytest.approx(1 / 7)
    assert views[-1].state == "completed"


def test_replay_table_stops_the_hacking_run_and_keeps_its_best():
    table = replay.replay(read_logs([CSV]), ["EvalStop-2", "Patience-2"])
    assert len(table) == 4
    healthy = table[table["run"] == "healthy-a"]
    hacking = table[table["run"] == "hacking-b"]
    assert not healthy["stopped"].any()
    assert hacking["stopped"].all()
    assert (hacking["kept_step"] == 600).all() and (hacking["kept_score"] == 0.63).all()
    assert (hacking["stop_step"] == 900).all()


def test_replay_cli_prints_a_table_and_reports_bad_input(capsys, tmp_path):
    parser = argparse.ArgumentParser()
    replay.add_arguments(parser)
    assert replay.main(parser.parse_args([str(CSV), str(STATE)])) == 0
    out = capsys.readouterr().out
    assert "| run | detector |" in out and "trainer_state_sample" in out
    bad = write_csv(tmp_path, "a,10,nan,1\n")
    assert replay.main(parser.parse_args([str(bad)])) == 2
    assert "line 2" in capsys.readouterr().err
    assert replay.main(parser.parse_args([str(CSV), "--detectors", "Nope-1"])) == 2
