"""Simulator performance: events/s against a bare heap, per-policy wall time, scaling, env steps/s.

Run as `evalstop-bench perf [--out DIR] [--quick] [--markdown PATH]`. Prints one table per
measurement, writes `DIR/perf.json`, and regenerates `PATH` (default: PERFORMANCE.md in the current
directory). Each scaling size runs in
its own subprocess, so its peak resident memory (`ru_maxrss`) is that size's alone. Every
measurement is taken on both engines (`sim.native`, compiled; `Cluster`, the reference) in the
same run; the top-level `events_per_s` / `ratio_vs_bare` / `scale` are the compiled engine's.
"""

from __future__ import annotations

import argparse
import functools
import gc
import heapq
import importlib.util
import json
import os
import platform
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from evalstop_gym.config import SimConfig, load_sim_config
from evalstop_gym.experiment import load_experiment
from evalstop_gym.policies import parse_policy
from evalstop_gym.sim import native
from evalstop_gym.simulate import collector_paused, run_jobs, simulate
from evalstop_gym.workloads import generate_workload

from .. import durable
from .vector_throughput import STOP_PROBABILITY

HEADLINE = "EvalStop-2+SRTF-Est"
BASES = ("FIFO", "SJF-Est", "SRTF-Est", "LossAware", "EvalSched")
DETECTORS = ("EvalStop-2", "StopAt-0.5", "StopAt-0.65", "LossPlateau")
SCALE = ((1_000, 320), (10_000, 3_200), (100_000, 10_000))
PHILLY = "philly.csv.gz"   # the packaged Philly subset
NOTES_MARKER = "<!-- notes: kept as written when the figures above are regenerated -->"
PHILLY_GPUS = 2_490    # Philly's GPU count as reported by Jeon et al. (ATC'19)


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--out", type=Path, default=Path("results/perf"),
                        help="directory for perf.json (default: results/perf)")
    parser.add_argument("--quick", action="store_true", help="skip the 100k-job size")
    parser.add_argument("--repeats", type=int, default=5,
                        help="timed repeats of the E2 events/s measurement (best is kept)")
    parser.add_argument("--timeout", type=float, default=900.0,
                        help="seconds before a scaling size is abandoned (reported as such)")
    parser.add_argument("--markdown", type=Path, default=Path("PERFORMANCE.md"),
                        help="where to write the report (default: PERFORMANCE.md in the current "
                             "directory; pass the repository's to regenerate it)")
    parser.add_argument("--no-markdown", action="store_true",
                        help="do not write the markdown report")


@functools.cache
def e2_platform() -> SimConfig:
    """E2's platform exactly as the experiment runs it (configs/e2.yaml over defaults.yaml)."""
    return load_experiment("e2").config


def e2_config(n_jobs: int | None = None, gpus: int | None = None) -> SimConfig:
    """E2's platform, or the same at another size: arrival rate scaled with the GPUs (same load)."""
    e2 = e2_platform()
    if n_jobs is None and gpus is None:
        return e2
    gpus = gpus or e2.cluster.gpus
    return e2.with_overrides({
        "workload.n_jobs": n_jobs or e2.workload.n_jobs, "cluster.gpus": gpus,
        "workload.arrival_rate_per_min": e2.workload.arrival_rate_per_min * gpus / e2.cluster.gpus})


# ----------------------------------------------------------------------------- measurements

def best_time(fn: Callable[[], Any], repeats: int) -> tuple[float, Any]:
    """Fastest of `repeats` calls (the least disturbed by other load), and its result."""
    best, out = float("inf"), None
    for _ in range(repeats):
        gc.collect()
        t0 = time.perf_counter()
        out = fn()
        best = min(best, time.perf_counter() - t0)
    return best, out


MEASURED = ("native", "python")   # the compiled engine (simulate's default) and the reference


