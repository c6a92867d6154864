"""`evalstop-bench train`: a very short training through the CLI writes the model and the
evaluation table; every option has help; options that cannot work are one-line errors."""

from __future__ import annotations

import json
import subprocess
import sys

import pandas as pd
import pytest

from evalstop_gym.benchmarks import cli
from evalstop_gym.benchmarks.rl import train as train_cmd

TINY = ["--total-timesteps", "128", "--n-envs", "1", "--eval-seeds", "1", "2",
        "--set", "workload.n_jobs=8", "--no-progress"]


def test_every_train_option_has_a_help_line():
    train = cli.build_parser()._subparsers._group_actions[0].choices["train"]
    options = [a for a in train._actions if a.option_strings and a.dest != "help"]
    assert len(options) >= 12
    assert all(a.help and len(a.help) > 10 for a in options), [a.dest for a in options]


@pytest.mark.parametrize(("algo", "control"), [("ppo", "stop"), ("maskable_ppo", "full")])
def test_a_short_training_writes_the_model_and_the_evaluation_table(tmp_path, capsys, algo,
                                                                    control):
    out = tmp_path / "run"
    code = cli.main(["train", "--algo", algo, "--control", control, "--max-jobs", "8",
                     "--out", str(out), *TINY])
    assert code == 0
    printed = capsys.readouterr().out
    assert (out / f"{algo}_{control}.zip").exists()
    rows = pd.read_csv(out / "results.csv")
    learned = f"{algo.upper()} (learned)"
    baselines = train_cmd.STOP_BASELINES if control == "stop" else train_cmd.FULL_BASELINES
    assert list(dict.fromkeys(rows["policy"])) == [learned, *(f"{b}+SRTF-Est"
                                                              for b in baselines)]
    assert (rows.groupby("policy")["seed"].apply(sorted).map(tuple) == (1, 2)).all()
    assert (rows["jct"] > 0).all()
    meta = json.loads((out / "results.json").read_text())
    assert meta["args"]["algo"] == algo and meta["args"]["total_timesteps"] == 128
    table = printed.split("model:")[0].rstrip().splitlines()
    assert learned in printed and "JCT" in table[0] and "wasted%" in table[0]
    assert max(len(line) for line in table) <= 100


