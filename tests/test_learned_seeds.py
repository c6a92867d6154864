"""Learned policies over training seeds: IQM and stratified-bootstrap CIs, and a tiny run."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest
from scipy import stats

from evalstop_gym.benchmarks import sections
from evalstop_gym.benchmarks.analysis.iqm import iqm_ci
from evalstop_gym.benchmarks.rl import learned_seeds


def test_iqm_is_the_quarter_trimmed_mean_inside_its_ci():
    rng = np.random.default_rng(0)
    matrix = rng.normal(size=(10, 5))
    iqm, low, high = iqm_ci(matrix, resamples=500)
    assert iqm == pytest.approx(stats.trim_mean(matrix.ravel(), 0.25))
    assert low < iqm < high


def test_the_bootstrap_is_stratified_by_task():
    """Runs agree within each task, tasks differ: resampling runs inside each task changes
    nothing, so the CI has no width (a pooled bootstrap would have some)."""
    matrix = np.tile([1.0, 2.0, 5.0, 9.0], (6, 1))
    assert iqm_ci(matrix, resamples=200) == (3.5, 3.5, 3.5)


def test_one_run_resamples_the_tasks_and_nans_are_left_out():
    iqm, low, high = iqm_ci(np.array([[1.0, 2.0, 3.0, 4.0, np.nan]]), resamples=300)
    assert iqm == pytest.approx(2.5) and low < iqm < high
    assert np.isnan(iqm_ci(np.full((2, 2), np.nan))[0])


def test_a_tiny_run_writes_runs_summary_and_table(tmp_path, capsys):
    pytest.importorskip("stable_baselines3")
    out = tmp_path / "seeds"
    beyond = tmp_path / "BEYOND.md"
    beyond.write_text("# Beyond\n\nkept\n")
    code = learned_seeds.main([
        "--seeds", "2", "--total-timesteps", "64", "--num-envs", "4", "--eval-seeds", "1", "2",
        "--set", "workload.n_jobs=8", "--baselines", "EvalStop-2", "--resamples", "50",
        "--out", str(out), "--no-progress", "--beyond", str(beyond)])
    assert code == 0
    runs = pd.read_csv(out / "runs.csv")
    assert sorted(runs["policy"].unique()) == ["EvalStop-2+SRTF-Est", "PPO (learned)"]
    assert runs.groupby("policy")["train_seed"].nunique().to_dict() == {
        "EvalStop-2+SRTF-Est": 1, "PPO (learned)": 2}
    summary = pd.read_csv(out / "summary.csv")
    assert set(summary["metric"]) == {"recall", "fpr", "jct", "wasted_frac"}
    finite = summary.dropna(subset=["iqm"])
    assert (finite["low"] <= finite["iqm"] + 1e-12).all()
    assert (finite["iqm"] <= finite["high"] + 1e-12).all()
    text = (out / "summary.md").read_text()
    assert "| PPO (learned) | 2 |" in text and "stratified bootstrap" in text
    assert text in capsys.readouterr().out + "\n"
    assert {p.name for p in out.glob("learned_seeds.*")} == {"learned_seeds.png",
                                                             "learned_seeds.pdf"}
    written = beyond.read_text()
    start, end = sections.markers(sections.LEARNED_SEEDS)
    assert written.startswith("# Beyond\n\nkept\n\n" + start) and written.endswith(end + "\n")
    assert "| PPO (learned) | 2 |" in written and "figures/beyond_learned.png" in written
    assert (tmp_path / "figures" / "beyond_learned.png").is_file()


@pytest.mark.parametrize(("argv", "needle"), [
    (["--seeds", "0"], "--seeds 0: expected a whole number >= 1"),
    (["--num-envs", "5000"], "--num-envs 5000: expected a whole number in [1, 4096]"),
    (["--baselines", "Bogus-1"], "Bogus-1"),
    (["--set", "workload.n_jobz=3"], "n_jobz"),
    (["--beyond", "no/such/BEYOND.md"], "--beyond no/such/BEYOND.md: no such file"),
])
def test_bad_options_are_one_line_errors_before_training(capsys, argv, needle):
    with pytest.raises(SystemExit) as exit_:
        learned_seeds.main(argv)
    assert exit_.value.code == 2
    err = capsys.readouterr().err.strip()
    assert needle in err and "\n" not in err
