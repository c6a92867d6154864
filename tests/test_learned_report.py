"""The learned-policy section is built from training results files, not typed in."""

from __future__ import annotations

import json

import pandas as pd

from evalstop_gym.benchmarks.report.learned import learned_section

COLUMNS = ("reward", "jct", "wasted_frac", "precision", "recall", "fpr", "n_stopped")


def write_results(folder, algo, seed, model_jct):
    folder.mkdir()
    rows = []
    for policy, jct in ((f"{algo.upper()} (learned)", model_jct), ("EvalStop-2+SRTF-Est", 100.0)):
        for held_out in (1, 2):
            rows.append({"policy": policy, "seed": held_out, **dict.fromkeys(COLUMNS, 0.5),
                         "jct": jct + held_out})
    pd.DataFrame(rows).to_csv(folder / "results.csv", index=False)
    args = {"algo": algo, "seed": seed, "total_timesteps": 1000, "config": "e2",
            "out": str(folder)}
    (folder / "results.json").write_text(json.dumps({"args": args}))


def test_one_row_per_trained_model_and_the_baselines_once(tmp_path):
    write_results(tmp_path / "a", "ppo", 7, 50.0)
    write_results(tmp_path / "b", "dqn", 8, 70.0)
    text = learned_section([tmp_path / "a", tmp_path / "missing", tmp_path / "b"])
    assert "| PPO, training seed 7 | 0.5 ± 0.0 | 52 ± 6 |" in text
    assert "| DQN, training seed 8 |" in text
    assert text.count("| EvalStop-2+SRTF-Est |") == 1
    assert "--algo dqn --total-timesteps 1000 --seed 8" in text
    assert learned_section([tmp_path / "missing"]) == ""


def test_the_training_command_carries_every_option_that_changes_the_results():
    """A control=full run on another platform is reproduced by its command, not by PPO's."""
    from evalstop_gym.benchmarks.report.learned import training_command

    args = {"algo": "maskable_ppo", "total_timesteps": 500, "seed": 3, "out": "runs/my run",
            "control": "full", "config": "e1", "base_scheduler": "SRTF-Est", "n_envs": 2,
            "eval_seeds": [1, 2], "overrides": ["workload.n_jobs=8"], "no_progress": True}
    assert training_command(args) == (
        "evalstop-bench train --algo maskable_ppo --total-timesteps 500 --seed 3 "
        "--out 'runs/my run' --control full --config e1 --eval-seeds 1 2 "
        "--set workload.n_jobs=8")
