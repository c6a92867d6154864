"""Training-log replay: reading trainer_state.json and CSV logs, direction, validation, groups."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import pytest

from evalstop_gym.benchmarks.detectors import replay
from evalstop_gym.traces.log_formats import read_logs
from evalstop_gym.traces.logs import (
    LogError,
    choose_metric,
    history_evals,
    read_csv_runs,
    read_trainer_state,
)

DATA = Path(__file__).parent / "data"
CSV = DATA / "eval_logs_sample.csv"
STATE = DATA / "trainer_state_sample.json"
U_LOSS = [1.0, 0.8, 0.6, 0.5, 0.55, 0.62, 0.7, 0.8, 0.9]


def write_csv(tmp_path: Path, body: str, header: str = "job_id,step,eval_score,loss") -> Path:
    path = tmp_path / "logs.csv"
    path.write_text(header + "\n" + body)
    return path


def write_state(tmp_path: Path, history, name: str = "trainer_state.json", **top) -> Path:
    path = tmp_path / name
    path.write_text(json.dumps({"log_history": history, **top}))
    return path


def eval_history(key: str, values, every: int = 10, loss: bool = True):
    out = []
    for i, v in enumerate(values, 1):
        if loss:
            out.append({"loss": 2.0 / i, "step": i * every - 5})
        out.append({key: v, "eval_runtime": 1.0, "step": i * every})
    return out


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    replay.add_arguments(parser)
    return replay.main(parser.parse_args(list(argv)))


def test_trainer_state_default_metric_skips_loss_and_throughput():
    run = read_trainer_state(STATE)
    assert run.metric == "eval_accuracy" and run.mode == "max"
    assert run.steps == (100, 200, 300, 400, 500, 600, 700, 800)
    assert run.values[3] == 0.62
    assert len(run.losses) == len(run.steps)          # latest training loss before each eval
    assert "choose one with --metric" in run.notes[0]


def test_u_shaped_eval_loss_keeps_the_lowest_checkpoint_and_uses_max_steps(tmp_path):
    path = write_state(tmp_path, eval_history("eval_loss", U_LOSS), max_steps=400)
    run = read_trainer_state(path, metric="eval_loss")
    assert (run.mode, run.mode_from, run.max_steps) == ("min", "the metric's name", 400)
    row = replay.replay([run], ["EvalStop-2"]).iloc[0]
    assert row["stopped"] and row["stop_step"] == 60
    assert row["kept_step"] == 40 and row["kept_value"] == 0.5 and row["best_value"] == 0.5
    assert row["stop_progress"] == pytest.approx(60 / 400)


@pytest.mark.parametrize("key, metric, extra, mode, source", [
    ("eval_wer", None, {}, "min", "the metric's name"),
    ("eval_perplexity", None, {}, "min", "the metric's name"),
    ("eval_bleu", None, {"metric_for_best_model": "bleu", "greater_is_better": False}, "min",
     "the log's greater_is_better"),
    # greater_is_better speaks of metric_for_best_model, not of the metric asked for
    ("eval_acc", "eval_acc", {"metric_for_best_model": "loss", "greater_is_better": False},
     "max", "the default"),
])
def test_direction_from_the_log_or_the_name(tmp_path, key, metric, extra, mode, source):
    path = write_state(tmp_path, eval_history(key, [0.5, 0.4, 0.35, 0.42, 0.5]), **extra)
    run = read_trainer_state(path, metric=metric)
    assert (run.metric, run.mode, run.mode_from) == (key, mode, source)


def test_eval_wer_log_keeps_the_lowest_wer(tmp_path):
    path = write_state(tmp_path, eval_history("eval_wer", [0.5, 0.4, 0.3, 0.35, 0.45]))
    row = replay.replay(read_logs([path]), ["EvalStop-2"]).iloc[0]
    assert row["stopped"] and row["kept_step"] == 30 and row["kept_value"] == 0.3


def test_minus_metric_and_mode_flag(tmp_path, capsys):
    path = write_state(tmp_path, eval_history("eval_score", U_LOSS))
    assert read_trainer_state(path, metric="-eval_score").mode == "min"
    assert read_trainer_state(path, metric="eval_score", mode="min").mode_from == "--mode"
    assert cli(str(path), "--metric=-eval_score", "--detectors", "EvalStop-2") == 0
    out = capsys.readouterr().out
    assert "eval_score, lower is better (from a leading '-' on --metric)" in out


def test_final_evaluate_at_the_last_step_replaces_that_eval(tmp_path):
    history = eval_history("eval_acc", [0.4, 0.5, 0.6]) + [{"eval_acc": 0.65, "step": 30}]
    run = read_trainer_state(write_state(tmp_path, history))
    assert run.steps == (10, 20, 30) and run.values[-1] == 0.65
    assert any("second eval at step 30" in n for n in run.notes)


def test_misspelt_metric_lists_the_keys_the_log_has():
    with pytest.raises(LogError, match=r"no 'eval_f1' evals; its eval keys are: eval_accuracy, "
                                       r"eval_loss"):
        read_trainer_state(STATE, metric="eval_f1")


def test_a_trl_log_names_the_metric_it_picked(tmp_path, capsys):
    history = eval_history("eval_rewards/chosen", [0.1, 0.2, 0.3])
    path = write_state(tmp_path, history)
    assert cli(str(path), "--detectors", "EvalStop-2") == 0
    out = capsys.readouterr().out
    assert "eval_rewards/chosen, higher is better" in out and "choose one with --metric" in out


def test_detectors_that_cannot_act_say_so(tmp_path):
    path = write_state(tmp_path, eval_history("eval_acc", [0.4, 0.5, 0.6], loss=False))
    table = replay.replay(read_logs([path]), ["LossPlateau", "EvalStop-2"])
    assert table["note"].tolist() == ["cannot act: LossPlateau needs the training loss; none "
                                      "was given", ""]
    lora = replay.replay(read_logs([path]), ["EvalStop-2"], job_type="lora")
    assert lora["note"].iloc[0] == "cannot act: EvalStop-2 does not monitor lora runs"


def test_peer_views_are_built_only_for_cross_run_detectors_and_warn_of_nothing(
        tmp_path, caplog, monkeypatch):
    paths = []
    for i, values in enumerate([[0.4, 0.5, 0.6], [0.4, 0.45, 0.5]]):
        (tmp_path / f"r{i}").mkdir()
        paths.append(write_state(tmp_path / f"r{i}", eval_history("eval_acc", values)))
    runs = read_logs(paths)
    built = []
    real = replay.peer_view
    monkeypatch.setattr(replay, "peer_view", lambda r, t: built.append(r) or real(r, t))
    replay.replay(runs, ["EvalStop-2", "Patience-3"])
    assert built == []                                   # no cross-run detector: no peers
    with caplog.at_level("WARNING"):
        table = replay.replay(runs, ["EvalStop-1", "MedianPruner"], job_type="lora")
    assert len(built) == 2                               # once per run, not per detector
    warned = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    assert sum("does not monitor lora runs" in m for m in warned) == 4   # judged ones only
    assert table["note"].tolist()[0] == "cannot act: EvalStop-1 does not monitor lora runs"


def test_cross_run_groups_are_per_metric_and_ignore_file_order(tmp_path, capsys):
    paths = []
    for i, (key, values) in enumerate([("eval_acc", [0.5, 0.6, 0.7, 0.8]),
                                       ("eval_acc", [0.5, 0.62, 0.72, 0.83]),
                                       ("eval_acc", [0.2, 0.25, 0.3, 0.3]),
                                       ("eval_wer", [0.5, 0.4, 0.3, 0.2])]):
        folder = tmp_path / f"run{i}"
        folder.mkdir()
        paths.append(write_state(folder, eval_history(key, values), max_steps=40))
    runs = read_logs(paths)
    table = replay.replay(runs, ["MedianPruner-50-2"]).set_index("run_id")
    backwards = replay.replay(runs[::-1], ["MedianPruner-50-2"]).set_index("run_id")
    assert table.loc["run2", "stopped"] and not table.loc["run0", "stopped"]
    assert not table.loc["run3", "stopped"]           # no eval_wer peers: nothing to learn from
    assert table.sort_index().equals(backwards.sort_index())
    assert replay.mixed_groups(replay.group_runs(runs, "metric")) == []
    assert cli(*map(str, paths), "--detectors", "MedianPruner", "--group-by", "none") == 0
    assert "pools runs of different metrics (eval_acc (max), eval_wer (min))" in \
        capsys.readouterr().err


def test_csv_runs_extra_columns_and_bom(tmp_path):
    runs = read_csv_runs(CSV)
    assert [r.run_id for r in runs] == ["healthy-a", "hacking-b"]
    assert runs[1].values[3] == 0.63 and len(runs[1].losses) == 7
    path = tmp_path / "bom.csv"
    path.write_bytes("\ufeffjob_id,step,eval_score,test_score\na,10,0.5,0.9\na,20,0.6,0.8\n"
                     .encode())
    assert read_csv_runs(path)[0].values == (0.5, 0.6)
    chosen = read_csv_runs(path, metric="test_score")[0]
    assert chosen.metric == "test_score" and chosen.values == (0.9, 0.8)


@pytest.mark.parametrize("body, message", [
    ("a,10,0.5,1\na,20,nan,1\n", r"line 3: eval_score is 'nan'"),
    ("a,10,0.5,1\na,20,inf,1\n", r"line 3: eval_score is 'inf'"),
    ("a,10,0.5,1\na,10,0.6,1\n", r"line 3: step 10 of run 'a' does not increase"),
    ("a,10,0.5,1\na,5,0.6,1\n", r"line 3: step 5"),
    ("a,10,x,1\n", r"line 2: eval_score is not a number"),
    ("a,1.5,0.5,1\n", r"line 2: step must be a whole number"),
    (",10,0.5,1\n", r"line 2: empty job_id"),
    ("a,10,0.5,1,7\n", r"line 2: 5 values for 4 columns"),
    ("", r"no rows after the header"),
])
def test_csv_validation_names_file_and_row(tmp_path, body, message):
    path = write_csv(tmp_path, body)
    with pytest.raises(LogError, match=message) as err:
        read_csv_runs(path)
    assert str(path) in str(err.value)


@pytest.mark.parametrize("content, message", [
    (b"job,step,score\n", "missing column"),
    (b"job_id,step,eval_score,eval_score\na,1,0.5,0.6\n", "column 'eval_score' appears twice"),
    (b"\x89PNG\r\n\x1a\n\x00\x00\xff\xfe", "not UTF-8 text"),
    (b"job_id,step,eval_score\na,1,0.5\x00\n", "eval_score is not a number"),
])
def test_csv_files_that_cannot_be_logs(tmp_path, content, message):
    path = tmp_path / "bad.csv"
    path.write_bytes(content)
    with pytest.raises(LogError, match=message):
        read_csv_runs(path)


@pytest.mark.parametrize("state, message", [
    ({"log_history": None}, "log_history must be a list of objects"),
    ({"log_history": [1, 2]}, "log_history must be a list of objects"),
    ([1, 2], "log_history must be a list of objects"),
    ({"log_history": [{"eval_acc": True, "step": 10}]}, r"\[0\]: eval_acc must be a number, "
                                                        r"got True"),
    ({"log_history": [{"eval_acc": "0.5", "step": 10}]}, r"eval_acc must be a number, got '0.5'"),
    ({"log_history": [{"eval_acc": 0.5, "step": "10"}]}, r"step must be a number"),
    ({"log_history": [{"eval_acc": 0.5, "step": 10}, {"eval_acc": float("nan"), "step": 20}]},
     r"log_history\[1\]: eval_acc is nan"),
    ({"log_history": [{"loss": 1.0, "step": 10}]}, "no eval_"),
    ({"log_history": [{"eval_acc": 0.5, "step": 500}], "max_steps": 100},
     "past the log's max_steps=100"),
])
def test_trainer_state_validation(tmp_path, state, message):
    path = tmp_path / "state.json"
    path.write_text(json.dumps(state))
    with pytest.raises(LogError, match=message):
        read_trainer_state(path)


def test_unreadable_trainer_state(tmp_path):
    path = tmp_path / "state.json"
    path.write_text("{not json")
    with pytest.raises(LogError, match="not a readable trainer_state.json"):
        read_trainer_state(path)
    path.write_bytes(b"\xff\xfe\x00binary")
    with pytest.raises(LogError, match="not a readable trainer_state.json"):
        read_trainer_state(path)
    with pytest.raises(LogError, match="no such file"):
        read_logs([tmp_path / "absent.csv"])


def test_choose_metric():
    history = [{"eval_loss": 1.0, "eval_runtime": 3.0, "step": 10}]
    assert choose_metric(history) == "eval_loss"
    assert choose_metric(history + [{"eval_f1": 0.5, "step": 20}]) == "eval_f1"


def test_replay_table_stops_the_hacking_run_and_keeps_its_best():
    table = replay.replay(read_logs([CSV]), ["EvalStop-2", "Patience-2"])
    assert len(table) == 4
    healthy = table[table["run_id"] == "healthy-a"]
    hacking = table[table["run_id"] == "hacking-b"]
    assert not healthy["stopped"].any()
    assert hacking["stopped"].all()
    assert (hacking["kept_step"] == 600).all() and (hacking["kept_value"] == 0.63).all()
    assert (hacking["stop_step"] == 900).all()


def test_replay_cli_prints_a_table_and_reports_bad_input(capsys, tmp_path):
    assert cli(str(CSV), str(STATE)) == 0
    out = capsys.readouterr().out
    assert "| run_id | metric | mode | detector |" in out and "trainer_state_sample" in out
    bad = write_csv(tmp_path, "a,10,nan,1\n")
    assert cli(str(bad)) == 2
    assert "line 2" in capsys.readouterr().err
    assert cli(str(CSV), "--detectors", "Nope-1") == 2
    assert cli(str(CSV), "--detectors", "CUSUM-nan-3") == 2
    assert "detector 'CUSUM-nan-3'" in capsys.readouterr().err
    assert cli(str(CSV), "--csv", str(tmp_path / "missing" / "t.csv")) == 2
    assert "does not exist" in capsys.readouterr().err
    assert cli(str(CSV), "--csv", str(tmp_path / "t.csv")) == 0
    assert (tmp_path / "t.csv").read_text().startswith("run_id,source,metric,mode,n_evals,detector")
    assert not list(tmp_path.glob(".tmp-*"))


def test_metric_and_direction_saved_by_the_hf_callback_are_used(tmp_path):
    saved = {"EvalStopCallback": {"args": {"detector": "EvalStop-2", "metric": "eval_wer_clean",
                                           "mode": "min", "job_type": "rlhf"},
                                  "attributes": {}}}
    history = eval_history("eval_acc", [0.1, 0.2]) + eval_history("eval_wer_clean", [0.3, 0.2])
    run = read_trainer_state(write_state(tmp_path, history, stateful_callbacks=saved))
    assert (run.metric, run.mode, run.mode_from) == ("eval_wer_clean", "min",
                                                     "the log's greater_is_better")


def test_history_evals_is_the_one_walk_and_yields_every_eval_with_its_loss(tmp_path):
    history = [{"eval_acc": 0.1, "step": 5}, {"loss": 1.5, "step": 8},
               {"eval_acc": 0.4, "step": 10}, {"loss": 0.9, "step": 10},
               {"eval_acc": 0.45, "step": 10}]
    walked = list(history_evals(history, "eval_acc"))
    assert [(e.row, e.step, e.value, e.loss) for e in walked] == [
        (0, 5, 0.1, None), (2, 10, 0.4, 1.5), (4, 10, 0.45, 0.9)]     # the repeat too
    run = read_trainer_state(write_state(tmp_path, history))
    assert run.steps == (5, 10) and run.values == (0.1, 0.45)        # the replay keeps the later
    assert run.losses[0] != run.losses[0] and run.losses[1] == 0.9
    with pytest.raises(LogError, match=r"here\[1\]: loss must be a number, got True"):
        list(history_evals([{"eval_acc": 0.1, "step": 5}, {"loss": True}], "eval_acc", "here"))
    lenient = history_evals([{"eval_acc": float("nan"), "step": 5}, {"eval_acc": 0.2}],
                            "eval_acc", strict=False)
    assert [e.step for e in lenient] == [5]                          # NaN for offer to skip


def test_csv_is_streamed_and_names_the_bad_byte_anywhere_in_the_file(tmp_path, monkeypatch):
    head = "\ufeffjob_id,step,eval_score\n" + "".join(f"a,{i},0.5\n" for i in range(1, 5000))
    raw = head.encode()                                              # the BOM counts: 3 bytes
    path = tmp_path / "late.csv"
    path.write_bytes(raw + b"a,5000,0.\xff\n")                       # far past a read chunk
    monkeypatch.setattr(Path, "read_bytes", lambda self: pytest.fail("read whole"))
    with pytest.raises(LogError, match=rf"late.csv: not UTF-8 text \(byte {len(raw) + 9}\); "
                                       r"a replay CSV is UTF-8 with a header job_id"):
        read_csv_runs(path)
    path.write_bytes(raw + b"a,5000,0.6\n")
    assert len(read_csv_runs(path)[0].steps) == 5000
    path.write_bytes(raw[:40] + b"\xe2\x82")                         # ends inside a character
    with pytest.raises(LogError, match=r"not UTF-8 text \(byte 40\)"):
        read_csv_runs(path)


def test_csv_reader_closes_the_file_on_every_path(tmp_path, monkeypatch):
    opened = []
    real_open = Path.open

    def tracked(self, *args, **kwargs):
        opened.append(real_open(self, *args, **kwargs))
        return opened[-1]

    monkeypatch.setattr(Path, "open", tracked)
    cases = [(b"job_id,step,eval_score\na,1,0.5\n", None, None),
             (b"job_id,step,eval_score\na,1,0.5\n", "test_score", "no column 'test_score'"),
             (b"job_id,step,eval_score\na,1,x\n", None, "not a number"),
             (b"job,step\n", None, "missing column"),
             (b"job_id,step,eval_score\na,1,\xff\n", None, "not UTF-8 text")]
    for content, metric, message in cases:
        path = tmp_path / "c.csv"
        path.write_bytes(content)
        if message is None:
            read_csv_runs(path, metric)
        else:
            with pytest.raises(LogError, match=message):
                read_csv_runs(path, metric)
    assert opened and all(handle.closed for handle in opened)
