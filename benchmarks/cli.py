"""`evalstop-bench`: list, run and report the experiment matrix (plus plug-in subcommands).

Subcommands live in `SUBCOMMANDS`, name -> module path; each module exposes
`add_arguments(parser)` and `main(args) -> int`. A subcommand's module is imported only when that
subcommand runs or its own --help is asked (so `evalstop-bench --help` imports none), and one
whose module is absent is skipped, so a new one is a single entry here. This module stays light:
what the commands share of the user's input is in `usage.py`, the sweep options in
`sweep/command.py`.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import importlib.metadata
import importlib.util
import logging
import os
import sys
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.config import ConfigError
from evalstop_gym.isolation import PolicyProcessError
from evalstop_gym.sim.native import ENGINES

from .durable import OutputError, out_lock
from .usage import UsageError

SUBCOMMANDS: dict[str, tuple[str, str]] = {
    "list": ("evalstop_gym.benchmarks.sweep.listing", "name the experiments and their titles"),
    "run": ("evalstop_gym.benchmarks.sweep.command",
            "run experiments (or 'all') and print their tables"),
    "report": ("evalstop_gym.benchmarks.report.reproduction",
               "run what is missing, then regenerate REPRODUCTION.md"),
    "perf": ("evalstop_gym.benchmarks.perf.engine", "simulator performance benchmark"),
    "replay": ("evalstop_gym.benchmarks.detectors.replay", "replay a real trace or training log"),
    "corpus": ("evalstop_gym.benchmarks.corpus.build", "build the real-curve corpus"),
    "which-detector": ("evalstop_gym.benchmarks.detectors.which_detector",
                       "measure detectors (yours too) on simulated and real runs beside the "
                       "oracle; resumable"),
    "train": ("evalstop_gym.benchmarks.rl.train", "train an SB3 agent on the env and score it"),
    "score": ("evalstop_gym.benchmarks.score.command",
              "score policies on the fixed suite (evalstop-v1): normalised scores, IQM and "
              "CIs, the leaderboard page; resumable"),
    "calibrate": ("evalstop_gym.benchmarks.sweep.calibrate",
                  "fit the lost constants to E2 (Optuna TPE), validate on E1/E3, sensitivity"),
}


def _load(name: str) -> tuple[Any, Any] | None:
    """(add_arguments, main) of a subcommand, or None when its module is not installed."""
    module = SUBCOMMANDS[name][0]
    if importlib.util.find_spec(module) is None:
        return None
    mod = importlib.import_module(module)
    return mod.add_arguments, mod.main


def version() -> str:
    """The installed distribution's version (the package's own when run from a bare tree)."""
    try:
        return importlib.metadata.version("evalstop-gym")
    except importlib.metadata.PackageNotFoundError:
        import evalstop_gym

        return evalstop_gym.__version__


def _global_flags(default: Any) -> argparse.ArgumentParser:
    """-v/--verbose, accepted before the subcommand (`default` False) and after it (`default`
    SUPPRESS, so a subcommand that is not given it keeps the value set before it)."""
    flags = argparse.ArgumentParser(add_help=False)
    flags.add_argument("-v", "--verbose", action="store_true", default=default,
                       help="log progress details")
    return flags


def named_command(argv: Sequence[str]) -> str | None:
    """The subcommand `argv` names (its first word that is not a flag: the global flags take no
    value), the only one whose module the parser then needs."""
    return next((a for a in argv if not a.startswith("-")), None)


def build_parser(commands: Iterable[str] | None = None) -> argparse.ArgumentParser:
    """The parser with the options of `commands` (default: every subcommand); the others are
    listed with their help line only, so their modules are not imported."""
    parser = argparse.ArgumentParser(prog="evalstop-bench", description=__doc__.splitlines()[0],
                                     parents=[_global_flags(False)])
    parser.add_argument("--version", action="version", version=f"%(prog)s {version()}")
    sub = parser.add_subparsers(dest="command", required=True)
    wanted = set(SUBCOMMANDS if commands is None else commands)
    for name, (module, help_text) in SUBCOMMANDS.items():
        if importlib.util.find_spec(module) is None:
            continue
        p = sub.add_parser(name, help=help_text, description=help_text,
                           parents=[_global_flags(argparse.SUPPRESS)])
        loaded = _load(name) if name in wanted else None
        if loaded is not None:
            loaded[0](p)
            p.set_defaults(handler=loaded[1])
    return parser


def entry_lock(args: argparse.Namespace) -> contextlib.AbstractContextManager:
    """`report` runs a dozen experiments and collations, each of which takes OUT's lock: held
    here for the whole command they nest in it, so OUT is walked for a killed sweep's temp files
    once, not at every step, and no other sweep slips in between steps. `run` locks in its main."""
    if args.command != "report":
        return contextlib.nullcontext()
    from .report.reproduction import check_outputs
    from .sweep.command import check_sweep_args

    check_sweep_args(args)   # a bad value fails before OUT is created
    check_outputs(args)
    return out_lock(Path(args.out))


def user_errors() -> tuple[type[Exception], ...]:
    """The errors a user's input causes, reported in one line (exit code 2). Read once a
    command has run, so the entry point imports neither the policies nor the sweep machinery."""
    from evalstop_gym.policies import PolicyNameError
    from evalstop_gym.sim.protocols import PolicyAnswerError

    from .sweep.runner import BackendError

    return (ConfigError, PolicyNameError, BackendError, OutputError, PolicyProcessError,
            PolicyAnswerError, UsageError)


def interruptible() -> None:
    """Ctrl-C raises KeyboardInterrupt however the command was started: a shell that runs it in
    the background (`evalstop-bench run ... &` in a script) starts it with SIGINT ignored, and
    Python then installs no handler of its own. Only in the main thread, which signals reach."""
    import signal
    import threading

    if threading.current_thread() is threading.main_thread():
        signal.signal(signal.SIGINT, signal.default_int_handler)


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:   # the console script (not a caller's own process): its SIGINT is its own
        interruptible()
    argv = sys.argv[1:] if argv is None else list(argv)
    args = build_parser([named_command(argv) or ""]).parse_args(argv)
    logging.basicConfig(level=logging.INFO if args.verbose else logging.WARNING,
                        format="%(levelname)s %(name)s: %(message)s")
    try:
        engine = getattr(args, "engine", None) or os.environ.get("EVALSTOP_ENGINE", "auto")
        if engine not in ENGINES:
            raise UsageError(f"EVALSTOP_ENGINE={engine!r}: expected one of {', '.join(ENGINES)}")
        with entry_lock(args):
            return int(args.handler(args) or 0)
    except user_errors() as exc:
        print(f"evalstop-bench {args.command}: error: {exc}", file=sys.stderr)
        return 2
    except OSError as exc:   # a disk that filled up, a folder removed under us: one line
        where = f"{exc.filename}: " if exc.filename else ""
        print(f"evalstop-bench {args.command}: error: {where}{exc.strerror or exc}",
              file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        resumable = args.command in ("run", "report", "score")   # their runs are files, read back
        print("evalstop-bench: interrupted" + ("; finished runs are kept, run again to resume"
                                               if resumable else ""), file=sys.stderr)
        return 130


if __name__ == "__main__":   # run the package's module, whose UsageError subcommands raise
    from evalstop_gym.benchmarks.cli import main as package_main

    sys.exit(package_main())
