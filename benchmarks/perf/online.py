"""`python -m evalstop_gym.benchmarks.perf.online`: what a live monitor and replay cost per eval.

RunMonitor: n updates of one run (a rising metric and a falling loss, so no detector stops and
every update is judged), timed without tracing; peak memory is a second pass under tracemalloc
(everything Python and numpy allocate for the monitor, its detector and, for MedianPruner, five
finished peers of up to 10k evals). Replay: a CSV log of n evals is written to a temp file, then
read and replayed with EvalStop-2 end to end (`read_logs` + `replay`), timed and traced alike.
"x10" is the growth of time (or memory) per tenfold more evals: 10 means linear.

DeclineTest re-estimates its statistic from the whole series at every eval, O(history) per update
by design; it is measured at small sizes only, where "x10" shows its growth. CUSUM and BOCPD keep
their state along a run (BOCPD's run-length posterior truncated at 256), so they are O(1).
The table is printed and written to PERFORMANCE.md between this benchmark's own markers, after
the notes marker (text there is kept when `evalstop-bench perf` regenerates the file).
"""

from __future__ import annotations

import argparse
import csv
import math
import sys
import tempfile
import time
import tracemalloc
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

from evalstop_gym.online import MonitorGroup, RunMonitor
from evalstop_gym.policies.detector import learns_from_runs

from ..analysis.tables import to_markdown
from ..detectors.replay import replay
from .notes_block import marked, write_block

BLOCK = "online_perf"   # this benchmark's block of PERFORMANCE.md
SIZES = (1_000, 100_000, 1_000_000)
CONSTANT = ("EvalStop-2", "Patience-3", "LossPlateau-0-3", "CUSUM-0-3-0.05", "CUSUM-0-3",
            "BOCPD-0.5", "MedianPruner")
HISTORY = {"DeclineTest-0.05": (1_000, 4_000)}
PEERS, PEER_EVALS = 5, 10_000
WARM_UP = 20


def _monitor(name: str, n: int) -> RunMonitor:
    """A monitor for a run of n evals; a cross-run detector's group first learns from five
    finished peers (of up to PEER_EVALS evals: a MedianPruner lookup is a binary search)."""
    group = MonitorGroup(name)
    if learns_from_runs(group.detector):
        m = min(n, PEER_EVALS)
        for _ in range(PEERS):
            peer = group.monitor(max_steps=m)
            for i in range(1, m + 1):
                peer.record(i, 0.5 * i / m)
            group.end_run(peer)
    return group.monitor(max_steps=n)


def _feed(monitor: RunMonitor, n: int) -> None:
    for i in range(1, n + 1):
        monitor.update(i, 0.5 + 0.5 * i / n, 1.0 / i)
    assert not monitor.stopped, f"{monitor.detector.name} stopped; the benchmark needs no stop"


def traced(work: Callable[[], object]) -> float:
    """Peak MB traced while `work` runs."""
    tracemalloc.start()
    try:
        work()
        return tracemalloc.get_traced_memory()[1] / 1e6
    finally:
        tracemalloc.stop()


def monitor_cost(name: str, n: int) -> tuple[float, float]:
    """(updates per second, peak MB) of one run of n evals, after a short warm-up run (a
    detector's first call may load or compile code once per process)."""
    _feed(_monitor(name, WARM_UP), WARM_UP)
    monitor = _monitor(name, n)
    start = time.perf_counter()
    _feed(monitor, n)
    rate = n / (time.perf_counter() - start)
    return rate, traced(lambda: _feed(_monitor(name, n), n))


def write_log(path: Path, n: int) -> None:
    with path.open("w", newline="") as fh:
        out = csv.writer(fh)
        out.writerow(["job_id", "step", "eval_score", "loss"])
        out.writerows(("run", i, 0.5 + 0.5 * i / n, 1.0 / i) for i in range(1, n + 1))


