"""Names to policies, in one place: "SRTF-Est", "EvalStop-2", "EvalStop-2+SRTF-Est", ...

A detector name is a registered prefix followed by dash-separated numeric parameters, e.g.
"StopAt-0.65" or "LossPlateau-0.001-5". Register new ones with `register_detector` and
`register_base`. A user's own class needs no registration: `path/to/mine.py:SlopeStop-3-0.02` or
`package.module:SlopeStop-3-0.02` names it directly (`user_code`).
"""

from __future__ import annotations

import importlib
import logging
import math
import sys
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.experiment import split_policy
from evalstop_gym.sim.protocols import BaseScheduler, Detector, Policy

from .composed import ComposedPolicy
from .user_code import (
    UserCodeError,
    build_user_object,
    import_user_code,
    is_file_ref,
    is_user_ref,
    split_args,
    user_target,
)
from .user_code import source_digest as _source_digest

log = logging.getLogger(__name__)

NO_DETECTOR = ("none", "NoStop")


class PolicyNameError(ValueError):
    """A policy name that no registered scheduler or detector answers to."""


BASES: dict[str, Callable[[], BaseScheduler]] = {}
DETECTORS: dict[str, Callable[[list[str]], Detector]] = {}
USAGE: dict[str, str] = {}   # prefix -> what its arguments must be, for error messages


def register_detector(prefix: str, factory: Callable[[list[str]], Detector],
                      usage: str = "", override: bool = False) -> None:
    """Make `prefix[-arg...]` a detector name; `factory` gets the dash-separated args. `usage`
    ('EvalStop-K: K a positive integer') is what a malformed name's error says was expected.
    A name the package or another of the files imported with this one registered is refused
    (PolicyNameError naming both) unless `override=True`, which warns naming both."""
    _check_new("detector", prefix, DETECTORS.get(prefix), factory, override)
    DETECTORS[prefix] = factory
    if usage:
        USAGE[prefix] = usage


def register_base(name: str, factory: Callable[[], BaseScheduler],
                  override: bool = False) -> None:
    """Make `name` a base scheduler name (`factory()` builds a fresh one per run); a name that
    exists is refused or overridden as `register_detector` says."""
    _check_new("base scheduler", name, BASES.get(name), factory, override)
    BASES[name] = factory


_ACTIVE: set[str] = set()   # the sources of the user files `import_user_modules` is importing


def source_of(factory: Callable[..., Any]) -> str:
    """Where a factory comes from: its module's file, else its module's name."""
    module = str(getattr(factory, "__module__", "") or "")
    file = getattr(sys.modules.get(module), "__file__", None)
    return str(Path(file).resolve()) if file else module


def _check_new(kind: str, name: str, old: Callable[..., Any] | None,
               new: Callable[..., Any], override: bool) -> None:
    """Two sources for one name would make a table row show one's numbers under the other's
    name: refused unless asked for. The same file registering again (edited, re-imported) and a
    file imported by an earlier, finished import in this process (a reused worker) replace it."""
    if old is None or old is new:
        return
    before, after = source_of(old), source_of(new)
    packaged = str(getattr(old, "__module__", "")).startswith("evalstop_gym.")
    if before == after or not (packaged or before in _ACTIVE):
        return
    what = f"{kind} {name!r} is registered by {before} and again by {after}"
    if not override:
        raise PolicyNameError(f"{what}: rename one, or pass override=True to replace the first")
    log.warning("%s (override=True): %s's replaces it", what, after)


def make_base(name: str) -> BaseScheduler:
    if is_user_ref(name):
        return _user(name, "base scheduler", BaseScheduler)
    try:
        return BASES[name]()
    except KeyError:
        raise PolicyNameError(f"base scheduler {name!r} is unknown; known: "
                              f"{', '.join(BASES)}") from None


def make_detector(name: str) -> Detector | None:
    if name in NO_DETECTOR:
        return None
    if name.startswith("model:"):  # a saved SB3 model; sb3 is imported only here
        from .learned import LearnedDetector, NotADetectorModel

        try:
            return LearnedDetector.load(name.removeprefix("model:"))
        except (OSError, ImportError, NotADetectorModel) as exc:
            raise PolicyNameError(f"detector {name!r}: {exc}") from None
    if is_user_ref(name):
        return _user(name, "detector", Detector)
    prefix, *args = split_args(name)
    bad = [a for a in args if not _finite_or_word(a)]
    if bad:
        raise PolicyNameError(f"detector {name!r}: parameter {bad[0]!r} must be a finite number")
    if prefix not in DETECTORS:
        raise PolicyNameError(f"detector {name!r} is unknown; known prefixes: "
                              f"{', '.join(DETECTORS)} (or 'none')")
    try:
        return DETECTORS[prefix](args)
    except (ValueError, IndexError) as exc:
        raise PolicyNameError(f"detector {name!r}: {_parse_error(prefix, args, exc)}") from None


