"""Every entry point a practitioner or researcher meets defaults to `DEFAULT_DETECTOR`."""

from __future__ import annotations

import importlib.util
import inspect
from pathlib import Path

import pytest

from evalstop_gym.online import DEFAULT_DETECTOR, MonitorGroup, RunMonitor

ROOT = Path(__file__).resolve().parent.parent


def default_of(callable_, name: str = "detector"):
    return inspect.signature(callable_).parameters[name].default


def test_monitors_default_to_it():
    assert default_of(RunMonitor) == DEFAULT_DETECTOR
    assert default_of(MonitorGroup) == DEFAULT_DETECTOR
    assert RunMonitor().detector.name == DEFAULT_DETECTOR


@pytest.mark.parametrize("module, cls", [
    ("evalstop_gym.integrations.hf", "EvalStopCallback"),
    ("evalstop_gym.integrations.lightning", "EvalStopCallback"),
    ("evalstop_gym.integrations.optuna", "EvalStopPruner"),
    ("evalstop_gym.integrations.ray_tune", "EvalStopStopper"),
    ("evalstop_gym.integrations.ray_tune", "EvalStopScheduler"),
])
def test_integrations_default_to_it(module, cls):
    pytest.importorskip(module.rsplit(".", 1)[1].replace("hf", "transformers")
                        .replace("ray_tune", "ray.tune"))
    assert default_of(getattr(importlib.import_module(module), cls)) == DEFAULT_DETECTOR


def test_replay_defaults_to_it_first_and_alone():
    from evalstop_gym.benchmarks.detectors.replay import COMPARE, DEFAULT_DETECTORS

    assert DEFAULT_DETECTORS == (DEFAULT_DETECTOR,)
    assert COMPARE[0] == DEFAULT_DETECTOR


def test_train_scores_the_default_beside_a_model():
    import argparse

    from evalstop_gym.benchmarks.rl import learned_seeds, train

    parser = argparse.ArgumentParser()
    train.add_arguments(parser)
    actors = train.baseline_actors(parser.parse_args([]))
    assert f"{DEFAULT_DETECTOR}+SRTF-Est" in actors
    assert DEFAULT_DETECTOR in learned_seeds.BASELINES


@pytest.mark.parametrize("path", sorted((ROOT / "examples").glob("*.py")), ids=lambda p: p.name)
def test_examples_default_to_it(path):
    spec = importlib.util.spec_from_file_location(f"example_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    try:
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
    except ImportError as exc:   # its library's extra is not installed
        pytest.skip(str(exc))
    mains = [f for n, f in vars(module).items() if n.startswith("main") and callable(f)]
    assert mains, f"{path.name} has no main"
    for main in mains:
        if "detector" in inspect.signature(main).parameters:
            assert default_of(main) == DEFAULT_DETECTOR, f"{path.name}:{main.__name__}"


def test_snippets_name_no_other_detector_for_a_run():
    """A snippet that monitors runs uses the default (by leaving the detector out)."""
    for name in ("run_monitor.py", "monitor_group.py"):
        text = (ROOT / "docs" / "snippets" / name).read_text()
        assert "detector=" not in text.replace("DEFAULT_DETECTOR", ""), name
