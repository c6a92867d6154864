"""Sweeps: every (cell, seed) of an experiment is one run, written to its own file when it ends.

A run file (`OUT/<exp>/runs/<cell>__seed<seed>.json`) holds the runs.csv row, the per-job records
and a digest of everything the run depends on (config, policy, seed, the package's version and
source, the source of the user's modules the policy comes from and the bytes of any model file
and its normaliser), so a sweep started again with the same OUT runs only what is missing or
stale, and a report never mixes in runs made by older code or an older model. Files are written
atomically (temp file + `os.replace`), so a killed sweep never leaves half a result. Runs go
through joblib; results are collated in the experiment's cell order and seed order, so they are
the same whatever backend, worker count or completion order produced them.
"""

from __future__ import annotations

import contextlib
import dataclasses
import functools
import hashlib
import importlib
import json
import logging
import math
import os
import re
import socket
import threading
import time
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import joblib
import pandas as pd
from tqdm.auto import tqdm

import evalstop_gym
import evalstop_gym.policies as policies
from evalstop_gym.config import SimConfig, to_dict
from evalstop_gym.experiment import Cell, Experiment
from evalstop_gym.isolation import sandboxed_sources
from evalstop_gym.metrics import METRIC_COLUMNS
from evalstop_gym.policies import make_policy
from evalstop_gym.policies.registry import import_user_modules, user_sources
from evalstop_gym.policies.user_code import MODEL_PREFIX
from evalstop_gym.private_seeds import SeedSecret, check_private_config, seal_output
from evalstop_gym.simulate import simulate

from .. import durable

log = logging.getLogger(__name__)

ID_COLUMNS = ("experiment", "cell", "label", "policy", "base", "detector", "param", "value",
              "seed")
BACKENDS = ("loky", "dask", "ray")
PRIVATE_MARK = "PRIVATE_SEEDS"   # in a private sweep's OUT: its secret's fingerprint
CONNECT_S = 10   # seconds to reach a --scheduler-address before giving up
CONNECT_ENV = "EVALSTOP_CONNECT_S"   # overrides CONNECT_S (a short deadline for a test)
ADDRESS = re.compile(r"(?:(?P<scheme>[a-z]+)://)?(?P<host>\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9._-]+)"
                     r":(?P<port>[0-9]{1,5})/?")
SCHEMES = {"dask": ("tcp", "tls"), "ray": ("ray",)}
INSTALL = {"dask": "pip install 'evalstop-gym[dask]'", "ray": "pip install 'evalstop-gym[ray]'"}


class BackendError(RuntimeError):
    """A parallel backend that is not installed or cannot be reached."""


@functools.cache
def code_digest() -> str:
    """Hash of the simulator's and the policies' Python source (once per process).

    The same files under an editable install and a wheel: a wheel maps `policies/`,
    `benchmarks/` and `configs/` inside `evalstop_gym/`, so they are skipped there (the
    policies are hashed as their own package; the others compute no run)."""
    from evalstop_gym import benchmarks, configs

    mapped = [Path(str(p.__file__)).parent for p in (policies, benchmarks, configs)]
    h = hashlib.sha256()
    for package in (evalstop_gym, policies):
        root = Path(str(package.__file__)).parent
        for path in sorted(root.rglob("*.py")):
            if any(m != root and path.is_relative_to(m) for m in mapped):
                continue
            h.update(path.relative_to(root).as_posix().encode())
            h.update(path.read_bytes())
    return h.hexdigest()[:16]


class RunOptions(NamedTuple):
    """How runs are carried out, not what they compute (results are identical either way), so
    they travel with each spec to any worker, local or remote, and stay out of its digest."""

    engine: str | None = None   # "auto", "native" or "python"; None: EVALSTOP_ENGINE or auto
    isolated: bool = False      # each policy in a process of its own (`simulate(isolated=True)`)
    timeout: float | None = None   # seconds per isolated decision (None: the default, 30)
    private_seeds: SeedSecret | None = None   # salts workload seeds: results differ, see digest
    imports: tuple[str, ...] = ()   # --import: user modules each worker imports first (absolute)


DEFAULT_OPTIONS = RunOptions()


