"""What a user does by mistake ends in a one-line error, a correct result, or a stated refusal:
never a replaced input, a traceback after the work, or a silent nothing."""

from __future__ import annotations

import argparse
import errno
import os

import pytest

from evalstop_gym.benchmarks import cli, durable

LOG = "job_id,step,eval_score\n" + "".join(
    f"{run},{10 * (i + 1)},{0.5 + 0.01 * i}\n" for run in ("a", "b") for i in range(6))


def one_line_error(capsys) -> str:
    """stderr, after any progress bar (which a terminal erases: `leave=False`), in one line."""
    err = capsys.readouterr().err.rpartition("\r")[2].strip()
    assert "Traceback" not in err and len(err.splitlines()) == 1, err
    return err


@pytest.fixture
def log_csv(tmp_path):
    path = tmp_path / "log.csv"
    path.write_text(LOG)
    return path


@pytest.fixture
def a_file(tmp_path):
    """A regular file: a path under it can be neither created nor written, even by root."""
    path = tmp_path / "plain.txt"
    path.write_text("keep me")
    return path


# --- outputs never replace inputs ----------------------------------------------------------

def test_replay_refuses_to_write_its_table_over_the_log(log_csv, capsys):
    assert cli.main(["replay", str(log_csv), "--csv", str(log_csv)]) == 2
    assert "--csv" in one_line_error(capsys)
    assert log_csv.read_text() == LOG


def test_replay_refuses_the_log_under_another_spelling(log_csv, capsys, monkeypatch):
    monkeypatch.chdir(log_csv.parent)
    assert cli.main(["replay", str(log_csv), "--csv", "./sub/../log.csv"]) == 2
    assert "is also an input" in one_line_error(capsys)
    assert log_csv.read_text() == LOG


def test_replay_refuses_a_hard_link_to_the_log(log_csv, tmp_path, capsys):
    link = tmp_path / "other.csv"
    os.link(log_csv, link)
    assert cli.main(["replay", str(log_csv), "--csv", str(link)]) == 2
    one_line_error(capsys)
    assert log_csv.read_text() == LOG


def test_replay_writes_a_separate_csv(log_csv, tmp_path, capsys):
    out = tmp_path / "table.csv"
    assert cli.main(["replay", str(log_csv), "--csv", str(out)]) == 0
    assert out.read_text().startswith("run_id,") and log_csv.read_text() == LOG


# --- every output path checked at the entry --------------------------------------------------

@pytest.mark.parametrize("argv,needle", [
    (["replay", "{log}", "--csv", "{dir}"], "is a folder"),
    (["replay", "{log}", "--csv", "{file}/t.csv"], "is a file, not a folder"),
    (["calibrate", "--out", "{file}", "--trials", "1"], "is a file; expected a folder"),
    (["calibrate", "--out", "{file}/cal", "--trials", "1"], "is a file, not a folder"),
    (["train", "--out", "{file}", "--total-timesteps", "1"], "is a file; expected a folder"),
    (["report", "--out", "{dir}/o", "--reproduction", "{dir}"], "is a folder"),
    (["report", "--out", "{dir}/o", "--reproduction", "{file}/R.md"], "not a folder"),
    (["run", "e2", "--out", "{file}"], "is a file; expected a folder"),
    (["report", "--out", "{dir}/o", "--calibration", "{dir}", "--reproduction",
      "{dir}/calibration.md"], "is also an input"),
    (["replay", "{log}", "--csv", "{dir}/missing/t.csv"], "does not exist; create it first"),
    (["report", "--out", "{dir}/o", "--learned", "{dir}", "--reproduction", "{dir}/sub/R.md"],
     "is inside the input folder"),
    (["report", "--out", "{dir}/o", "--calibration", "{dir}", "--reproduction",
      "{dir}/R.md"], "is inside the input folder"),
])
def test_a_bad_output_path_fails_before_any_work(argv, needle, log_csv, a_file, tmp_path,
                                                  capsys):
    subs = {"log": str(log_csv), "file": str(a_file), "dir": str(tmp_path)}
    assert cli.main([a.format(**subs) for a in argv]) == 2
    err = one_line_error(capsys)
    assert needle in err and ("--out" in err or "--csv" in err or "--reproduction" in err)
    assert not (tmp_path / "o").exists()   # report: OUT not even created
    assert a_file.read_text() == "keep me"


