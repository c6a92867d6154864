"""Wall time of a fully cached `evalstop-bench run e2`, alone in its --out and beside the rest of
the matrix: a run must not slow down as OUT fills up (issue 21: a collated OUT/jobs.csv that every
run rewrote took a cached run e2 from 5.5 s to 32 s after `report`).

    python -m evalstop_gym.benchmarks.sweep.cached_rerun [--out DIR] [--seeds 42 123] [--repeats 3]

Each timed run is a fresh `evalstop-bench` process (imports included, as a user sees it); the line
printed per state is the best of --repeats. Not a test: the machine's load moves the figures.
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

from ..catalog import MATRIX

OTHERS = tuple(n for n in MATRIX if n != "e2")   # the paper's experiments but E2


def bench(args: Sequence[str]) -> float:
    """Seconds of one `evalstop-bench ARGS` in a process of its own; its output is dropped."""
    start = time.perf_counter()
    subprocess.run([sys.executable, "-m", "evalstop_gym.benchmarks.cli", *args], check=True,
                   stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    return time.perf_counter() - start


def folder_mb(path: Path) -> float:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) / 1e6


def measure(out: Path, seeds: Sequence[str], repeats: int) -> list[str]:
    e2 = ["run", "e2", "--seeds", *seeds, "--out", str(out)]
    bench(e2)   # the runs themselves, once: every timed run below reuses them
    lines = []
    for label, before in (("only e2 in OUT", None), ("e1-e8 in OUT", OTHERS)):
        if before:
            bench(["run", *before, "--seeds", *seeds, "--out", str(out)])
        best = min(bench(e2) for _ in range(repeats))
        lines.append(f"cached run e2, {label} ({folder_mb(out):.0f} MB): {best:.1f} s "
                     f"(best of {repeats})")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(prog="python -m evalstop_gym.benchmarks.sweep.cached_rerun",
                                description=__doc__.splitlines()[0])
    p.add_argument("--out", type=Path, help="scratch folder (default: a temporary one)")
    p.add_argument("--seeds", nargs="+", default=["42", "123"], help="seeds of every run")
    p.add_argument("--repeats", type=int, default=3, help="timed runs per state (best kept)")
    args = p.parse_args(argv)
    if args.repeats < 1:
        p.error(f"--repeats {args.repeats}: expected a whole number >= 1")
    with tempfile.TemporaryDirectory() as tmp:
        for line in measure(args.out or Path(tmp) / "out", args.seeds, args.repeats):
            print(line)
    return 0


if __name__ == "__main__":
    sys.exit(main())