class RunSpec(NamedTuple):
    """One run: everything a worker needs, picklable."""

    experiment: str
    cell: Cell
    seed: int
    config: SimConfig
    code: str  # code_digest() of the process that planned the sweep, so workers agree with it
    options: RunOptions = DEFAULT_OPTIONS
    inputs: str = ""   # input_digest(): the user's modules and model files, as planned

    @property
    def digest(self) -> str:
        """Changes whenever anything the run's result depends on changes. The config's `reward`
        section is left out: it weighs the env's reward terms, which `simulate` never reads."""
        secret = self.options.private_seeds   # a private seed draws another workload
        config = {k: v for k, v in to_dict(self.config).items() if k != "reward"}
        blob = json.dumps([config, self.cell.base, self.cell.detector, self.seed, self.code,
                           evalstop_gym.__version__, self.inputs,
                           *([secret.fingerprint] if secret else [])],
                          sort_keys=True, default=str)
        return hashlib.sha256(blob.encode()).hexdigest()[:16]

    @property
    def filename(self) -> str:
        return f"{self.cell.key}__seed{self.seed}.json"


class SweepResult(NamedTuple):
    runs: pd.DataFrame
    jobs: pd.DataFrame
    timing: pd.DataFrame  # per-run simulation seconds: kept apart, it differs between machines
    n_ran: int
    wall_s: float


def specs(exp: Experiment, seeds: Sequence[int] | None = None,
          options: RunOptions = DEFAULT_OPTIONS) -> list[RunSpec]:
    """All runs of an experiment, in cell order then seed order."""
    inputs = [input_digest(cell, options) for cell in exp.cells]
    return [RunSpec(exp.name, cell, int(s), exp.cell_config(cell), code_digest(), options,
                    inputs[i])
            for i, cell in enumerate(exp.cells) for s in (seeds or exp.seeds)]


def input_digest(cell: Cell, options: RunOptions = DEFAULT_OPTIONS) -> str:
    """Hash of what a cell's policy is built from outside the package: the source of the user
    modules it names (`mine.py:Name`) or that --import loads, and the bytes of a `model:` file and
    of the normaliser saved beside it; '' when there is none, so built-in cells keep their key."""
    if options.private_seeds is not None:   # imported in the policy's sandbox, not here
        parts = [sandboxed_sources([cell.policy], options.imports, options.timeout)[cell.policy]]
    else:
        parts = [user_sources([cell.base, cell.detector], options.imports)]
    if cell.detector.startswith(MODEL_PREFIX):
        from evalstop_gym.policies.learned import model_files

        for path in model_files(cell.detector[len(MODEL_PREFIX):]):
            parts.append(f"{path.name}:{hashlib.sha256(path.read_bytes()).hexdigest()[:16]}")
    return hashlib.sha256("|".join(parts).encode()).hexdigest()[:16] if any(parts) else ""


def _value(v: Any) -> Any:
    if v is None:
        return math.nan
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else v


def run_one(spec: RunSpec) -> dict[str, Any]:
    """Simulate one run; returns the run-file payload (row, job records, digest)."""
    start = time.perf_counter()
    engine, isolated, timeout, secret, imports = spec.options
    trusted = secret is None   # else the user's code runs in the policy's sandbox only (its
    if trusted:                # digest was taken there, once, when the sweep was planned)
        import_user_modules(imports)   # a worker registers the user's names before building
    if trusted and spec.inputs != input_digest(spec.cell, spec.options):
        raise RuntimeError(f"{spec.filename}: the user's code or model behind "
                           f"{spec.cell.policy!r} changed during the sweep; run it again")
    if isolated:   # the policy decides in its own process, from serialised views
        extra: dict[str, Any] = {k: v for k, v in (("timeout", timeout),
                                                   ("private_seeds", secret),
                                                   ("imports", imports)) if v}
        result = simulate(spec.config, spec.cell.policy, spec.seed, engine, isolated=True,
                          **extra)
    else:
        policy = make_policy(spec.cell.base, spec.cell.detector)
        result = simulate(spec.config, policy, spec.seed, engine)
    c = spec.cell
    row = {"experiment": spec.experiment, "cell": c.key, "label": c.label, "policy": c.policy,
           "base": c.base, "detector": c.detector, "param": c.param, "value": _value(c.value),
           "seed": spec.seed, **{m: result.metrics.get(m, math.nan) for m in METRIC_COLUMNS}}
    private = {"private_seed": result.private_seed} if result.private_seed else {}
    return {"digest": spec.digest, "row": row, "jobs": result.records,
            "wall_s": time.perf_counter() - start, **private}