def test_report_writes_nothing_inside_a_folder_it_reads(tmp_path, capsys):
    """REPRODUCTION.md, figures/, BEYOND.md and --out, each inside a --learned folder: refused
    in one line naming the option, before anything is written."""
    learned = tmp_path / "ppo_stop"
    learned.mkdir()
    (learned / "results.csv").write_text("kept")
    for extra in (["--reproduction", str(learned / "R.md")],
                  ["--out", str(learned / "results"), "--reproduction", str(tmp_path / "R.md")]):
        argv = ["report", "--out", str(tmp_path / "o"), "--learned", str(learned), *extra]
        assert cli.main(argv) == 2
        err = one_line_error(capsys)
        assert f"is inside the input folder {learned}" in err
        assert sorted(p.name for p in learned.iterdir()) == ["results.csv"]


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes into a chmod 0o500 folder anyway; "
                    "the path-under-a-file cases above cover the error path")
def test_an_unwritable_folder_fails_at_the_entry(log_csv, tmp_path, capsys):
    locked = tmp_path / "locked"
    locked.mkdir()
    locked.chmod(0o500)
    try:
        assert cli.main(["replay", str(log_csv), "--csv", str(locked / "t.csv")]) == 2
        assert "not writable" in one_line_error(capsys)
    finally:
        locked.chmod(0o700)


# --- a full disk -----------------------------------------------------------------------------

class _FillsTheDisk:
    """A table whose writer runs out of space half way, as `to_csv` would on a full disk."""

    def to_csv(self, path, index=False):
        with open(path, "w") as fh:
            fh.write("run,half a row")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))


def test_a_full_disk_is_one_line_and_leaves_the_old_file(tmp_path):
    target = tmp_path / "table.csv"
    target.write_text("the old table\n")
    with pytest.raises(durable.OutputError) as caught:
        durable.write_csv(_FillsTheDisk(), target)
    message = str(caught.value)
    assert len(message.splitlines()) == 1 and str(target) in message
    assert os.strerror(errno.ENOSPC) in message
    assert target.read_text() == "the old table\n"
    assert [p.name for p in tmp_path.iterdir()] == ["table.csv"]   # no half-written temp file


def test_an_os_error_reaching_the_cli_is_one_line(monkeypatch, log_csv, tmp_path, capsys):
    """Whatever OSError escapes a command (here ENOSPC from inside the replay's table write) is
    reported in one line with exit code 1, not a traceback."""
    from evalstop_gym.benchmarks.detectors import replay

    def full(table, path):
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC), str(path))

    monkeypatch.setattr(replay, "write_csv", full)
    assert cli.main(["replay", str(log_csv), "--csv", str(tmp_path / "t.csv")]) == 1
    assert os.strerror(errno.ENOSPC) in one_line_error(capsys)


# --- late errors and tracebacks, now one line at the entry ----------------------------------

def test_a_corrupt_study_database_is_one_line_naming_it(tmp_path, capsys):
    (tmp_path / "study.sqlite").write_text("not a database")
    assert cli.main(["calibrate", "--out", str(tmp_path), "--trials", "1", "--seeds", "1",
                     "--n-jobs", "8"]) == 2
    err = one_line_error(capsys)
    assert "study.sqlite" in err and "not an Optuna study database" in err


@pytest.mark.parametrize("option", [["--validation-seeds", "-1"], ["--seeds", "3", "3"],
                                    ["--sampler-seed", "-2"]])
def test_calibrate_refuses_bad_seeds_before_the_search(option, tmp_path, capsys):
    assert cli.main(["calibrate", "--out", str(tmp_path / "cal"), "--trials", "1",
                     *option]) == 2
    assert option[0] in one_line_error(capsys)
    assert not (tmp_path / "cal").exists()