def simulator_events(repeats: int, seed: int = 42) -> dict[str, Any]:
    """Events/s of one E2 run (headline policy) per engine, against a bare heapq loop.

    Timed: building the run and running it to the end (for the compiled engine: packing the jobs,
    the compiled loop, and writing the outcome back into the job records). The workload is
    generated beforehand, outside the timing; the per-policy table times whole runs.
    """
    config = e2_config()
    out: dict[str, Any] = {"jobs": config.workload.n_jobs, "gpus": config.cluster.gpus}
    for engine in MEASURED:
        policy = parse_policy(HEADLINE)
        spec = native.select(config, policy, engine)
        first = time.perf_counter()
        events = _timed_run(config, policy, spec, seed)[1]
        warmup = time.perf_counter() - first       # includes compiling (or loading) the kernel
        wall = min(_timed_run(config, policy, spec, seed)[0] for _ in range(repeats))
        out[engine] = {"events": events, "sim_s": wall, "events_per_s": events / wall,
                       "first_run_s": warmup}
    events = out["native"]["events"]
    if out["python"]["events"] != events:
        raise RuntimeError("the engines processed different numbers of events")
    bare_wall = best_time(lambda: bare_heap(events, config.workload.n_jobs), repeats)[0]
    for engine in MEASURED:
        out[engine]["ratio_vs_bare"] = bare_wall / out[engine]["sim_s"]
    return {**out, "events": events, "engine": "native",
            "events_per_s": out["native"]["events_per_s"], "bare_heap_s": bare_wall,
            "bare_heap_events_per_s": events / bare_wall,
            "ratio_vs_bare": out["native"]["ratio_vs_bare"]}


def _timed_run(config: SimConfig, policy: Any, spec: Any, seed: int) -> tuple[float, int]:
    """Seconds for one run of fresh jobs (generated untimed) on the engine `spec` selects."""
    jobs = generate_workload(config, seed)
    policy.reset()
    gc.collect()
    with collector_paused():
        t0 = time.perf_counter()
        events = run_jobs(config, jobs, policy, spec)
        return time.perf_counter() - t0, events


def bare_heap(n_events: int, n_initial: int) -> int:
    """The floor: a hold-model heapq loop over event tuples, `n_events` pushes and pops in all."""
    gaps = np.random.default_rng(0).exponential(10.0, n_events).tolist()
    heap: list[tuple[float, int, int, int, int, int]] = []
    for i in range(n_initial):
        heapq.heappush(heap, (gaps[i], 1, i, 1, i, 0))
    pushed, popped = n_initial, 0
    while heap:
        now, _, _, kind, job, epoch = heapq.heappop(heap)
        popped += 1
        if pushed < n_events:
            heapq.heappush(heap, (now + gaps[pushed], 0, pushed, kind, job, epoch + 1))
            pushed += 1
    return popped


def policy_walls(seed: int = 42) -> list[dict[str, Any]]:
    """Wall time of one whole E2 run (workload, simulation, scoring) per policy and engine."""
    config = e2_config()
    specs = [*BASES, *(f"{d}+SRTF-Est" for d in DETECTORS)]
    rows = []
    for spec in specs:
        row: dict[str, Any] = {"policy": spec}
        for engine in ("auto", "python"):
            simulate(config, parse_policy(spec), seed, engine=engine)    # warm-up (compiling)
            def run(s: str = spec, e: str = engine) -> Any:   # a fresh policy per repeat
                return simulate(config, parse_policy(s), seed, engine=e)
            wall, result = best_time(run, 3)
            row["wall_s" if engine == "auto" else "reference_wall_s"] = wall
            row["events"] = result.events
        row["engine"] = "native" if native.select(config, parse_policy(spec)) else "python"
        rows.append(row)
    return rows


def scale_child(n_jobs: int, gpus: int, engine: str = "auto", seed: int = 42) -> dict[str, Any]:
    """One scaling point, meant to run alone in a fresh process (see `scale_point`).

    A 50-job run first compiles (or loads) the kernel; it is timed apart, as `warmup_s`."""
    t0 = time.perf_counter()
    simulate(e2_config(50, 64), parse_policy(HEADLINE), seed, engine=engine)
    warmup = time.perf_counter() - t0
    config = e2_config(n_jobs, gpus)
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(config, parse_policy(HEADLINE), seed, engine=engine)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    return {"jobs": n_jobs, "gpus": gpus, "engine": engine, "wall_s": wall, "cpu_s": cpu,
            "warmup_s": warmup, "peak_mem_mb": peak_rss_mb(), "events": result.events,
            "jct": result.metrics["jct"], "wasted": result.metrics["wasted_frac"]}


