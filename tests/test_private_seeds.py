"""Private seeds: an isolated policy that knows the simulator cannot recompute the workload, read
past runs, or find the secret."""

from __future__ import annotations

import json
import os
import pickle
import shutil
import tempfile
from pathlib import Path

import pytest
from sandboxed_policies import EnvironmentReader, SeedGuesser, Snooper, WhereAmI

from evalstop_gym import isolation, private_seeds
from evalstop_gym.config import ConfigError
from evalstop_gym.isolation import IsolatedPolicy
from evalstop_gym.private_seeds import SECRET_ENV, SECRET_FILE_ENV, SeedSecret
from evalstop_gym.sim.workload import generate_workload
from evalstop_gym.simulate import run_policy, simulate

CAN_DROP = os.name == "posix" and hasattr(os, "geteuid") and os.geteuid() == 0
NEEDS_ROOT = pytest.mark.skipif(not CAN_DROP, reason="only root on POSIX can run the policy as "
                                "another user; otherwise it reads what this user can (README)")


def test_regenerating_the_workload_wins_unless_the_seed_is_private(small_config):
    guesser = SeedGuesser(small_config, range(12))
    plain = simulate(small_config, guesser, 7, isolated=True)
    assert plain.metrics["precision"] == plain.metrics["recall"] == 1.0
    private = simulate(small_config, guesser, 7, isolated=True, private_seeds=SeedSecret("k"))
    assert private.metrics["n_stopped"] == 0 and private.metrics["recall"] == 0.0
    assert sum(r["is_hacking"] for r in private.records) > 0


def test_a_private_run_is_reproducible_with_its_secret(small_config):
    """Same secret, same run (the workload of the salted seed); another secret, another one."""
    secret = SeedSecret("a fixed secret")
    first = simulate(small_config, "EvalStop-2+SRTF-Est", 3, isolated=True, private_seeds=secret)
    again = simulate(small_config, "EvalStop-2+SRTF-Est", 3, isolated=True,
                     private_seeds=SeedSecret("a fixed secret"))
    assert repr(first.records) == repr(again.records)
    assert first.seed == 3 and first.private_seed == secret.fingerprint
    here = run_policy(small_config, "EvalStop-2+SRTF-Est", 3, "python", secret.workload_seed(3))
    assert repr(here.records) == repr(first.records)
    arrivals = [j.arrival for j in generate_workload(small_config, 3)]
    other = [j.arrival for j in generate_workload(small_config,
                                                  SeedSecret("another").workload_seed(3))]
    assert [r["arrival"] for r in first.records] not in (arrivals, other)


def test_private_seeds_refuse_the_corpus_with_its_recorded_evals(small_config):
    corpus = small_config.with_overrides({"curves.source": "corpus"})
    with pytest.raises(ConfigError, match=r"^curves.corpus_noise='recorded' with private seeds"):
        simulate(corpus, "SRTF-Est", 1, isolated=True, private_seeds=True)


def test_the_secret_comes_from_the_environment_or_a_key_file(tmp_path, monkeypatch):
    monkeypatch.delenv(SECRET_FILE_ENV, raising=False)
    monkeypatch.setenv(SECRET_ENV, "from the environment")
    assert SeedSecret.load().fingerprint == SeedSecret("from the environment").fingerprint
    monkeypatch.delenv(SECRET_ENV)
    key = tmp_path / "key"
    key.write_text("from a file\n")
    monkeypatch.setenv(SECRET_FILE_ENV, str(key))
    assert SeedSecret.load().fingerprint == SeedSecret("from a file").fingerprint
    monkeypatch.setenv(SECRET_FILE_ENV, str(tmp_path / "absent"))
    with pytest.raises(ValueError, match=rf"^{SECRET_FILE_ENV}=.*cannot read the seed secret"):
        SeedSecret.load()
    assert "from a file" not in repr(SeedSecret("from a file"))