def replay_cost(n: int) -> tuple[float, float]:
    """(evals per second, peak MB) of reading and replaying a CSV log of n evals."""
    from evalstop_gym.traces.log_formats import read_logs

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "log.csv"
        write_log(path, n)
        replay(read_logs([path]), ["EvalStop-2"])           # warm-up: imports, caches
        start = time.perf_counter()
        replay(read_logs([path]), ["EvalStop-2"])
        rate = n / (time.perf_counter() - start)
        return rate, traced(lambda: replay(read_logs([path]), ["EvalStop-2"]))


def growth(rows: list[dict], key: str, inverse: bool) -> None:
    """Fill 'x10 <key>': the change per tenfold evals since the previous size of that row."""
    for prev, row in zip(rows, rows[1:], strict=False):
        if prev["what"] != row["what"]:
            continue
        ratio = prev[key] / row[key] * row["evals"] / prev["evals"] if inverse \
            else row[key] / prev[key]
        row[f"x10 {key}"] = ratio ** (1.0 / math.log10(row["evals"] / prev["evals"]))


def measure(sizes: Sequence[int], history: Mapping[str, Sequence[int]]) -> list[dict]:
    rows = []
    plan = [("replay", n) for n in sizes] + [(d, n) for d in CONSTANT for n in sizes]
    plan += [(d, n) for d, ns in history.items() for n in ns]
    for what, n in plan:
        rate, mb = replay_cost(n) if what == "replay" else monitor_cost(what, n)
        rows.append({"what": what, "evals": n, "per s": rate, "peak MB": mb})
        print(f"{what} at {n:,}: {rate:,.0f}/s, {mb:,.1f} MB", file=sys.stderr)
    growth(rows, "per s", inverse=True)
    growth(rows, "peak MB", inverse=False)
    return rows


def table(rows: list[dict]) -> str:
    import pandas as pd

    frame = pd.DataFrame(rows).rename(columns={"per s": "evals/s", "x10 per s": "x10 time",
                                               "x10 peak MB": "x10 memory"})
    for col in ("x10 time", "x10 memory"):
        if col not in frame:
            frame[col] = math.nan
    frame["evals"] = frame["evals"].map("{:,}".format)
    frame["evals/s"] = frame["evals/s"].map("{:,.0f}".format)
    frame["peak MB"] = frame["peak MB"].map("{:,.1f}".format)
    for col in ("x10 time", "x10 memory"):
        frame[col] = frame[col].map(lambda v: "-" if pd.isna(v) else f"{v:.1f}")
    return to_markdown(frame[["what", "evals", "evals/s", "x10 time", "peak MB", "x10 memory"]])


def block(markdown: str, sizes: Sequence[int]) -> str:
    return marked(BLOCK, "Live monitor and log replay (benchmarks/perf/online.py)", [
        f"`python -m evalstop_gym.benchmarks.perf.online` (sizes {', '.join(map(str, sizes))}). "
        "Rows named by a detector are RunMonitor updates; `replay` is a CSV log read and "
        "replayed with EvalStop-2. x10: growth per tenfold evals (10 is linear); peak MB is "
        "tracemalloc's peak. On a shared machine the rates move between runs (and so does x10 "
        "time); the memory figures do not.", "", markdown])


def main(argv: Sequence[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--sizes", type=int, nargs="+", default=list(SIZES))
    p.add_argument("--quick", action="store_true", help="sizes 1000 10000, small history sizes")
    p.add_argument("--out", default="PERFORMANCE.md", help="file to write the block into")
    p.add_argument("--no-write", action="store_true", help="print the table only")
    args = p.parse_args(argv)
    sizes = (1_000, 10_000) if args.quick else tuple(args.sizes)
    history = {d: ns[:1] for d, ns in HISTORY.items()} if args.quick else HISTORY
    markdown = table(measure(sizes, history))
    print(markdown)
    if not args.no_write:
        write_block(Path(args.out), BLOCK, block(markdown, sizes))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