def scale_point(n_jobs: int, gpus: int, timeout: float, engine: str) -> dict[str, Any]:
    code = ("import json; from evalstop_gym.benchmarks.perf.engine import scale_child; "
            f"print(json.dumps(scale_child({n_jobs}, {gpus}, {engine!r})))")
    failed = {"jobs": n_jobs, "gpus": gpus, "engine": engine, "wall_s": None,
              "peak_mem_mb": None}
    return _child(code, timeout, failed)


def scaling(quick: bool, timeout: float, engine: str = "auto") -> list[dict[str, Any]]:
    rows = [scale_point(n, g, timeout, engine) for n, g in (SCALE[:2] if quick else SCALE)]
    for prev, row in zip(rows, rows[1:], strict=False):
        if prev.get("wall_s") and row.get("wall_s"):
            row["growth_vs_prev"] = row["wall_s"] / prev["wall_s"]
            row["cpu_growth_vs_prev"] = row["cpu_s"] / prev["cpu_s"]
    return rows


VECTOR_ENVS = 64   # the vector env's size in PERFORMANCE.md (the issue's target size)

def env_steps(seconds: float = 2.0) -> dict[str, float | None]:
    """Env steps/s with random actions, both control modes and the vector env of
    `VECTOR_ENVS` clusters in both controls, beside CartPole-v1."""
    from .vector_throughput import random_full_actions, random_stops, vector_steps_per_second

    out: dict[str, float | None] = {}
    for key, make in (("stop", lambda: _make_env(control="stop")),
                      ("full", lambda: _make_env(control="full")),
                      ("cartpole", lambda: _make_env("CartPole-v1"))):
        try:
            out[key] = _steps_per_s(make(), seconds)
        except Exception:  # noqa: BLE001 - the env may not be registered yet: report n/a
            out[key] = None
    venv = _make_vector_env(VECTOR_ENVS)   # env_throughput's agents: episodes of normal length
    out["vector"] = vector_steps_per_second(venv, random_stops(VECTOR_ENVS), seconds)
    full = _make_vector_env(VECTOR_ENVS, control="full")
    out["vector_full"] = vector_steps_per_second(full, random_full_actions(full.unwrapped),
                                                 seconds)
    # CartPole again at the end, the faster reading kept: a slow one would flatter the ratios
    out["cartpole"] = max(out["cartpole"] or 0.0, _steps_per_s(_make_env("CartPole-v1"), seconds))
    return out


def _make_vector_env(num_envs: int, control: str = "stop") -> Any:
    import gymnasium as gym

    importlib.import_module("evalstop_gym.env")  # registers the env and its vector entry point
    return gym.make_vec("EvalStopCluster-v0", num_envs=num_envs, control=control,
                        vectorization_mode="vector_entry_point")


def _make_env(env_id: str = "EvalStopCluster-v0", **kwargs: Any) -> Any:
    import gymnasium as gym

    if env_id.startswith("EvalStop"):
        importlib.import_module("evalstop_gym.env")  # registers the env
    return gym.make(env_id, **kwargs)


def _steps_per_s(env: Any, seconds: float) -> float:
    """Steps per second of this process's CPU time (`vector_throughput.cpu_seconds`)."""
    from .vector_throughput import cpu_seconds

    env.action_space.seed(0)
    env.reset(seed=0)
    steps, t0 = 0, cpu_seconds()
    while cpu_seconds() - t0 < seconds:
        _, _, terminated, truncated, _ = env.step(env.action_space.sample())
        steps += 1
        if terminated or truncated:
            env.reset()
    spent = cpu_seconds() - t0
    env.close()
    return steps / spent