@pytest.mark.parametrize("argv,needle", [
    (["--max-jobs", "5000", "--control", "full"], "--max-jobs 5000: expected a whole number in"),
    (["--seed", "-1"], "--seed -1: expected a whole number in [0, "),
    (["--base-scheduler", "SRTF"], "base scheduler 'SRTF'"),
])
def test_train_names_the_field_and_its_range(argv, needle, tmp_path, capsys):
    out = tmp_path / "tr"
    assert cli.main(["train", "--out", str(out), "--total-timesteps", "1", *argv]) == 2
    assert needle in one_line_error(capsys)
    assert not out.exists()


def test_a_zip_that_is_not_a_model_is_one_line_naming_the_file(tmp_path, capsys):
    import zipfile

    for name, write in (("junk.zip", lambda p: p.write_text("PK but no zip")),
                        ("other.zip", lambda p: zipfile.ZipFile(p, "w").close())):
        path = tmp_path / name
        write(path)
        spec = f"model:{path}+SRTF-Est"
        assert cli.main(["run", "e2", "--out", str(tmp_path / "o"), "--policy", spec]) == 2
        err = one_line_error(capsys)
        assert str(path) in err and "model" in err


@pytest.mark.parametrize("name,needle", [
    ("EvalStop-x", "parameter 'x' must be a whole number; expected EvalStop-K[-K_DPO][-best]: "
                   "K and K_DPO positive integers"),
    ("EvalStop-2.5", "'2.5' must be a whole number"),
    ("StopAt-high", "parameter 'high' must be a number; expected StopAt-P: P a number in (0, 1)"),
    ("Patience-x", "parameter 'x' must be a whole number; expected Patience-<number>"),
])
def test_a_malformed_detector_name_says_what_was_expected(name, needle, log_csv, capsys):
    assert cli.main(["replay", str(log_csv), "--detectors", name]) == 2
    err = one_line_error(capsys)
    assert needle in err and "invalid literal" not in err and "could not convert" not in err


# --- clusters and workers: a deadline and a cap ------------------------------------------------

@pytest.fixture
def tiny(tmp_path):
    from test_cli import tiny as tiny_yaml  # tests/ is on sys.path under pytest

    return tiny_yaml(tmp_path)


def closed_port() -> int:
    """A local port that was just bound and closed: nothing listens there."""
    import socket

    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.mark.parametrize("backend", ["ray", "dask"])
def test_a_cluster_address_where_nothing_listens_is_one_line(backend, tiny, tmp_path, capsys):
    address = f"127.0.0.1:{closed_port()}"
    assert cli.main(["run", tiny, "--out", str(tmp_path / "o"), "--backend", backend,
                     "--scheduler-address", address]) == 2
    err = one_line_error(capsys)
    assert f"{backend} cluster at {address}: cannot connect within 10 s" in err


def test_a_silent_dask_scheduler_fails_at_the_deadline(tiny, tmp_path, capsys, monkeypatch):
    """A port that accepts but never speaks: the client gives up at the (here 1 s) deadline."""
    import socket

    monkeypatch.setenv("EVALSTOP_CONNECT_S", "1")
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(4)
        address = f"tcp://127.0.0.1:{server.getsockname()[1]}"
        assert cli.main(["run", tiny, "--out", str(tmp_path / "o"), "--backend", "dask",
                         "--scheduler-address", address]) == 2
    assert f"dask cluster at {address}: cannot connect within 1 s" in one_line_error(capsys)


@pytest.mark.parametrize("backend,address,needle", [
    ("loky", "127.0.0.1:8786", "runs on this machine only"),
    ("dask", "127.0.0.1", "expected HOST:PORT or tcp://HOST:PORT"),
    ("dask", "ray://127.0.0.1:10001", "expected HOST:PORT"),
    ("dask", "host:99999", "PORT in 1..65535"),
    ("ray", "http//x:1", "expected HOST:PORT or ray://HOST:PORT or auto"),
])
def test_a_malformed_or_ignored_address_is_refused_at_the_entry(backend, address, needle, tiny,
                                                                 tmp_path, capsys):
    assert cli.main(["run", tiny, "--out", str(tmp_path / "o"), "--backend", backend,
                     "--scheduler-address", address]) == 2
    assert needle in one_line_error(capsys)
    assert not (tmp_path / "o").exists()