def json_default(obj: Any) -> Any:
    """What json cannot write itself: numpy scalars, dataclasses; anything else as text."""
    if hasattr(obj, "item"):  # numpy scalars
        return obj.item()
    if dataclasses.is_dataclass(obj):
        return dataclasses.asdict(obj)  # type: ignore[arg-type]
    return str(obj)


def run_and_save(spec: RunSpec, run_dir: Path) -> dict[str, Any]:
    """`run_one`, its file written by the worker the moment the run ends, so a Ctrl-C in the
    parent loses no finished run (joblib drops results it has not yet handed over). Hands back
    only what the parent checks (digest and row), not the job records it would never read."""
    payload = run_one(spec)
    durable.write_json(run_dir / spec.filename, payload, default=json_default)
    return {"digest": payload["digest"], "row": payload["row"], "saved": True}


def read_run(path: Path) -> dict[str, Any] | None:
    try:
        return json.loads(path.read_text())
    except (OSError, ValueError):
        return None


def missing(todo: Sequence[RunSpec], run_dir: Path,
            loaded: dict[str, dict[str, Any]] | None = None) -> list[RunSpec]:
    """Runs with no file, or whose file was made from a different config or policy. The current
    files' payloads go into `loaded` (by file name), so `collate` need not parse them again."""
    out = []
    for spec in todo:
        done = read_run(run_dir / spec.filename)
        if done is None or done.get("digest") != spec.digest:
            out.append(spec)
        elif loaded is not None:
            loaded[spec.filename] = done
    return out


def available_cpus() -> int:
    """CPUs this process may run on (its affinity, which a container or taskset narrows)."""
    if hasattr(os, "sched_getaffinity"):
        return max(1, len(os.sched_getaffinity(0)))
    return os.cpu_count() or 1


def local_workers(workers: int) -> int:
    """`workers` capped at the CPUs of this machine: more processes than CPUs only queue, each
    holding its own memory (a thousand of them fill the RAM within a minute)."""
    cpus = available_cpus()
    if workers > cpus:
        log.warning("--workers %d: capped at %d, the CPUs this machine gives this process",
                    workers, cpus)
    return min(workers, cpus)


def connect_deadline() -> float:
    """Seconds to reach a cluster: CONNECT_S, or EVALSTOP_CONNECT_S when set."""
    raw = os.environ.get(CONNECT_ENV)
    if raw is None:
        return float(CONNECT_S)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not 0 < value < math.inf:
        raise BackendError(f"{CONNECT_ENV}={raw!r}: expected a number of seconds > 0")
    return value


def check_address(backend: str, address: str | None) -> tuple[str, int] | None:
    """(host, port) of a --scheduler-address, None for ray's 'auto'; a malformed one, or one
    given to the local backend (which would ignore it), is a one-line BackendError."""
    if address is None:
        return None
    if backend not in SCHEMES:
        raise BackendError(f"--scheduler-address {address}: the {backend} backend runs on this "
                           "machine only; use --backend dask or ray to reach a cluster")
    if backend == "ray" and address == "auto":
        return None
    m = ADDRESS.fullmatch(address)
    if m is None or (m["scheme"] and m["scheme"] not in SCHEMES[backend]) \
            or not 0 < int(m["port"]) < 65536:
        forms = " or ".join(f"{s}://HOST:PORT" for s in SCHEMES[backend])
        raise BackendError(f"--scheduler-address {address!r}: expected HOST:PORT or {forms}"
                           f"{' or auto' if backend == 'ray' else ''} (PORT in 1..65535)")
    return m["host"].strip("[]"), int(m["port"])


def probe(backend: str, address: str | None) -> None:
    """Open (and close) a TCP connection to the cluster within the deadline, so an address
    where nothing listens fails at once in one line rather than inside the client's retries."""
    where = check_address(backend, address)
    if where is None:
        return
    deadline = connect_deadline()
    try:
        socket.create_connection(where, timeout=deadline).close()
    except OSError as exc:
        raise BackendError(f"{backend} cluster at {address}: cannot connect within "
                           f"{deadline:g} s ({exc.strerror or exc})") from None


