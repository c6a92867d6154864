"""Names to policies, in one place: "SRTF-Est", "EvalStop-2", "EvalStop-2+SRTF-Est", ...

A detector name is a registered prefix followed by dash-separated numeric parameters, e.g.
"StopAt-0.65" or "LossPlateau-0.001-5". Register new ones with `register_detector`.
"""

from __future__ import annotations

import math
from collections.abc import Callable

from evalstop_gym.experiment import split_policy
from evalstop_gym.sim.protocols import BaseScheduler, Detector, Policy

from .composed import ComposedPolicy
from .eval_sched import EvalSched, EvalSchedStrict
from .eval_stop import EvalStop
from .fifo import FIFO
from .loss_aware import LossAware
from .loss_plateau import LossPlateau
from .sjf_est import SJFEst
from .srtf_est import SRTFEst
from .stop_at import StopAt

NO_DETECTOR = ("none", "NoStop")


class PolicyNameError(ValueError):
    """A policy name that no registered scheduler or detector answers to."""


BASES: dict[str, Callable[[], BaseScheduler]] = {
    "FIFO": FIFO, "SJF-Est": SJFEst, "SRTF-Est": SRTFEst, "LossAware": LossAware,
    "EvalSched": EvalSched, "EvalSched-Strict": EvalSchedStrict,
}

DETECTORS: dict[str, Callable[[list[str]], Detector]] = {}


def register_detector(prefix: str, factory: Callable[[list[str]], Detector]) -> None:
    """Make `prefix[-arg...]` a detector name; `factory` gets the dash-separated args."""
    DETECTORS[prefix] = factory


def _eval_stop(args: list[str]) -> Detector:
    variant = "best" if args and args[-1] == "best" else "previous"
    nums = [a for a in args if a != "best"]
    return EvalStop(k_rlhf=int(nums[0]) if nums else 2,
                    k_dpo=int(nums[1]) if len(nums) > 1 else None, variant=variant)


register_detector("EvalStop", _eval_stop)
def _loss_plateau(args: list[str]) -> Detector:
    threshold = float(args[0]) if args else 0.02
    window = int(args[1]) if len(args) > 1 else 3
    return LossPlateau(threshold, window)


register_detector("StopAt", lambda args: StopAt(float(args[0]) if args else 0.65))
register_detector("LossPlateau", _loss_plateau)


def make_base(name: str) -> BaseScheduler:
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
    prefix, *args = name.split("-")
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


def _parse_error(prefix: str, args: list[str], exc: Exception) -> str:
    """Python's parser text ('invalid literal for int()') as what the name should have held."""
    text = str(exc)
    if not text.startswith(("invalid literal for int()", "could not convert string to float")):
        return text
    whole = text.startswith("invalid literal")
    bad = text.rpartition(": ")[2].strip("'")
    kind = "a whole number" if whole else "a number"
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
