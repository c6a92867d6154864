"""Every registered detector decides alike whatever the metric's units (and offset).

The same seeded family of peaking and healthy runs, logged as a fraction, is logged again x0.01,
x100, x1e4 and with an added offset; each run goes through a RunMonitor alone and through one
MonitorGroup (peers ended in order, so cross-run detectors learn from them in the same units).
Stop index and the detector's reason must not change (the monitor's own summary quotes values
in the metric's units, so it scales with them by design). Every registered prefix is tried with
its defaults, so a detector registered later is covered too.

Offset-invariant as well (tested): all of them. EvalStop, Patience, CUSUM, BOCPD and DeclineTest
read only differences and ratios of differences of a run's evals (BOCPD's prior mean is the mean
of the evals), MedianPruner compares with peers logged in the same units, StopAt and LossPlateau
do not read the evals. Parameters given explicitly in the metric's units are, by design, not
invariant: Patience's `min_delta` ("Patience-3-0.01"), and a fixed `sigma` for CUSUM
("CUSUM-0-3-0.05") or BOCPD.
"""

from __future__ import annotations

import numpy as np
import pytest

from evalstop_gym.online import MonitorGroup, RunMonitor
from evalstop_gym.policies import DETECTORS

# the defaults of every registered prefix, plus a few non-default parameterisations
NAMES = sorted({*DETECTORS, "CUSUM-0.5-2", "BOCPD-0.3-0.1", "BOCPD-0.7-0.2-2",
                "MedianPruner-25-1", "DeclineTest-0.3", "StopAt-0.5"})
UNITS = [(0.01, 0.0), (100.0, 0.0), (1e4, 0.0), (1.0, 5.0), (100.0, -30.0)]   # (scale, offset)
RUNS = 16


def family(seed: int = 7) -> list[tuple[np.ndarray, np.ndarray]]:
    """(evals as a fraction, training losses) per run: half peak and decline, half keep rising;
    10 to 40 evals, noise sd 0.005 to 0.03."""
    rng = np.random.default_rng(seed)
    runs = []
    for i in range(RUNS):
        n = int(rng.choice([10, 20, 40]))
        p = np.arange(1, n + 1) / n
        if i % 2:
            curve = 0.3 + 0.4 * (1 - np.exp(-3 * p))
        else:
            peak = rng.uniform(0.3, 0.7)
            curve = 0.6 - rng.uniform(0.5, 1.5) * (p - peak) ** 2
        noise = rng.choice([0.005, 0.01, 0.03]) * rng.standard_normal(n)
        runs.append((curve + noise, 2.0 * np.exp(-2 * p) + 0.3))
    return runs


def decisions(name: str, scale: float, offset: float, grouped: bool) -> list:
    """(stop index, reason) per run, each run fed eval by eval."""
    group = MonitorGroup(name) if grouped else None
    out = []
    for evals, losses in family():
        n = len(evals)
        monitor = group.monitor(max_steps=n) if group else RunMonitor(name, max_steps=n)
        for i in range(n):
            if monitor.update(i + 1, scale * float(evals[i]) + offset, float(losses[i])).stop:
                break
        if group:
            group.end_run(monitor)
        out.append((monitor.stop_index, monitor.detector_reason))
    return out


@pytest.mark.parametrize("grouped", [False, True], ids=["alone", "group"])
@pytest.mark.parametrize("name", NAMES)
def test_decisions_do_not_depend_on_the_metric_units(name, grouped):
    reference = decisions(name, 1.0, 0.0, grouped)
    for scale, offset in UNITS:
        assert decisions(name, scale, offset, grouped) == reference, (scale, offset)


@pytest.mark.parametrize("name", ["CUSUM", "BOCPD", "Patience", "EvalStop", "DeclineTest"])
def test_the_family_makes_the_comparison_bite(name):
    """Detectors that read a run's own evals stop some runs of the family on their own."""
    assert any(index is not None for index, _ in decisions(name, 1.0, 0.0, grouped=False))


@pytest.mark.parametrize("name", ["TrendTest", "PeerPrior", "DeclineTest", "CUSUM", "BOCPD"])
def test_decisions_hold_to_the_documented_range_of_units(name, caplog):
    """Within 1e+-140 of the fraction (UNIT_RANGE is 1e+-150), no word and the same decisions;
    beyond it (x1e300, x1e-300), where squares overflow or vanish, a warning says to rescale."""
    reference = decisions(name, 1.0, 0.0, grouped=True)
    for scale in (1e-140, 1e140):
        assert decisions(name, scale, 0.0, grouped=True) == reference, scale
    assert "rescale the metric" not in caplog.text
    for scale in (1e300, 1e-300):
        caplog.clear()
        RunMonitor(name, max_steps=10).update(1, 0.5 * scale)
        assert f"value={0.5 * scale:g}: beyond 1e+-150, where detectors no longer decide " \
               f"alike in any units; rescale the metric" in caplog.text