def within_deadline(connect: Any, what: str) -> Any:
    """`connect()` in a thread of its own, given up on (BackendError) when it has not returned
    by the deadline: ray's client retries a silent address for minutes, and dask's handshake
    with a port that accepts but never answers outlasts its own timeout."""
    deadline, box = connect_deadline(), {}

    def attempt() -> None:
        try:
            box["value"] = connect()
        except BaseException as exc:  # handed to the caller's thread
            box["error"] = exc

    thread = threading.Thread(target=attempt, name=f"connect {what}", daemon=True)
    thread.start()
    thread.join(deadline)
    if thread.is_alive():
        raise BackendError(f"{what}: cannot connect within {deadline:g} s (no answer; is a "
                           "cluster running there?)")
    if "error" in box:
        raise box["error"]
    return box.get("value")


@contextlib.contextmanager
def backend_context(backend: str, workers: int, address: str | None) -> Iterator[int]:
    """joblib's backend switch; yields the n_jobs to pass to Parallel."""
    if backend not in BACKENDS:
        raise BackendError(f"backend {backend!r} is unknown; allowed: {', '.join(BACKENDS)}")
    probe(backend, address)
    if not address:
        workers = local_workers(workers)
    if backend == "loky":
        yield workers
        return
    try:
        importlib.import_module("dask.distributed" if backend == "dask" else "ray")
    except ImportError:
        raise BackendError(f"backend {backend!r} is not installed; {INSTALL[backend]}") from None
    if backend == "dask":
        from dask.distributed import Client, LocalCluster

        with contextlib.ExitStack() as stack:
            if address:
                client = stack.enter_context(_reach(lambda: within_deadline(
                    lambda: Client(address, timeout=connect_deadline()),
                    f"dask cluster at {address}"), backend, address))
            else:
                cluster = stack.enter_context(LocalCluster(
                    n_workers=workers, processes=True, threads_per_worker=1,
                    dashboard_address=None))
                client = stack.enter_context(Client(cluster))
            log.info("dask scheduler %s", client.scheduler.address)
            with joblib.parallel_config(backend="dask"):
                yield -1
        return
    if backend == "ray":
        import ray

        started = not ray.is_initialized()
        if started:
            def connect() -> Any:
                return ray.init(address=address, num_cpus=None if address else workers,
                                include_dashboard=False, log_to_driver=False)

            _reach(lambda: within_deadline(connect, f"ray cluster at {address}") if address
                   else connect(), backend, address)
        try:
            yield -1
        finally:
            if started:
                ray.shutdown()
        return


def _reach(connect: Any, backend: str, address: str | None) -> Any:
    """`connect()`, with a cluster that cannot be reached reported as a BackendError."""
    try:
        return connect()
    except (OSError, TimeoutError) as exc:   # ConnectionError is an OSError
        raise BackendError(f"{backend} cluster at {address}: cannot connect within "
                           f"{connect_deadline():g} s ({' '.join(str(exc).split())})") from None


def execute(todo: Sequence[RunSpec], run_dir: Path, workers: int = 1, backend: str = "loky",
            address: str | None = None, desc: str = "") -> None:
    """Run `todo` through joblib, writing each run's file the moment its result arrives."""
    if not todo:
        return
    with backend_context(backend, workers, address) as n_jobs:
        expected = {s.filename: s.digest for s in todo}
        results = _as_finished(todo, backend, n_jobs, None if address else run_dir)
        for payload in tqdm(results, total=len(todo), desc=desc, unit="run"):
            row = payload["row"]
            name = f"{row['cell']}__seed{row['seed']}.json"
            if expected.get(name) != payload["digest"]:  # pragma: no cover - defensive
                raise RuntimeError(f"unexpected run result {name}")
            if not payload.pop("saved", False):
                durable.write_json(run_dir / name, payload, default=json_default)


def _as_finished(todo: Sequence[RunSpec], backend: str, n_jobs: int,
                 local_dir: Path | None = None) -> Iterator[dict]:
    """Each run's payload as soon as it finishes, in any order, so it can be saved at once.

    joblib's ray backend returns nothing before every run is done, so ray runs as plain ray
    tasks collected with `ray.wait`; loky and dask go through joblib. With `local_dir` (workers
    on this machine) each worker saves its own run file (`run_and_save`)."""
    if backend == "ray":
        import ray

        remote = ray.remote(run_one)
        pending = [remote.remote(spec) for spec in todo]
        while pending:
            done, pending = ray.wait(pending, num_returns=1)
            yield ray.get(done[0])
        return
    tasks = (joblib.delayed(run_and_save)(spec, local_dir) if local_dir is not None
             else joblib.delayed(run_one)(spec) for spec in todo)
    yield from joblib.Parallel(n_jobs=n_jobs, return_as="generator_unordered")(tasks)


