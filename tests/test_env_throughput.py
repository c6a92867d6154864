"""The throughput benchmark runs end to end at tiny sizes and prints every row (nothing timed is
asserted: speed is what the benchmark shows, not what a test checks)."""

from __future__ import annotations

import pytest

from evalstop_gym.benchmarks.perf import env_throughput
from evalstop_gym.benchmarks.perf.state_bytes import array_nbytes, state_bytes
from evalstop_gym.benchmarks.perf.vector_throughput import PPOTiming, ppo_table
from evalstop_gym.env import ReferenceBatch

TINY = ["--seconds", "0.02", "--sizes", "1", "3", "--reference-size", "2",
        "--set", "workload.n_jobs=12"]


def test_the_benchmark_prints_every_row(capsys):
    pytest.importorskip("stable_baselines3")
    env_throughput.main([*TINY, "--ppo", "--ppo-steps", "64", "--ppo-envs", "4",
                         "--rollout", "32"])
    out = capsys.readouterr().out
    for row in ("CartPole-v1 (random), first", "CartPole-v1 (random), last",
                "EvalStopCluster-v0 stop", "EvalStopCluster-v0 full",
                "vector stop N=1 engine=auto", "vector stop N=3 engine=auto",
                "vector stop N=2 engine=python (ReferenceBatch)",
                "vector full N=1 engine=auto (CompiledFullBatch)",
                "vector full N=3 engine=auto (CompiledFullBatch)",
                "bytes of state per env (N=3, after reset)",
                "CompiledFullBatch control=full engine=auto",
                "ReferenceBatch control=stop engine=python",
                "CartPole-v1 SyncVectorEnv N=1", "CartPole-v1 SyncVectorEnv N=3",
                "single env (n_envs=1, n_steps=32)", "vector env (N=4, n_steps=8)",
                "collect per sample, single / vector", "samples/s end to end, vector / single"):
        assert row in out, row
    table = out.split("bytes of state per env")[0].strip().splitlines()
    # heading, single envs (CartPole twice), vector envs (stop at 2 sizes and the reference,
    # full at 2 sizes), CartPole vectors
    assert len(table) == 1 + 4 + 5 + 2
    rates = {line[:60].strip(): float(line.split()[-1]) for line in table[1:]}
    assert max(rates["CartPole-v1 (random), first"], rates["CartPole-v1 (random), last"]) == 1
    state = out.split("bytes of state per env")[1].split("PPO run")[0].strip().splitlines()
    assert len(state) == 1 + 3 and all(float(line.split()[-1]) > 0 for line in state[1:])


def test_array_bytes_count_each_array_the_core_holds_once():
    """The reference core holds its batched buffers as arrays (its single envs are objects):
    exactly their bytes; a buffer listed twice is counted once."""
    core = ReferenceBatch(3, "e2", **{"workload.n_jobs": 12})
    buffers = sum(a.nbytes for a in core.obs.values()) + core.reward.nbytes \
        + core.terminated.nbytes
    assert array_nbytes(core) == buffers
    core.alias = [core.reward, (core.reward,)]
    assert array_nbytes(core) == buffers


def test_traced_bytes_grow_with_the_workload():
    """tracemalloc sees the jobs a reset makes: a workload 4x larger keeps more per env."""
    small, large = (state_bytes(lambda k, n=n: ReferenceBatch(k, "e2", **{"workload.n_jobs": n}),
                                2) for n in (10, 40))
    assert small.core == "ReferenceBatch" and 0 < small.traced < large.traced


def test_ppo_table_reports_the_ratios():
    single, vector = PPOTiming(10.0, 8.0, 2.0, 100), PPOTiming(4.0, 0.5, 3.5, 100)
    text = ppo_table(single, vector, "single", "vector")
    assert "16.0x" in text and "2.5x" in text   # 8 / 0.5 per sample; 25 / 10 samples/s


@pytest.mark.parametrize(("argv", "needle"), [
    (["--sizes", "0"], "--sizes [0]: expected whole numbers in [1, 4096]"),
    (["--ppo-envs", "64", "--rollout", "100"], "--rollout 100: expected a multiple"),
])
def test_bad_sizes_are_one_line_errors(capsys, argv, needle):
    with pytest.raises(SystemExit):
        env_throughput.main(argv)
    assert needle in capsys.readouterr().err


def test_markdown_puts_the_tables_in_their_own_block_and_keeps_the_rest(tmp_path, capsys):
    from evalstop_gym.benchmarks.perf.engine import NOTES_MARKER

    page = tmp_path / "PERFORMANCE.md"
    page.write_text(f"# Performance\n\nfigures\n\n{NOTES_MARKER}\n\nnotes kept\n")
    for _ in range(2):   # a second run replaces the block, it does not add one
        env_throughput.main([*TINY, "--markdown", str(page)])
    text = page.read_text()
    printed = capsys.readouterr().out
    assert text.startswith("# Performance\n\nfigures\n\n" + NOTES_MARKER)
    assert text.count("<!-- env_throughput: begin -->") == 1 and "notes kept" in text
    block = text.split("<!-- env_throughput: begin -->")[1].split("<!-- env_throughput: end")[0]
    assert "--markdown" in block and "vector stop N=3 engine=auto" in block
    first = "CartPole-v1 (random), first"
    assert block.count(first) == 1 and printed.count(first) == 2