def philly_replay(timeout: float, engine: str = "auto") -> dict[str, Any] | None:
    """Replay the whole Philly trace (headline policy) in a subprocess, when trace replay exists."""
    try:
        if importlib.util.find_spec("evalstop_gym.traces.philly") is None:
            return None
    except ImportError:
        return None
    code = ("import json; from evalstop_gym.benchmarks.perf.engine import philly_child; "
            f"print(json.dumps(philly_child({engine!r})))")
    return _child(code, timeout, {})


def philly_child(engine: str = "auto", seed: int = 42) -> dict[str, Any]:
    """The whole trace (every virtual cluster, every hour) on PHILLY_GPUS GPUs."""
    simulate(e2_config(50, 64), parse_policy(HEADLINE), seed, engine=engine)   # warm-up
    config = load_sim_config(overrides={
        "workload.source": "philly", "trace.path": PHILLY, "trace.cluster": "",
        "trace.start": "", "trace.hours": 1e7, "trace.max_jobs": 0, "cluster.gpus": PHILLY_GPUS})
    t0, c0 = time.perf_counter(), time.process_time()
    result = simulate(config, parse_policy(HEADLINE), seed, engine=engine)
    return {"jobs": len(result.records), "gpus": PHILLY_GPUS, "events": result.events,
            "engine": engine, "jct": result.metrics["jct"],
            "wall_s": time.perf_counter() - t0, "cpu_s": time.process_time() - c0,
            "peak_mem_mb": peak_rss_mb()}


def peak_rss_mb() -> float:
    """This process's peak resident memory. Linux's VmHWM is the process's own since exec;
    `ru_maxrss`, the fallback elsewhere, also counts the parent's memory at the fork."""
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) / 1024
    except OSError:
        pass
    import resource

    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


# Imports only `evalstop_gym`: the child must also run from a wheel install or another cwd,
# where the checkout's top-level `policies` folder is not importable.
COMPILE_CODE = ("import json, time; t0 = time.perf_counter(); "
                "from evalstop_gym.benchmarks.perf.engine import e2_config, HEADLINE; "
                "from evalstop_gym.simulate import simulate; "
                "from evalstop_gym.policies import parse_policy; "
                "simulate(e2_config({jobs}, 64), parse_policy(HEADLINE), 1, engine='native'); "
                "print(json.dumps({{'compile_s': time.perf_counter() - t0}}))")


def compile_seconds(timeout: float, jobs: int = 50,
                    cwd: str | Path | None = None) -> dict[str, Any]:
    """Wall time of the first compiled run in a fresh process with an empty numba cache: the
    kernel's compile time, paid once per checkout (then loaded from the cache)."""
    code = COMPILE_CODE.format(jobs=jobs)
    with tempfile.TemporaryDirectory() as cache:
        return _child(code, timeout, {"compile_s": None},
                      env={**os.environ, "NUMBA_CACHE_DIR": cache}, cwd=cwd)


def _child(code: str, timeout: float, failed: dict[str, Any],
           env: dict[str, str] | None = None,
           cwd: str | Path | None = None) -> dict[str, Any]:
    """Run `code` in a fresh interpreter; its last stdout line is the JSON result."""
    try:
        proc = subprocess.run([sys.executable, "-c", code], capture_output=True,
                              text=True, check=False, timeout=timeout, env=env, cwd=cwd)
    except subprocess.TimeoutExpired:
        return {**failed, "error": f"over the {timeout:g} s timeout"}
    if proc.returncode != 0:
        return {**failed, "error": " ".join(proc.stderr.strip().splitlines()[-1:])}
    return json.loads(proc.stdout.strip().splitlines()[-1])


# ----------------------------------------------------------------------------- reporting

def machine() -> dict[str, Any]:
    cpu = platform.processor() or platform.machine()
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    except OSError:
        pass
    try:
        import numba

        numba_version = numba.__version__
    except ImportError:
        numba_version = "not installed"
    return {"cpu": cpu, "cores": os.cpu_count(), "python": platform.python_version(),
            "numpy": np.__version__, "numba": numba_version, "platform": platform.platform()}


