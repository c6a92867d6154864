"""Replay reads the logs people have: replay CSVs' max_steps."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from evalstop_gym import traces
from evalstop_gym.benchmarks import replay
from evalstop_gym.traces.logs import LogError, read_csv_runs

CORPUS = Path(traces.__file__).parent / "data" / "corpus"
ACC = [0.52, 0.61, 0.68, 0.71, 0.69, 0.66, 0.64]     # peaks at the 4th eval


def cli(*argv: str) -> int:
    parser = argparse.ArgumentParser()
    replay.add_arguments(parser)
    return replay.main(parser.parse_args(list(argv)))


# --- 5. a replay CSV's max_steps column ----------------------------------------------------

def test_the_corpus_max_steps_column_gives_progress(capsys):
    path = CORPUS / "reward.csv"
    runs = read_csv_runs(path)
    assert all(r.max_steps is not None and r.steps[-1] <= r.max_steps for r in runs)
    assert cli(str(path), "--detectors", "EvalStop-2") == 0
    out = capsys.readouterr().out
    assert "max_steps unknown" not in out and f"max_steps {runs[0].max_steps}" in out


@pytest.mark.parametrize("cells, message", [
    ("10,0.5,100\n20,0.6,0\n", r"line 3: max_steps must be a whole number > 0, got '0'"),
    ("10,0.5,1.5\n", r"line 2: max_steps must be a whole number"),
    ("10,0.5,15\n20,0.6,15\n", r"line 3: step 20 is past the log's max_steps=15"),
])
def test_max_steps_column_is_checked(tmp_path, cells, message):
    path = tmp_path / "runs.csv"
    path.write_text("job_id,step,eval_score,max_steps\n" +
                    "".join(f"r,{c}" for c in cells.splitlines(keepends=True)))
    with pytest.raises(LogError, match=message):
        read_csv_runs(path)


def test_max_steps_sets_progress_and_completion(tmp_path):
    path = tmp_path / "runs.csv"
    path.write_text("job_id,step,eval_score,max_steps\n" +
                    "".join(f"r,{10 * i},{v},100\n" for i, v in enumerate(ACC, 1)))
    [run] = read_csv_runs(path)
    assert run.max_steps == 100
    row = replay.replay([run], ["EvalStop-2"]).iloc[0]
    assert row["stopped"] and row["stop_progress"] == pytest.approx(row["stop_step"] / 100)