def test_two_secret_sources_are_refused_and_a_shared_key_file_is_warned_about(
        tmp_path, monkeypatch, caplog):
    key = tmp_path / "key"
    key.write_text("from a file\n")
    key.chmod(0o600)
    monkeypatch.setenv(SECRET_FILE_ENV, str(key))
    monkeypatch.setenv(SECRET_ENV, "from the environment")
    with pytest.raises(ValueError, match=rf"^both {SECRET_ENV} and {SECRET_FILE_ENV} are set; "
                                         r"unset one"):
        SeedSecret.load()
    monkeypatch.delenv(SECRET_ENV)
    SeedSecret.load()
    assert "readable by other users" not in caplog.text   # 600: nothing to say
    key.chmod(0o644)
    assert SeedSecret.load().fingerprint == SeedSecret("from a file").fingerprint
    assert f"the key file {key} is readable by other users" in caplog.text
    assert "chmod 600" in caplog.text


class Recording(IsolatedPolicy):
    """IsolatedPolicy that keeps a pickled copy of everything it sends its child."""

    sent: list[bytes] = []

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        Recording.sent.append(pickle.dumps(self._sandbox))   # the child's other argument

    def _pickled(self, policy):
        Recording.sent.append(super()._pickled(policy))      # the policy, as the child gets it
        return Recording.sent[-1]

    def _call(self, method, *args, **kwargs):
        Recording.sent.append(pickle.dumps((method, args)))
        return super()._call(method, *args, **kwargs)


def test_the_child_never_receives_the_secret(small_config, monkeypatch):
    secret = "a secret the policy must not see"
    monkeypatch.setenv(SECRET_ENV, secret)           # inherited by children unless removed
    monkeypatch.setattr(isolation, "IsolatedPolicy", Recording)
    Recording.sent = []
    result = simulate(small_config, EnvironmentReader(), 2, isolated=True, private_seeds=True)
    assert {r["stop_reason"] for r in result.records if r["stop_reason"]} == {"found []"}
    assert os.environ[SECRET_ENV] == secret          # the parent's environment is restored
    workload_seed = SeedSecret(secret).workload_seed(2)
    assert len(Recording.sent) > 10
    for blob in Recording.sent:
        assert secret.encode() not in blob and str(workload_seed).encode() not in blob
        assert pickle.dumps(workload_seed)[2:-1] not in blob


def tiny_experiment(folder: Path) -> str:
    from evalstop_gym.config import CONFIG_DIR

    exp = folder / "snoop.yaml"
    exp.write_text(f"name: snoop\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                   "overrides: {workload.n_jobs: 15, cluster.gpus: 16}\nseeds: [4]\n"
                   "cells:\n  - {base: SRTF-Est, detector: EvalStop-2}\n")
    return str(exp)


def test_a_private_sweep_records_the_secrets_fingerprint_and_draws_other_jobs(tmp_path,
                                                                            monkeypatch):
    from evalstop_gym.benchmarks import cli

    monkeypatch.setenv(SECRET_ENV, "sweep secret")
    exp = tiny_experiment(tmp_path)
    assert cli.main(["run", exp, "--out", str(tmp_path / "plain")]) == 0
    assert cli.main(["run", exp, "--out", str(tmp_path / "private"), "--isolate",
                     "--private-seeds", "--policy-timeout", "60"]) == 0
    run_file = next((tmp_path / "private" / "snoop" / "runs").glob("*.json"))
    text = run_file.read_text()
    assert json.loads(text)["private_seed"] == SeedSecret("sweep secret").fingerprint
    assert "sweep secret" not in text
    plain, private = ((tmp_path / d / "snoop" / "jobs.csv").read_text()
                      for d in ("plain", "private"))
    assert plain != private