def test_a_bad_deadline_setting_is_one_line(tiny, tmp_path, capsys, monkeypatch):
    monkeypatch.setenv("EVALSTOP_CONNECT_S", "soon")
    assert cli.main(["run", tiny, "--out", str(tmp_path / "o"), "--backend", "dask",
                     "--scheduler-address", f"127.0.0.1:{closed_port()}"]) == 2
    assert "EVALSTOP_CONNECT_S='soon'" in one_line_error(capsys)


def test_workers_are_capped_at_the_cpu_count_with_a_warning(tiny, tmp_path, capsys, caplog):
    from evalstop_gym.benchmarks.sweep.runner import available_cpus, local_workers

    cpus = available_cpus()
    assert local_workers(cpus) == cpus and local_workers(1000) == cpus
    caplog.clear()
    assert cli.main(["run", tiny, "--out", str(tmp_path / "o"), "--workers", "1000"]) == 0
    warnings = [r.getMessage() for r in caplog.records if r.levelname == "WARNING"]
    capped = f"--workers 1000: capped at {cpus}, the CPUs this machine gives this process"
    assert warnings.count(capped) == 1
    assert (tmp_path / "o" / "tiny" / "runs.csv").exists()


# --- replay: nothing silently inert, nothing learnt from a crash, long runs in seconds ---------

def test_replay_refuses_a_detector_list_with_no_detector(log_csv, capsys):
    assert cli.main(["replay", str(log_csv), "--detectors", "none"]) == 2
    err = one_line_error(capsys)
    assert "--detectors none: no detector to replay" in err


def crash_log(tmp_path, crashed: str):
    """A poor run, and a crashed run whose curve, taken as a finished peer, would condemn it."""
    rows = ["job_id,step,eval_score,completed"]
    rows += [f"poor,{10 * i},{0.2 + 0.01 * i},yes" for i in range(1, 7)]
    rows += [f"crash,{10 * i},{0.8 + 0.01 * i},{crashed}" for i in range(1, 7)]
    path = tmp_path / f"crash_{crashed}.csv"
    path.write_text("\n".join(rows) + "\n")
    return path


def test_a_crashed_run_is_replayed_but_never_a_peer(tmp_path, capsys):
    from evalstop_gym.benchmarks.detectors import replay
    from evalstop_gym.traces.log_formats import read_logs

    peer = replay.replay(read_logs([crash_log(tmp_path, "yes")]), ["MedianPruner-50-1"])
    crash = replay.replay(read_logs([crash_log(tmp_path, "no")]), ["MedianPruner-50-1"])
    assert peer.set_index("run_id").loc["poor", "stopped"]          # judged against the peer
    assert not crash.set_index("run_id").loc["poor", "stopped"]     # no finished peer left
    assert crash["run_id"].tolist() == ["poor", "crash"]            # the crash is still replayed
    assert cli.main(["replay", str(crash_log(tmp_path, "no")), "--detectors",
                     "MedianPruner-50-1"]) == 0
    assert "crash: eval_score" in (out := capsys.readouterr().out)
    assert "crashed (completed=no): replayed, but never a peer" in out


def test_a_completed_cell_that_is_not_yes_or_no_is_refused(tmp_path, capsys):
    path = crash_log(tmp_path, "maybe")
    assert cli.main(["replay", str(path)]) == 2
    assert "completed is 'maybe'; expected yes or no" in one_line_error(capsys)


def test_replay_defaults_are_detectors_of_constant_cost_per_eval():
    """The default list holds no detector that rescans a run's history at every eval."""
    from evalstop_gym.benchmarks.detectors.replay import DEFAULT_DETECTORS

    assert DEFAULT_DETECTORS and not {d.split("-")[0] for d in DEFAULT_DETECTORS} & {
        "CUSUM", "BOCPD"}


