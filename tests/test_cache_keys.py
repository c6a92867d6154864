"""A run's cache key covers everything that decides its result: edit a user's detector, replace a
model file or its normaliser, and the same --out reruns exactly the cells they feed, on every
backend; what cannot change a simulation (the env's reward weights) leaves the key alone."""

from __future__ import annotations

import dataclasses
import re
import textwrap
from pathlib import Path

import pandas as pd
import pytest

import evalstop_gym
from evalstop_gym.benchmarks.cli import main
from evalstop_gym.benchmarks.sweep import runner
from evalstop_gym.benchmarks.sweep.pipeline import prepare
from evalstop_gym.experiment import Cell
from evalstop_gym.policies.learned import normaliser_path

SMALL = ["--seeds", "0", "1", "--set", "workload.n_jobs=30"]
FOLDER = "e2__workload.n_jobs=30"

USER = '''
from evalstop_gym.policies.detector import DetectorBase, stop
from evalstop_gym.policies.registry import register_detector
from evalstop_gym.sim.protocols import CONTINUE


class DropStop(DetectorBase):
    """Stops once the latest eval is `drop` below the best so far."""

    def __init__(self, drop=0.05):
        self.drop = float(drop)
        self.name = f"DropStop-{self.drop:g}"

    def _decide(self, job, cluster):
        s = job.eval_scores
        if s and max(s) - s[-1] > THRESHOLD * self.drop:
            return stop("dropped")
        return CONTINUE


THRESHOLD = 1.0
register_detector("DropStop", lambda args: DropStop(*map(float, args)))
'''


def sweep(capsys, out: Path, *args: str) -> tuple[int, pd.DataFrame]:
    """Runs e2 (small) into `out`: (how many runs were new, the runs table)."""
    assert main(["run", "e2", *SMALL, "--out", str(out), *args]) == 0
    printed = capsys.readouterr().out
    new = int(re.search(r"\((\d+) new\)", printed)[1])
    return new, pd.read_csv(out / FOLDER / "runs.csv")


def cell_rows(runs: pd.DataFrame, needle: str) -> pd.DataFrame:
    return runs[runs["policy"].str.contains(needle, regex=False)].reset_index(drop=True)


@pytest.mark.parametrize("backend", ["loky", "dask"])
def test_an_edited_user_detector_reruns_its_cells_and_only_those(tmp_path, capsys, backend):
    mine = tmp_path / "mine.py"
    mine.write_text(textwrap.dedent(USER))
    out = tmp_path / "out"
    options = ["--workers", "2", "--backend", backend, "--import", str(mine),
               "--policy", "DropStop-0.05+SRTF-Est", "--policy", f"{mine}:DropStop-0.05+FIFO"]
    new, before = sweep(capsys, out, *options)
    assert new == len(before) == 24   # 10 packaged cells and 2 of the user's, 2 seeds
    assert sweep(capsys, out, *options)[0] == 0   # unchanged: all reused

    mine.write_text(mine.read_text().replace("THRESHOLD = 1.0", "THRESHOLD = 0.2"))
    new, after = sweep(capsys, out, *options)
    assert new == 4   # the two user cells (by registered name and by path), 2 seeds each
    for needle in ("DropStop-0.05+SRTF-Est", "mine.py:DropStop-0.05+FIFO"):
        old, edited = cell_rows(before, needle), cell_rows(after, needle)
        assert len(old) == len(edited) == 2
        assert (edited["n_stopped"] > old["n_stopped"]).all()   # the edit stops more jobs
    packaged = ~before["policy"].str.contains("DropStop")
    pd.testing.assert_frame_equal(before[packaged], after[packaged])


def _stop_model(path: Path, stops: bool, seed: int = 0) -> None:
    """An untrained PPO stop-mode model whose deterministic action is always stop (or never)."""
    import gymnasium as gym
    import torch
    from stable_baselines3 import PPO

    env = gym.make("EvalStopCluster-v0", config="e2", **{"workload.n_jobs": 30})
    model = PPO("MultiInputPolicy", env, n_steps=64, seed=seed, device="cpu")
    with torch.no_grad():
        model.policy.action_net.weight.zero_()
        model.policy.action_net.bias.copy_(torch.tensor([-5.0, 5.0] if stops else [5.0, -5.0]))
    model.save(path)


def test_a_model_replaced_at_the_same_path_reruns_its_cell(tmp_path, capsys):
    model = tmp_path / "m.zip"
    _stop_model(model, stops=False)
    out = tmp_path / "out"
    policy = ["--policy", f"model:{model}+SRTF-Est"]
    new, before = sweep(capsys, out, *policy)
    assert new == 22 and (cell_rows(before, "model:")["n_stopped"] == 0).all()

    _stop_model(model, stops=True)   # retrained to the same path
    new, after = sweep(capsys, out, *policy)
    assert new == 2
    assert (cell_rows(after, "model:")["n_stopped"] > 0).all()


def _exp():
    return prepare("e2", {"workload.n_jobs": 30})


def test_the_key_covers_the_version_and_not_the_env_reward(monkeypatch):
    exp = _exp()
    spec = runner.specs(exp, [0])[1]
    assert spec.inputs == ""   # a packaged policy depends on nothing outside the package
    reward = dataclasses.replace(spec.config.reward, **{
        f.name: getattr(spec.config.reward, f.name) * 2 + 1
        for f in dataclasses.fields(spec.config.reward)
        if isinstance(getattr(spec.config.reward, f.name), float)})
    assert reward != spec.config.reward
    assert spec._replace(config=dataclasses.replace(spec.config, reward=reward)).digest \
        == spec.digest
    before = spec.digest
    monkeypatch.setattr(evalstop_gym, "__version__", "999.0")   # a release: every run again
    assert spec.digest != before


def test_simulate_never_reads_the_reward_section():
    """Why the key may leave `reward` out: the simulator's code never names it."""
    package = Path(evalstop_gym.__file__).parent
    for path in [package / "simulate.py", *sorted((package / "sim").rglob("*.py"))]:
        assert not re.search(r"\.reward\b", path.read_text()), path


def test_the_key_covers_a_helper_the_user_file_imports_and_a_normaliser(tmp_path):
    (tmp_path / "helper_thresholds.py").write_text("DROP = 0.05\n")
    mine = tmp_path / "mine_with_helper.py"
    mine.write_text(textwrap.dedent(USER).replace(
        "THRESHOLD = 1.0", "from helper_thresholds import DROP\nTHRESHOLD = DROP * 20"))
    cell = Cell("SRTF-Est", f"{mine}:DropStop-0.05")
    first = runner.input_digest(cell)
    assert first and runner.input_digest(cell) == first
    (tmp_path / "helper_thresholds.py").write_text("DROP = 0.01\n")
    assert runner.input_digest(cell) != first

    model = tmp_path / "m.zip"
    _stop_model(model, stops=False)
    cell = Cell("SRTF-Est", f"model:{model}")
    alone = runner.input_digest(cell)
    normaliser_path(model).parent.mkdir()
    normaliser_path(model).write_bytes(b"stats v1")
    with_stats = runner.input_digest(cell)
    normaliser_path(model).write_bytes(b"stats v2")
    assert len({alone, with_stats, runner.input_digest(cell)}) == 3
