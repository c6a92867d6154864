"""Argument checks the integrations share: one-line errors naming the argument and its range."""

from __future__ import annotations

import math
from typing import Any

from ..online import short_repr


def check_flag(name: str, value: Any) -> None:
    if not isinstance(value, bool):
        raise ValueError(f"{name}={short_repr(value)}: expected True or False")


def check_count(name: str, value: Any, least: int) -> None:
    """An int >= `least` (not a bool, not a float)."""
    if isinstance(value, bool) or not isinstance(value, int) or value < least:
        raise ValueError(f"{name}={short_repr(value)}: expected an int >= {least}")


def check_real(name: str, value: Any, least: float | None = None,
               allow_none: bool = False) -> float | None:
    """A finite number (>= `least` if given), or None when allowed; returned as a float."""
    if value is None and allow_none:
        return None
    ok = (not isinstance(value, bool) and isinstance(value, (int, float))
          and math.isfinite(float(value)) and (least is None or value >= least))
    if not ok:
        bound = f" >= {least:g}" if least is not None else ""
        raise ValueError(f"{name}={short_repr(value)}: expected a finite number{bound}"
                         + (", or None" if allow_none else ""))
    return float(value)


def patience_detector(detector: Any, patience: int | None, min_delta: float,
                      default_patience: int) -> Any:
    """The detector an early-stopping callback's `patience` / `min_delta` (metric units) select:
    the Patience rule the anchor runs, else `detector` as given. Both at once is refused."""
    from ..online import DEFAULT_DETECTOR
    from ..policies.patience import Patience

    if patience is None and not min_delta:
        return detector
    if not (isinstance(detector, str) and detector == DEFAULT_DETECTOR):
        raise ValueError(f"detector={short_repr(detector)}: patience/min_delta select the "
                         f"Patience detector; pass either them or detector, not both")
    return Patience(default_patience if patience is None else patience, min_delta)


def evidence(decision: Any, prefix: str = "evalstop/") -> dict[str, float]:
    """A decision as metrics for a training library's loggers (TensorBoard, W&B, CSV): whether
    the detector said stop (1/0), the checkpoint to keep and its value (metric units), and the
    number of evals judged."""
    return {f"{prefix}stop": float(decision.stop), f"{prefix}best_step": float(decision.best_step),
            f"{prefix}best_value": float(decision.best_value),
            f"{prefix}n_evals": float(decision.n_evals)}
