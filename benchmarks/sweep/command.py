"""`evalstop-bench run` and the sweep options it shares with `report`: which experiments, seeds,
workers and backend, --set overrides, and how runs are carried out (engine, isolation, the
user's own modules)."""

from __future__ import annotations

import argparse
import time
from collections.abc import Sequence
from pathlib import Path

from evalstop_gym.experiment import absolute_ref, list_experiments
from evalstop_gym.isolation import check_readable_by_sandbox
from evalstop_gym.policies.registry import import_user_modules
from evalstop_gym.private_seeds import SeedSecret
from evalstop_gym.sim.native import ENGINES

from ..catalog import MATRIX
from ..durable import out_lock
from ..usage import UsageError, check_output, parse_overrides
from .pipeline import check_collatable, collate_out, prepare, run_experiment, variant
from .runner import BACKENDS, CONNECT_S, RunOptions, check_address, local_workers


def add_sweep_arguments(p: argparse.ArgumentParser, out_default: str | None) -> None:
    """Options shared by `run` and `report` (--import: `report` runs experiments whose names a
    user's file registers, or re-registers)."""
    p.add_argument("--seeds", type=int, nargs="+", help="seeds (default: the experiment's)")
    p.add_argument("--out", default=out_default, help="output directory")
    p.add_argument("--workers", type=int, default=1,
                   help="parallel runs (default 1 = serial); on this machine, capped at its "
                        "CPU count with a warning")
    p.add_argument("--backend", choices=BACKENDS, default="loky", help="joblib backend")
    p.add_argument("--scheduler-address", default=None,
                   help="dask (HOST:PORT, tcp://HOST:PORT) or ray (HOST:PORT, ray://HOST:PORT, "
                        "auto) cluster address; needs --backend dask or ray; a cluster that "
                        f"does not answer within {CONNECT_S} s is an error")
    p.add_argument("--set", dest="overrides", action="append", metavar="KEY=VALUE",
                   help="override a config value in every experiment (repeatable)")
    p.add_argument("--engine", choices=ENGINES, default=None,
                   help="simulator engine: auto (compiled where the policy allows, the "
                        "default), native (compiled or fail) or python (the reference); "
                        "results are identical")
    add_import_argument(p)


def add_import_argument(p: argparse.ArgumentParser) -> None:
    p.add_argument("--import", dest="imports", action="append", default=[],
                   metavar="MODULE_OR_FILE",
                   help="import a Python file or module of yours first, so the detectors "
                        "(register_detector) and bases (register_base) it registers resolve by "
                        "name, in every worker and isolated policy too (repeatable)")


def add_isolation_arguments(p: argparse.ArgumentParser) -> None:
    """--isolate and its options, for `run` and `score` alike (`run_options` reads them)."""
    p.add_argument("--isolate", action="store_true",
                   help="run each policy in a process of its own that sees only serialised "
                        "views (for untrusted policies; same results, slower)")
    p.add_argument("--policy-timeout", type=float, metavar="SECONDS",
                   help="with --isolate: seconds a policy may take per decision before its "
                        "process is killed and the run fails (default 30)")
    p.add_argument("--private-seeds", action="store_true",
                   help="with --isolate, for untrusted policies: workload seeds salted with a "
                        "secret ($EVALSTOP_SEED_SECRET or $EVALSTOP_SEED_SECRET_FILE, else a "
                        "fresh one), the policy run as nobody when root, OUT made private; "
                        "the user's files (--import, FILE.py:Name) are imported in the "
                        "policy's sandbox only, never by evalstop-bench itself (see README, "
                        "'Untrusted policies')")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiments", nargs="+", metavar="EXP",
                   help="experiment names (see `list`), a YAML path, or all (= e1 ... e8)")
    add_sweep_arguments(p, "results")
    p.add_argument("--policy", dest="policies", action="append", default=[], metavar="SPEC",
                   help="add a cell to every experiment: 'EvalStop-3+FIFO', 'SRTF-Est', a "
                        "saved model 'model:runs/ppo_stop/ppo_stop.zip+SRTF-Est', or your own "
                        "class or factory 'path/to/mine.py:SlopeStop-3-0.02+SRTF-Est' / "
                        "'package.module:Name-ARGS+SRTF-Est' (repeatable)")
    add_isolation_arguments(p)