def collate(todo: Sequence[RunSpec], run_dir: Path,
            loaded: dict[str, dict[str, Any]] | None = None) -> tuple[pd.DataFrame, ...]:
    """runs (one row per run), jobs (one row per job) and timing, in spec order; a run already
    in `loaded` (from `missing`) is taken (and dropped) from there, the others read from files."""
    rows: list[dict[str, Any]] = []
    jobs: list[dict[str, Any]] = []
    timing: list[dict[str, Any]] = []
    loaded = loaded or {}
    for spec in todo:
        done = loaded.pop(spec.filename, None) or read_run(run_dir / spec.filename)
        if done is None or done.get("digest") != spec.digest:
            raise RuntimeError(f"run {spec.filename} is missing from {run_dir}; run the sweep "
                               f"again with the same --out to finish it")
        rows.append(done["row"])
        timing.append({"cell": spec.cell.key, "seed": spec.seed, "wall_s": done["wall_s"]})
        ids = {"experiment": spec.experiment, "cell": spec.cell.key, "seed": spec.seed}
        jobs.extend({**ids, **j} for j in done["jobs"])
    return (pd.DataFrame(rows, columns=[*ID_COLUMNS, *METRIC_COLUMNS]), pd.DataFrame(jobs),
            pd.DataFrame(timing))


def check_unmixed(out: Path, secret: SeedSecret | None) -> None:
    """Refuses (durable.OutputError, one line) a sweep whose runs would replace another kind's
    under the same file names in `out`: plain runs into an OUT of private-seed runs, or private
    runs into an OUT of plain ones or of another secret's (runs of a random secret cannot be
    made again). A private sweep marks its OUT with its secret's fingerprint (PRIVATE_MARK)."""
    mark = out / PRIVATE_MARK
    held = mark.read_text().strip() if mark.is_file() else None
    if secret is None and held is not None:
        raise durable.OutputError(f"--out {out}: holds private-seed runs (secret {held}); plain "
                                  f"runs would replace them: choose another --out")
    if secret is not None and held is None and any(out.glob("*/runs/*.json")):
        raise durable.OutputError(f"--out {out}: holds plain runs, which private-seed runs would "
                                  f"replace: choose another --out")
    if secret is not None and held not in (None, secret.fingerprint):
        raise durable.OutputError(f"--out {out}: holds private-seed runs of another secret "
                                  f"({held}, this one is {secret.fingerprint}), which this sweep "
                                  f"would replace: choose another --out or that secret")


def guard_out(out: Path, todo: Sequence[RunSpec], options: RunOptions) -> None:
    """Before any run into `out` (its lock held): refuses mixing plain and private runs; with
    private seeds, refuses a config they cannot keep private, seals past runs and marks OUT."""
    check_unmixed(out, options.private_seeds)
    if options.private_seeds is not None:
        for spec in todo:        # a refused config fails before any run
            check_private_config(spec.config)
        seal_output(out)         # past runs' labels: out of the policy's reach
        durable.write_text(out / PRIVATE_MARK, options.private_seeds.fingerprint)


def run_sweep(exp: Experiment, out: Path, seeds: Sequence[int] | None = None, workers: int = 1,
              backend: str = "loky", address: str | None = None,
              options: RunOptions = DEFAULT_OPTIONS) -> SweepResult:
    """Run whatever of `exp` is missing under out/<exp>/runs/ and collate all of it."""
    start = time.perf_counter()
    todo = specs(exp, seeds, options)
    run_dir = Path(out) / exp.name / "runs"
    with durable.out_lock(out):  # one sweep per OUT; removes temp files a killed one left
        guard_out(Path(out), todo, options)
        loaded: dict[str, dict[str, Any]] = {}
        pending = missing(todo, run_dir, loaded)
        log.info("%s: %d runs, %d to do", exp.name, len(todo), len(pending))
        execute(pending, run_dir, workers, backend, address, desc=exp.name)
        runs, jobs, timing = collate(todo, run_dir, loaded)
    return SweepResult(runs, jobs, timing, len(pending), time.perf_counter() - start)


def load_runs(path: Path) -> pd.DataFrame:
    """runs.csv back as a DataFrame, with empty text fields as '' rather than NaN."""
    text_columns = ("label", "param", "detector")
    runs = pd.read_csv(path, dtype={c: str for c in text_columns})
    for col in text_columns:
        runs[col] = runs[col].fillna("")
    return runs