def test_private_and_plain_runs_never_share_an_out(tmp_path, monkeypatch, capsys):
    """Private then plain into one --out (or plain then private, or another secret) is refused in
    one line, before any run: the private runs' files, which a random secret cannot make again,
    stay as they were."""
    from evalstop_gym.benchmarks import cli

    exp, out = tiny_experiment(tmp_path), tmp_path / "out"
    private = ["--isolate", "--private-seeds", "--policy-timeout", "60"]
    monkeypatch.delenv(SECRET_ENV, raising=False)   # a random secret: its runs are unrepeatable
    monkeypatch.delenv(SECRET_FILE_ENV, raising=False)
    assert cli.main(["run", exp, "--out", str(out), *private]) == 0
    made = {f: f.read_bytes() for f in (out / "snoop" / "runs").glob("*.json")}
    capsys.readouterr()
    for extra in ([], private):   # plain; private with another secret
        if extra:
            monkeypatch.setenv(SECRET_ENV, "another secret")
        assert cli.main(["run", exp, "--out", str(out), *extra]) == 2
        err = capsys.readouterr().err.strip()
        assert "\n" not in err and f"--out {out}: holds private-seed runs" in err
        assert "choose another --out" in err
    assert {f: f.read_bytes() for f in (out / "snoop" / "runs").glob("*.json")} == made
    plain = tmp_path / "plain"
    assert cli.main(["run", exp, "--out", str(plain)]) == 0
    assert cli.main(["run", exp, "--out", str(plain), *private]) == 2
    assert f"--out {plain}: holds plain runs" in capsys.readouterr().err


def snooped(result) -> set[str]:
    return {r["stop_reason"] for r in result.records if r["stop_reason"]}


@pytest.fixture
def shared_dir():
    """A folder under the system temp dir that everyone may read, as results folders are."""
    folder = Path(tempfile.mkdtemp(prefix="evalstop-out-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder)


@NEEDS_ROOT
def test_a_private_policy_cannot_read_the_sweeps_run_files(shared_dir, small_config,
                                                           monkeypatch):
    from evalstop_gym.benchmarks import cli

    monkeypatch.setenv(SECRET_ENV, "sweep secret")
    exp = tiny_experiment(shared_dir)
    out = shared_dir / "out"   # (a plain sweep's OUT is refused: its runs would be replaced)
    assert cli.main(["run", str(exp), "--out", str(out), "--isolate", "--private-seeds"]) == 0
    assert out.stat().st_mode & 0o777 == 0o700
    run_file = next((out / "snoop" / "runs").glob("*.json"))
    fingerprint = SeedSecret("sweep secret").fingerprint
    assert json.loads(run_file.read_text())["private_seed"] == fingerprint
    snooper = Snooper(str(run_file))
    assert snooped(simulate(small_config, snooper, 1, isolated=True)) == {"read"}   # as root
    private = simulate(small_config, snooper, 1, isolated=True, private_seeds=True)
    assert snooped(private) == {"denied: PermissionError"}


@NEEDS_ROOT
def test_a_private_policy_runs_as_nobody_in_an_empty_folder(small_config):
    import pwd

    result = simulate(small_config, WhereAmI(), 1, isolated=True, private_seeds=SeedSecret("k"))
    assert snooped(result) == {f"{pwd.getpwnam('nobody').pw_uid} []"}


def test_a_corpus_the_policy_can_read_is_named_in_a_warning(small_config, caplog,
                                                            monkeypatch):
    """Added noise hides a corpus run's values, not the run: matching stays possible."""
    from evalstop_gym.traces.corpus import corpus_file

    corpus = small_config.with_overrides({"curves.source": "corpus",
                                          "curves.corpus_noise": "added"})
    if not private_seeds.readable_by_others(corpus_file(corpus.curves.corpus_rlhf)):
        pytest.skip("the corpus is installed readable by its owner alone")
    monkeypatch.setattr(private_seeds, "_WARNED", set())   # once per process: this one's
    private_seeds.check_private_config(corpus)
    assert "the corpus" in caplog.text and "readable by every user" in caplog.text