def test_replay_shows_progress_on_stderr(log_csv, capsys):
    assert cli.main(["replay", str(log_csv), "--detectors", "EvalStop-2"]) == 0
    captured = capsys.readouterr()
    assert "replay:" in captured.err and "eval" in captured.err   # the tqdm bar
    assert "| a | eval_score |" in captured.out


# --- reports from missing inputs, and the shipped corpus ------------------------------------

def test_beyond_refuses_a_folder_without_its_runs_and_keeps_the_old_file(tmp_path, capsys):
    from evalstop_gym.benchmarks.catalog import BEYOND
    from evalstop_gym.benchmarks.report import beyond

    (tmp_path / "BEYOND.md").write_text("the old report\n")
    assert beyond.main([str(tmp_path / "no-such-results"), "--root", str(tmp_path)]) == 2
    err = one_line_error(capsys)
    assert f"holds none of {', '.join(BEYOND)}'s runs.csv" in err and "left as it was" in err
    assert (tmp_path / "BEYOND.md").read_text() == "the old report\n"
    assert not (tmp_path / "figures").exists()


def test_corpus_build_refuses_the_shipped_corpus_and_defaults_to_the_current_folder(capsys):
    from evalstop_gym.benchmarks.corpus import build
    from evalstop_gym.traces.corpus import corpus_file

    shipped = corpus_file("supervised").parent
    before = {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()}
    assert cli.main(["corpus", "build", "--out", str(shipped)]) == 2
    assert "inside the installed package" in one_line_error(capsys)
    assert cli.main(["corpus", "build", "--out", str(shipped / "sub")]) == 2
    one_line_error(capsys)
    assert {p.name: p.stat().st_mtime_ns for p in shipped.iterdir()} == before
    assert str(build.DEFAULT_OUT) == "corpus" and not build.DEFAULT_OUT.is_absolute()
    parser = argparse.ArgumentParser()
    build.add_arguments(parser)
    assert "corpus/ in the current folder" in " ".join(parser.format_help().split())


def test_corpus_build_refuses_a_file_as_its_folder(a_file, capsys):
    assert cli.main(["corpus", "build", "--out", str(a_file)]) == 2
    assert "is a file; expected a folder" in one_line_error(capsys)


# --- report: a --set variant never replaces the paper's runs or tables ------------------------

def test_report_with_set_keeps_the_paper_runs_and_says_so_at_the_top(tmp_path, capsys,
                                                                      monkeypatch):
    """Finished paper-default files in OUT/e2 survive `report --set`; the variant's runs go to
    OUT/e2__workload.n_jobs=8/; REPRODUCTION.md opens with its seeds and overrides; every file
    written is printed."""
    monkeypatch.setenv("EVALSTOP_ENGINE", "python")   # no kernel compile in this test
    out, target = tmp_path / "out", tmp_path / "REPRODUCTION.md"
    (out / "e2" / "runs").mkdir(parents=True)
    (out / "e2" / "table.md").write_text("the paper-default table\n")
    (out / "e2" / "runs" / "SRTF-Est__seed42.json").write_text("{}")
    assert cli.main(["report", "--out", str(out), "--seeds", "1", "--set", "workload.n_jobs=8",
                     "--no-beyond", "--learned", "--calibration", "--reproduction",
                     str(target)]) == 0
    assert (out / "e2" / "table.md").read_text() == "the paper-default table\n"
    assert [p.name for p in (out / "e2" / "runs").iterdir()] == ["SRTF-Est__seed42.json"]
    assert (out / "e2__workload.n_jobs=8" / "runs.csv").exists()
    text = target.read_text()
    head = text.split("## Checks")[0]
    assert "Seeds: 1. Overrides: `workload.n_jobs=8`" in head
    assert "`evalstop-bench report --seeds 1 --set workload.n_jobs=8`" in head
    printed = capsys.readouterr().out
    assert f"wrote {target}" in printed
    for png in (tmp_path / "figures").glob("*.png"):
        assert f"wrote {png}" in printed