@pytest.mark.parametrize(("extra", "needle"), [
    (["--algo", "dqn", "--control", "full"], "--algo dqn needs --control stop"),
    (["--n-envs", "0"], "--n-envs 0: expected a whole number >= 1"),
    (["--baselines", "Bogus-1"], "detector 'Bogus-1' is unknown"),
    (["--set", "workload.n_jobz=3"], "n_jobz"),
    (["--num-envs", "4"], "--num-envs and --n-envs: give one"),
])
def test_options_that_cannot_work_are_one_line_errors_before_training(capsys, extra, needle):
    assert cli.main(["train", *TINY, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_the_module_form_runs_the_subcommand():
    out = subprocess.run([sys.executable, "-m", "evalstop_gym.benchmarks.cli", "train",
                          "--help"], capture_output=True, text=True, check=True).stdout
    assert "--total-timesteps" in out and "--algo {ppo,dqn,maskable_ppo}" in out


def test_baselines_are_reset_at_every_episode(monkeypatch):
    """HeuristicAgent.reset is per episode: a detector that learns from ended jobs must not
    carry what it learnt on one held-out seed into the next."""
    import argparse

    from evalstop_gym.benchmarks.rl import train
    from evalstop_gym.env import HeuristicAgent

    calls = []
    monkeypatch.setattr(HeuristicAgent, "reset", lambda self: calls.append("reset"))

    def fake_episode(env, seed, act, start=None):
        if start is not None:
            start()
        calls.append(seed)
        return {"seed": seed}

    monkeypatch.setattr(train, "episode", fake_episode)
    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    args = parser.parse_args(["--eval-seeds", "1", "2", "3", "--baselines", "EvalStop-2"])
    train.evaluate(args, model=None)
    assert calls[-6:] == ["reset", 1, "reset", 2, "reset", 3]


def test_episode_resets_the_agent_after_the_env():
    from evalstop_gym.benchmarks.rl import train

    calls = []

    class Env:
        def reset(self, seed):
            calls.append(("env", seed))
            return {}, {}

        def step(self, action):
            return {}, 1.0, True, False, {"metrics": {"jct": 1.0}}

    for seed in (5, 6):
        train.episode(Env(), seed, lambda o, i: 0, start=lambda: calls.append("agent"))
    assert calls == [("env", 5), "agent", ("env", 6), "agent"]


def test_dqn_without_out_writes_its_own_folder_and_a_table_with_cis(tmp_path, monkeypatch,
                                                                     capsys):
    """Each algorithm has a default folder of its own: a DQN run leaves PPO's results alone.
    The table is mean ± 95% CI over the held-out seeds, '–' where a metric is undefined."""
    monkeypatch.chdir(tmp_path)
    ppo = tmp_path / "runs" / "ppo_stop"
    ppo.mkdir(parents=True)
    (ppo / "results.csv").write_text("PPO's\n")
    assert cli.main(["train", "--algo", "dqn", *TINY]) == 0
    assert (tmp_path / "runs" / "dqn_stop" / "dqn_stop.zip").is_file()
    assert (tmp_path / "runs" / "dqn_stop" / "results.csv").is_file()
    assert (ppo / "results.csv").read_text() == "PPO's\n"
    printed = capsys.readouterr().out
    table = printed.split("model:")[0]
    assert "NaN" not in table and "nan" not in table
    no_stop = next(line for line in table.splitlines() if line.startswith("NoStop"))
    assert "–" in no_stop   # precision of a policy that never stops
    assert "±" in table and "95% CI" in table and "2 held-out seed(s)" in table
    assert "model: runs/dqn_stop/dqn_stop.zip" in printed


def test_help_shows_the_defaults(capsys):
    with pytest.raises(SystemExit):
        cli.main(["train", "--help"])
    text = " ".join(capsys.readouterr().out.split())
    assert "(default: 120000)" in text and "(default: ppo)" in text
    assert "(default: runs/ALGO_CONTROL" in text and "(default: None)" not in text


class Recording:
    """The progress bar's last position and total, kept when training ends."""

    seen: list = []

    @classmethod
    def wrap(cls, base):
        class Bar(base):
            def _on_training_end(self):
                cls.seen.append((self.bar.n, self.bar.total, self.model.num_timesteps))
                super()._on_training_end()
        return Bar


def test_the_progress_bar_ends_at_its_total(monkeypatch, tmp_path):
    """SB3 stops only between rollouts (DQN: 4 steps per env), so 101 steps on 2 envs run 104:
    the bar's total is what runs, never overshot."""
    from evalstop_gym.env import sb3

    monkeypatch.setattr(sb3, "ProgressBarCallback", Recording.wrap(sb3.ProgressBarCallback))
    Recording.seen.clear()
    argv = ["train", "--algo", "dqn", "--total-timesteps", "101", "--n-envs", "2",
            "--eval-seeds", "1", "--set", "workload.n_jobs=8", "--out", str(tmp_path)]
    assert cli.main(argv) == 0
    assert Recording.seen == [(104, 104, 104)]


def test_planned_steps_round_up_to_whole_rollouts():
    import gymnasium as gym
    from stable_baselines3 import PPO
    from stable_baselines3.common.vec_env import DummyVecEnv

    from evalstop_gym.benchmarks.rl import train

    venv = DummyVecEnv([lambda: gym.make(train.ENV_ID, overrides={"workload.n_jobs": 8})] * 2)
    model = PPO("MultiInputPolicy", venv, n_steps=1024, batch_size=64, device="cpu")
    assert train.planned_timesteps(model, 3000) == 4096
    assert train.planned_timesteps(model, 2048) == 2048


def test_the_rl_extra_brings_tensorboard_for_sb3s_log(tmp_path):
    """README's SB3 snippet with `tensorboard_log=`: the `rl` extra installs what it needs."""
    from pathlib import Path

    import gymnasium as gym
    from stable_baselines3 import PPO

    tomllib = pytest.importorskip("tomllib")   # Python >= 3.11
    project = tomllib.loads((Path(__file__).parents[1] / "pyproject.toml").read_text())
    rl = project["project"]["optional-dependencies"]["rl"]
    assert any(req.startswith("tensorboard") for req in rl), rl
    env = gym.make("EvalStopCluster-v0", overrides={"workload.n_jobs": 8})
    model = PPO("MultiInputPolicy", env, n_steps=16, batch_size=16, n_epochs=1, device="cpu",
                tensorboard_log=str(tmp_path))
    model.learn(16)
    assert list(tmp_path.rglob("events.out.tfevents.*"))


@pytest.mark.parametrize(("extra", "needle"), [
    (["--num-envs", "0"], "--num-envs 0: expected a whole number in [1, 4096]"),
    (["--num-envs", "4097"], "--num-envs 4097: expected a whole number in [1, 4096]"),
])
def test_num_envs_out_of_range_is_a_one_line_error(capsys, extra, needle):
    tiny = [a for a in TINY if a not in ("--n-envs", "1")]
    assert cli.main(["train", *tiny, *extra]) == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err


def test_num_envs_trains_on_the_vector_env(tmp_path, capsys, monkeypatch):
    from evalstop_gym.benchmarks.rl import train
    from evalstop_gym.env.sb3 import VectorEnvAdapter

    built = []
    original = train.training_env
    monkeypatch.setattr(train, "training_env", lambda args: built.append(original(args))
                        or built[-1])
    tiny = [a for a in TINY if a not in ("--n-envs", "1")]
    out = tmp_path / "vec"
    assert cli.main(["train", *tiny, "--num-envs", "4", "--out", str(out)]) == 0
    assert isinstance(built[0].unwrapped, VectorEnvAdapter) and built[0].num_envs == 4
    assert (out / "ppo_stop.zip").exists()
    meta = json.loads((out / "results.json").read_text())
    assert meta["args"]["num_envs"] == 4
    assert "PPO (learned)" in capsys.readouterr().out
    full = tmp_path / "vec_full"
    assert cli.main(["train", *tiny, "--num-envs", "2", "--control", "full", "--algo",
                     "maskable_ppo", "--max-jobs", "8", "--out", str(full)]) == 0
    adapter = built[1].unwrapped
    assert isinstance(adapter, VectorEnvAdapter) and adapter.venv.control == "full"
    assert adapter.action_masks().shape == (2, 3 * 8 + 1)
    assert (full / "maskable_ppo_full.zip").exists()


@pytest.mark.parametrize(("flag", "envs"), [("--n-envs", 1), ("--n-envs", 2), ("--num-envs", 64)])
def test_ppo_takes_the_same_samples_per_update_whatever_the_envs(flag, envs):
    """A vector env of 64 clusters rolls out 32 steps each: 2048 samples per update, as two
    single envs of 1024 steps do, so its runs compare with the single env's per sample."""
    from evalstop_gym.benchmarks.rl import train

    parser = cli.build_parser(["train"])
    args = parser.parse_args(["train", "--total-timesteps", "120000", flag, str(envs)])
    model = train.make_model(args, train.training_env(args))
    assert model.n_steps * model.n_envs == train.ROLLOUT_SAMPLES