def _fmt(value: Any, spec: str = ".3g") -> str:
    return "n/a" if value is None else format(value, spec)


def _same_runs(rows: list[dict[str, Any]], reference: list[dict[str, Any]]) -> str:
    """Whether both engines gave the same events, JCT and wasted compute at every size."""
    pairs = [(r, q) for r, q in zip(rows, reference, strict=False)
             if r.get("wall_s") and q.get("wall_s")]
    if not pairs:
        return "n/a"
    same = all(r[k] == q[k] for r, q in pairs for k in ("events", "jct", "wasted"))
    return "identical" if same else "DIFFERENT"


def tables(res: dict[str, Any]) -> list[str]:
    """The report as Markdown lines (also what is printed)."""
    ev, m = res["events"], res["machine"]
    lines = [f"Machine: {m['cpu']}, {m['cores']} cores, Python {m['python']}, "
             f"numpy {m['numpy']}, numba {m.get('numba', 'n/a')} ({m['platform']}).", "",
             f"## Event loop on E2 ({ev['jobs']} jobs, {ev['gpus']} GPUs, {HEADLINE})", "",
             "One run, built and run to the end (the workload is generated beforehand); the",
             "bare heapq loop pushes and pops as many events. The compiled engine is what",
             "`simulate` uses for this policy; the reference is `Cluster`, in Python.", "",
             "| engine | events | events/s | bare heapq events/s | engine / bare | first run s |",
             "|---|---:|---:|---:|---:|---:|"]
    for engine, label in (("native", "compiled"), ("python", "reference")):
        e = ev[engine]
        lines.append(f"| {label} | {e['events']} | {e['events_per_s']:,.0f} | "
                     f"{ev['bare_heap_events_per_s']:,.0f} | {e['ratio_vs_bare']:.3f} | "
                     f"{e['first_run_s']:.2f} |")
    compiled = res.get("compile", {}).get("compile_s")
    lines += ["", "Compiling the kernel (a fresh process, an empty numba cache; once per "
              f"checkout, cached after): {_fmt(compiled, '.1f')} s.", "",
              "## One E2 run per policy (seed 42; workload, simulation and scoring)", "",
              "| policy | engine | wall s | reference wall s | speed-up | events |",
              "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['policy']} | {r['engine']} | {r['wall_s']:.4f} | "
              f"{r['reference_wall_s']:.4f} | {r['reference_wall_s'] / r['wall_s']:.1f}x | "
              f"{r['events']} |" for r in res["policies"]]
    lines += ["", f"## Scaling ({HEADLINE}, E2 mix, arrival rate scaled with the GPUs)", "",
              "Each size in a fresh process; a 50-job warm-up run is timed apart. Results of",
              f"the two engines (events, JCT, wasted compute): "
              f"{_same_runs(res['scale'], res.get('scale_reference', []))}.", "",
              "| engine | jobs | GPUs | events | wall s | CPU s | peak RSS MB "
              "| growth/10x wall, CPU |",
              "|---|---:|---:|---:|---:|---:|---:|---:|"]
    for label, rows in (("compiled", res["scale"]), ("reference", res.get("scale_reference", []))):
        lines += [f"| {label} | {r['jobs']:,} | {r['gpus']:,} | {_fmt(r.get('events'), ',')} | "
                  f"{_fmt(r['wall_s'], '.2f')} | {_fmt(r.get('cpu_s'), '.2f')} | "
                  f"{_fmt(r['peak_mem_mb'], '.0f')} | {_fmt(r.get('growth_vs_prev'), '.1f')}, "
                  f"{_fmt(r.get('cpu_growth_vs_prev'), '.1f')} |"
                  + (f" {r['error']}" if r.get("error") else "") for r in rows]
    env = res["env_steps_per_s"]
    lines += ["", "## Env steps/s (random actions)", "",
              "The single env drives the reference engine, one decision per step, with uniform "
              f"random actions; the vector env steps {VECTOR_ENVS} clusters per call of its "
              "batch core with `env_throughput`'s agents (stop mode: "
              f"{STOP_PROBABILITY:.0%} of checks stopped; full control: masked random rows), "
              "so its episodes keep their usual length (env steps per second of the process's "
              "CPU time, autoresets included; CartPole-v1 read at both ends of the run, the "
              "faster kept; `python -m evalstop_gym.benchmarks.perf."
              "env_throughput` gives every size, each core's bytes of state per env and PPO's "
              "wall time, in its own block below).", "",
              f"| stop | full | stop, vector env N={VECTOR_ENVS} | "
              f"full, vector env N={VECTOR_ENVS} | CartPole-v1 |",
              "|---:|---:|---:|---:|---:|",
              f"| {_fmt(env['stop'], ',.0f')} | {_fmt(env['full'], ',.0f')} | "
              f"{_fmt(env.get('vector'), ',.0f')} | {_fmt(env.get('vector_full'), ',.0f')} | "
              f"{_fmt(env['cartpole'], ',.0f')} |", "",
              "## Philly trace replay", ""]
    for label, ph in (("compiled", res["philly"]), ("reference", res.get("philly_reference"))):
        lines.append(f"- {label}: " + (
            "n/a (trace replay not available)" if ph is None else
            f"n/a ({ph['error']})" if "error" in ph else
            f"{ph['jobs']:,} jobs on {ph['gpus']:,} GPUs ({HEADLINE}): {ph['events']:,} "
            f"events, {ph['wall_s']:.1f} s wall, {ph['cpu_s']:.1f} s CPU, "
            f"{ph['peak_mem_mb']:.0f} MB peak RSS, JCT {ph['jct']:.1f} min."))
    return lines