def test_a_user_copy_of_a_packaged_experiment_gets_its_own_folder(tmp_path):
    from evalstop_gym.benchmarks.sweep.pipeline import prepare
    from evalstop_gym.config import CONFIG_DIR

    text = (CONFIG_DIR / "e2.yaml").read_text().replace(
        "platform: defaults.yaml", f"platform: {CONFIG_DIR / 'defaults.yaml'}")
    same, changed = tmp_path / "same.yaml", tmp_path / "mine.yaml"
    same.write_text(text)
    changed.write_text(text.replace("cluster.gpus: 64", "cluster.gpus: 32"))
    assert prepare(str(same)).name == "e2"                  # identical: the same runs
    mine = prepare(str(changed)).name
    assert mine.startswith("e2__mine~") and "/" not in mine
    assert prepare(str(changed)).name == mine               # stable across loads


def test_perf_checks_its_output_paths_before_measuring(a_file, tmp_path, capsys):
    assert cli.main(["perf", "--out", str(tmp_path / "p"), "--markdown", str(tmp_path)]) == 2
    assert "--markdown" in one_line_error(capsys)
    assert cli.main(["perf", "--out", str(a_file), "--no-markdown"]) == 2
    assert "--out" in one_line_error(capsys)
    assert not (tmp_path / "p").exists()


@pytest.mark.parametrize("content,needle", [
    ("", "empty; expected a header with experiment, cell"),
    ("name,score\nx,1\n", "not a runs.csv of evalstop-bench; expected a header with"),
])
def test_a_foreign_or_empty_runs_csv_under_out_is_named_before_any_run(content, needle, tiny,
                                                                        tmp_path, capsys):
    out = tmp_path / "o"
    (out / "mine").mkdir(parents=True)
    (out / "mine" / "runs.csv").write_text(content)
    assert cli.main(["run", tiny, "--out", str(out)]) == 2
    err = one_line_error(capsys)
    assert str(out / "mine" / "runs.csv") in err and needle in err
    assert not (out / "tiny").exists()


def test_report_refuses_another_tools_learned_folder_before_any_run(tmp_path, capsys):
    foreign = tmp_path / "foreign"
    foreign.mkdir()
    (foreign / "results.csv").write_text("step,loss\n1,0.5\n")
    (foreign / "results.json").write_text('{"args": {"lr": 0.1}}')
    assert cli.main(["report", "--out", str(tmp_path / "o"), "--learned", str(foreign),
                     "--reproduction", str(tmp_path / "R.md")]) == 2
    err = one_line_error(capsys)
    assert f"--learned {foreign}: not a folder of `evalstop-bench train`" in err
    assert "lacking: policy, seed" in err and not (tmp_path / "o").exists()
    (foreign / "results.json").write_bytes(b"\xff\xfe\x00binary")
    assert cli.main(["report", "--out", str(tmp_path / "o"), "--learned", str(foreign),
                     "--reproduction", str(tmp_path / "R.md")]) == 2
    assert "UnicodeDecodeError" in one_line_error(capsys)


def test_report_refuses_a_binary_or_file_calibration_before_any_run(tmp_path, capsys):
    binary = tmp_path / "cal.bin"
    binary.write_bytes(bytes(range(256)))
    folder = tmp_path / "calibration"
    folder.mkdir()
    (folder / "calibration.md").write_bytes(bytes(range(256)))
    for given, needle in ((binary, "is a file; expected a folder"),
                          (folder, "calibration.md is not text (UTF-8)")):
        assert cli.main(["report", "--out", str(tmp_path / "o"), "--learned",
                         "--calibration", str(given), "--reproduction",
                         str(tmp_path / "R.md")]) == 2
        err = one_line_error(capsys)
        assert err.startswith("evalstop-bench report: error: --calibration") and needle in err
    assert not (tmp_path / "o").exists()


def test_report_names_a_learned_folder_without_results(tmp_path, caplog):
    from evalstop_gym.benchmarks.report.learned import learned_section

    empty = tmp_path / "ppo_stop"
    empty.mkdir()
    assert learned_section([empty]) == ""
    assert f"--learned {empty}: no results.csv and results.json" in caplog.text