def resolve(names: Sequence[str]) -> list[str]:
    """'all' -> the paper's matrix E1-E8; unknown names fail before anything runs."""
    known = list_experiments()
    if list(names) == ["all"]:
        return [n for n in MATRIX if n in known]
    for name in names:
        if name not in known and not name.endswith((".yaml", ".yml")):
            raise UsageError(f"experiment {name!r} is unknown; known: {', '.join(known)}, all")
    return list(names)


def check_sweep_args(args: argparse.Namespace) -> None:
    if args.workers < 1:
        raise UsageError(f"--workers {args.workers}: expected a whole number >= 1")
    if args.seeds is not None and (any(s < 0 for s in args.seeds)
                                   or len(set(args.seeds)) != len(args.seeds)):
        raise UsageError(f"--seeds {args.seeds}: expected distinct whole numbers >= 0")
    check_output(args.out, "--out", "dir")
    check_collatable(Path(args.out))   # an empty or foreign runs.csv, before any run
    check_address(args.backend, args.scheduler_address)   # no network yet: its form only
    if not getattr(args, "private_seeds", False):   # private: run in the sandbox only
        import_user_modules(getattr(args, "imports", ()))   # before any name is checked
    if not args.scheduler_address:
        args.workers = local_workers(args.workers)


def run_options(args: argparse.Namespace) -> RunOptions:
    """--engine, --isolate and its options, carried by every run's spec to whichever worker
    runs it."""
    isolate = bool(getattr(args, "isolate", False))
    timeout, private = getattr(args, "policy_timeout", None), getattr(args, "private_seeds", False)
    if (timeout is not None or private) and not isolate:
        raise UsageError("--policy-timeout and --private-seeds apply to isolated runs: add "
                         "--isolate")
    if isolate and getattr(args, "engine", None) == "native":
        raise UsageError("--engine native --isolate: an isolated policy decides in another "
                         "process, so its runs use the reference engine; use --engine auto or "
                         "python with --isolate")
    if timeout is not None and not 0 < timeout < float("inf"):
        raise UsageError(f"--policy-timeout {timeout}: expected seconds > 0 per decision")
    try:
        secret = SeedSecret.load() if private else None
    except ValueError as exc:   # an empty or unreadable secret
        raise UsageError(f"--private-seeds: {exc}") from None
    given = getattr(args, "imports", None) or ()
    imports = tuple(absolute_ref(ref) for ref in given)   # the same file in every worker
    if private:   # never imported here: the policy's process, as nobody, must read them
        check_readable_by_sandbox(imports)   # refused before OUT
    else:
        import_user_modules(given)   # a bad one fails here, before OUT is created
    return RunOptions(getattr(args, "engine", None), isolate, timeout, secret, imports)


def main(args: argparse.Namespace) -> int:
    """`evalstop-bench run`: sweep each experiment, print its table, collate OUT."""
    check_sweep_args(args)
    options = run_options(args)   # a bad isolation flag fails before OUT is created
    overrides = parse_overrides(args.overrides)
    exps = [variant(prepare(name, overrides, args.policies, options), overrides)   # --set: own
            for name in resolve(args.experiments)]
    start = time.perf_counter()
    with out_lock(Path(args.out)) as out:   # a second sweep on the same --out waits for this one
        for exp in exps:
            done = run_experiment(exp, out, args.seeds, args.workers, args.backend,
                                  args.scheduler_address, options)
            print(done.terminal())   # all columns: table.md, summary.csv
            print(f"{exp.name}: {len(done.sweep.runs)} runs ({done.sweep.n_ran} new) in "
                  f"{done.sweep.wall_s:.1f} s -> {done.directory}\n")
        collate_out(out)
    print(f"wall time: {time.perf_counter() - start:.1f} s for {len(exps)} experiment(s)")
    return 0
