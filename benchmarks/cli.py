"""`evalstop-bench`: list, run and report the experiment matrix (plus plug-in subcommands).

Subcommands live in `SUBCOMMANDS`, name -> module path; each module exposes
`add_arguments(parser)` and `main(args) -> int`. Modules are imported only when needed, and a
subcommand whose module is absent is skipped, so a new one is a single entry here.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.util
import logging
import os
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.config import ConfigError, parse_yaml
from evalstop_gym.experiment import list_experiments, load_experiment
from evalstop_gym.isolation import PolicyProcessError, check_readable_by_sandbox
from evalstop_gym.policies import PolicyNameError
from evalstop_gym.policies.registry import import_user_modules
from evalstop_gym.policies.user_code import is_file_ref
from evalstop_gym.private_seeds import SeedSecret
from evalstop_gym.sim.native import ENGINES

from .durable import OutputError, out_lock
from .pipeline import MATRIX, check_collatable, collate_out, prepare, run_experiment, variant
from .runner import (
    BACKENDS,
    CONNECT_S,
    BackendError,
    RunOptions,
    check_address,
    local_workers,
)

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "list": ("evalstop_gym.benchmarks.cli", "name the experiments and their titles"),
    "run": ("evalstop_gym.benchmarks.cli", "run experiments (or 'all') and print their tables"),
    "report": ("evalstop_gym.benchmarks.report",
               "run what is missing, then regenerate REPRODUCTION.md"),
    "perf": ("evalstop_gym.benchmarks.perf", "simulator performance benchmark"),
    "replay": ("evalstop_gym.benchmarks.replay", "replay a real trace or training log"),
    "corpus": ("evalstop_gym.benchmarks.corpus.build", "build the real-curve corpus"),
    "train": ("evalstop_gym.benchmarks.train", "train an SB3 agent on the env and score it"),
    "calibrate": ("evalstop_gym.benchmarks.calibrate",
                  "fit the lost constants to E2 (Optuna TPE), validate on E1/E3, sensitivity"),
}
USER_ERRORS = (ConfigError, PolicyNameError, BackendError, OutputError, PolicyProcessError)


class UsageError(ValueError):
    """A command-line value that makes no sense (reported in one line, exit code 2)."""


def parse_overrides(items: Sequence[str] | None) -> dict[str, Any]:
    """['workload.n_jobs=20'] -> {'workload.n_jobs': 20} (values parsed as YAML)."""
    out = {}
    for item in items or ():
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise UsageError(f"--set {item!r}: expected KEY=VALUE, e.g. workload.n_jobs=20")
        out[key.strip()] = parse_yaml(value, f"--set {item!r}")
    return out


def check_output(path: str | Path, option: str, kind: str = "file",
                 inputs: Sequence[str | Path] = ()) -> Path:
    """A user's output path, checked before any work starts so that a long computation never
    ends in a traceback, and never replaces one of its own inputs: `kind` is "file" or "dir";
    raises UsageError (one line naming `option`) when the path is of the other kind, lies under
    a regular file, is in a folder that cannot be written, or is the same file as an input."""
    path = Path(path)
    where = f"{option} {path}"
    if kind == "file" and path.is_dir():
        raise UsageError(f"{where}: is a folder; expected a file path")
    if kind == "dir" and path.exists() and not path.is_dir():
        raise UsageError(f"{where}: is a file; expected a folder")
    for given in inputs:
        if _same_file(path, Path(given)):
            raise UsageError(f"{where}: is also an input ({given}); writing it would replace "
                             "it: choose another output path")
    ancestor = path if kind == "dir" else path.parent
    ancestor = Path(os.path.abspath(ancestor))
    while not ancestor.exists():
        ancestor = ancestor.parent
    if not ancestor.is_dir():
        raise UsageError(f"{where}: {ancestor} is a file, not a folder; choose another path")
    if not os.access(ancestor, os.W_OK | os.X_OK):
        raise UsageError(f"{where}: folder {ancestor} is not writable; choose another path")
    return path


def _same_file(a: Path, b: Path) -> bool:
    """Whether `a` and `b` (or the trainer_state.json a checkpoint folder `b` holds) are one
    file: by inode where both exist, else by resolved path."""
    candidates = [b, b / "trainer_state.json"] if b.is_dir() else [b]
    for c in candidates:
        if a.exists() and c.exists():
            if os.path.samefile(a, c):
                return True
        elif a.resolve() == c.resolve():
            return True
    return False


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
    p.add_argument("--import", dest="imports", action="append", default=[],
                   metavar="MODULE_OR_FILE",
                   help="import a Python file or module of yours first, so the detectors "
                        "(register_detector) and bases (register_base) it registers resolve by "
                        "name, in every worker and isolated policy too (repeatable)")


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("experiments", nargs="+", metavar="EXP",
                   help="experiment names (see `list`), a YAML path, or all (= e1 ... e8)")
    add_sweep_arguments(p, "results")
    p.add_argument("--policy", dest="policies", action="append", default=[], metavar="SPEC",
                   help="add a cell to every experiment: 'EvalStop-3+FIFO', 'SRTF-Est', a "
                        "saved model 'model:runs/ppo_stop/ppo_stop.zip+SRTF-Est', or your own "
                        "class or factory 'path/to/mine.py:SlopeStop-3-0.02+SRTF-Est' / "
                        "'package.module:Name-ARGS+SRTF-Est' (repeatable)")
    p.add_argument("--isolate", action="store_true",
                   help="run each policy in a process of its own that sees only serialised "
                        "views (for untrusted policies; same results, slower)")
    p.add_argument("--policy-timeout", type=float, metavar="SECONDS",
                   help="with --isolate: seconds a policy may take per decision before its "
                        "process is killed and the run fails (default 30)")
    p.add_argument("--private-seeds", action="store_true",
                   help="with --isolate, for untrusted policies: workload seeds salted with a "
                        "secret ($EVALSTOP_SEED_SECRET or $EVALSTOP_SEED_SECRET_FILE, else a "
                        "fresh one), the policy run as nobody when root, OUT made private "
                        "(see README, 'Untrusted policies')")


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
    if timeout is not None and not 0 < timeout < float("inf"):
        raise UsageError(f"--policy-timeout {timeout}: expected seconds > 0 per decision")
    try:
        secret = SeedSecret.load() if private else None
    except ValueError as exc:   # an empty or unreadable secret
        raise UsageError(f"--private-seeds: {exc}") from None
    given = getattr(args, "imports", None) or ()
    import_user_modules(given)   # a bad one fails here, before OUT is created
    imports = tuple(user_import(ref) for ref in given)
    if private:   # the policy's process, run as nobody, must read them: refused before OUT
        check_readable_by_sandbox(imports)
    return RunOptions(getattr(args, "engine", None), isolate, timeout, secret, imports)


def user_import(ref: str) -> str:
    """An --import as every worker can import it: a file by its absolute path."""
    return str(Path(ref).expanduser().resolve()) if is_file_ref(ref) else ref


def main_run(args: argparse.Namespace) -> int:
    check_sweep_args(args)
    options = run_options(args)   # a bad isolation flag fails before OUT is created
    overrides = parse_overrides(args.overrides)
    exps = [variant(prepare(name, overrides, args.policies), overrides)   # --set: own folder
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


def main_list(args: argparse.Namespace) -> int:
    for name in list_experiments():
        print(f"{name:6s} {load_experiment(name).title}")
    return 0


LOCAL = {"run": (add_arguments, main_run), "list": (lambda p: None, main_list)}


def _load(name: str) -> tuple[Any, Any] | None:
    """(add_arguments, main) of a subcommand, or None when its module is not installed."""
    if name in LOCAL:
        return LOCAL[name]
    module = SUBCOMMANDS[name][0]
    if importlib.util.find_spec(module) is None:
        return None
    mod = importlib.import_module(module)
    return mod.add_arguments, mod.main


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="evalstop-bench", description=__doc__.splitlines()[0])
    parser.add_argument("-v", "--verbose", action="store_true", help="log progress details")
    sub = parser.add_subparsers(dest="command", required=True)
    for name, (_, help_text) in SUBCOMMANDS.items():
        loaded = _load(name)
        if loaded is None:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text)
        loaded[0](p)
        p.set_defaults(handler=loaded[1])
    return parser


def entry_lock(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """`report` runs a dozen experiments and collations, each of which takes OUT's lock: held
    here for the whole command they nest in it, so OUT is walked for a killed sweep's temp files
    once, not at every step, and no other sweep slips in between steps. `run` locks in main_run."""
    if args.command != "report":
        return contextlib.nullcontext()
    from .report import check_outputs

    check_sweep_args(args)   # a bad value fails before OUT is created
    check_outputs(args)
    return out_lock(Path(args.out))


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        engine = getattr(args, "engine", None) or os.environ.get("EVALSTOP_ENGINE", "auto")
        if engine not in ENGINES:
            raise UsageError(f"EVALSTOP_ENGINE={engine!r}: expected one of {', '.join(ENGINES)}")
        with entry_lock(args):
            return int(args.handler(args) or 0)
    except (*USER_ERRORS, UsageError) as exc:
        print(f"evalstop-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:   # a disk that filled up, a folder removed under us: one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"evalstop-bench {args.command}: error: {where}{exc.strerror or exc}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        print("evalstop-bench: interrupted; finished runs are kept, run again to resume",
              file=sys.stderr)
        return 130


if __name__ == "__main__":   # run the package's module, whose UsageError subcommands raise
    from evalstop_gym.benchmarks.cli import main as package_main

    sys.exit(package_main())