def write_markdown(lines: list[str], quick: bool, path: Path) -> None:
    head = ["# Performance", "",
            "Regenerated by `evalstop-bench perf --markdown PERFORMANCE.md` (`--quick` skips the",
            "100k size); the raw figures are in `perf.json`. The machine may be shared: timings",
            "are the best of repeats, and each scaling size also reports its CPU time, which other",
            "load inflates less than wall time. Targets (issue 6): 100k jobs on 10k GPUs under",
            "60 s and 2 GiB, growth per 10x jobs under 15x, simulator / bare heap at least 1/3.",
            ""]
    note = ["", "_Quick run: the 100k size was skipped._"] if quick else []
    kept = ""   # hand-written notes below the marker survive regeneration
    if path.exists() and NOTES_MARKER in path.read_text():
        kept = path.read_text().split(NOTES_MARKER, 1)[1]
    durable.write_text(path, "\n".join(head + lines + note) + "\n\n" + NOTES_MARKER + kept)


def main(args: argparse.Namespace) -> int:
    from ..usage import check_output

    check_output(args.out, "--out", "dir")   # before the minutes of measuring, not after
    if not args.no_markdown:
        check_output(args.markdown, "--markdown", "file")
    res: dict[str, Any] = {"machine": machine()}
    res["events"] = simulator_events(args.repeats)
    # the headline figures at the top level too (the compiled engine's; the reference's are in
    # events.python)
    for key in ("events_per_s", "bare_heap_events_per_s", "ratio_vs_bare"):
        res[key] = res["events"][key]
    res["policies"] = policy_walls()
    res["scale"] = scaling(args.quick, args.timeout)
    res["scale_reference"] = scaling(args.quick, args.timeout, engine="python")
    res["env_steps_per_s"] = env_steps()
    res["philly"] = philly_replay(args.timeout)
    res["philly_reference"] = philly_replay(args.timeout, engine="python")
    res["compile"] = compile_seconds(args.timeout)
    lines = tables(res)
    print("\n".join(lines))
    args.out.mkdir(parents=True, exist_ok=True)
    durable.write_text(args.out / "perf.json", json.dumps(res, indent=2) + "\n")
    print(f"wrote {args.out.resolve() / 'perf.json'}")
    if not args.no_markdown:   # a file the repository tracks: say exactly which one
        write_markdown(lines, args.quick, args.markdown)
        print(f"wrote {args.markdown.resolve()}")
    return 0


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser)
    sys.exit(main(parser.parse_args()))