def _user(name: str, kind: str, protocol: type) -> Any:
    """A user's `file.py:Name-args` / `module:Name-args` object, checked to be a `kind`."""
    try:
        obj = build_user_object(name)
    except UserCodeError as exc:
        raise PolicyNameError(f"--policy {name!r}: {exc}") from None
    if not isinstance(obj, protocol):
        raise PolicyNameError(f"--policy {name!r}: built a {type(obj).__name__}, which is not a "
                              f"{kind}; expected a {protocol.__name__} (a class or a factory)")
    return obj


def _parse_error(prefix: str, args: list[str], exc: Exception) -> str:
    """Python's parser text ('invalid literal for int()') as what the name should have held:
    the prefix's registered usage, else its generic form and its defaults as an example."""
    text = str(exc)
    parser_text = text.startswith(("invalid literal for int()",
                                   "could not convert string to float"))
    if not parser_text:
        return f"{text}; expected {USAGE[prefix]}" if prefix in USAGE else text
    bad = text.rpartition(": ")[2].strip("'")
    kind = "a whole number" if text.startswith("invalid literal") else "a number"
    if prefix in USAGE:
        return f"parameter {bad!r} must be {kind}; expected {USAGE[prefix]}"
    try:
        example = f", e.g. {DETECTORS[prefix]([]).name!r} (its defaults)"
    except (ValueError, IndexError, TypeError):
        example = ""
    return f"parameter {bad!r} must be {kind}; expected {prefix}-<number>[-<number>...]{example}"


def _finite_or_word(arg: str) -> bool:
    """False for a parameter that reads as NaN or infinity (float() accepts 'nan', 'inf')."""
    try:
        return math.isfinite(float(arg))
    except ValueError:
        return True   # a word such as 'best': the factory judges it


def make_policy(base: str, detector: str = "none") -> Policy:
    """The base scheduler alone, or the detector composed over it."""
    sched = make_base(base)
    det = make_detector(detector)
    return sched if det is None else ComposedPolicy(det, sched)  # type: ignore[return-value]


def parse_policy(spec: str) -> Policy:
    """'EvalStop-2+SRTF-Est' -> detector over base; 'SRTF-Est' -> base alone."""
    detector, base = split_policy(spec)
    return make_policy(base, detector)


def import_user_modules(refs: Sequence[str], option: str = "--import") -> None:
    """`--import` (and an experiment file's imports): each user file or module is imported, so
    the detectors and bases it registers resolve by name. The hook every process that builds
    policies from names calls first (workers do, from their RunOptions; an isolated policy's
    process too). `option` names where the refs were given, for the error."""
    if isinstance(refs, str):   # one name, not a list: iterating it would import each letter
        raise PolicyNameError(f"{option} {refs!r}: expected a list of Python files or module "
                              f"names, e.g. [{refs!r}]")
    _ACTIVE.clear()   # one call's files may not register one name twice
    try:
        for ref in refs:
            if is_file_ref(ref):
                _ACTIVE.add(str(Path(ref).expanduser().resolve()))
            try:
                module = import_user_code(ref)
            except UserCodeError as exc:
                raise PolicyNameError(f"{option} {ref}: {exc}") from None
            if getattr(module, "__file__", None):
                _ACTIVE.add(str(Path(str(module.__file__)).resolve()))
    finally:
        _ACTIVE.clear()


def user_sources(names: Sequence[str], imports: Sequence[str] = ()) -> str:
    """Hash of the source of every user module the policy `names` come from: the files they name
    (`mine.py:Name`), and the `imports` when a name resolves to a factory registered outside the
    package (so editing a user's detector reruns its cells, not the packaged ones). Part of a
    run's cache key; '' when there is none."""
    import_user_modules(imports)
    refs = [t for t in map(user_target, names) if t]
    if any(_registered_by_user(name) for name in names):
        refs.extend(imports)
    try:
        return _source_digest(refs)
    except UserCodeError as exc:
        raise PolicyNameError(f"--policy: {exc}") from None


def _registered_by_user(name: str) -> bool:
    """Whether a registered base or detector name resolves to a factory from outside the
    package (one a user's file registered, or re-registered over a packaged name)."""
    factory = BASES.get(name) or DETECTORS.get(name.split("-")[0])
    return factory is not None and not str(getattr(factory, "__module__", "")).startswith(
        "evalstop_gym.")


# The package's own policy modules: each registers its names as it is imported (`register_base`,
# `register_detector`), as a user's file does, and importing the package imports them all, so no
# import line elsewhere decides whether a name is known (tests/test_registry.py fails when a
# module that registers a name is missing here).
MODULES = ("fifo", "sjf_est", "srtf_est", "loss_aware", "eval_sched", "las", "eval_stop", "stop_at",
           "loss_plateau", "bocpd", "cusum", "decline_test", "material_decline", "median_pruner",
           "patience", "peer_prior", "trend_test")
for _module in MODULES:
    importlib.import_module(f"{__package__}.{_module}")
