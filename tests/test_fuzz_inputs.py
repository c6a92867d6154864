"""Fuzzing the inputs (hypothesis): configs, --set strings, experiment files, and runs through the
public simulate and CLI. Each input ends in one of two ways: a one-line error of the project's own
type that names the field, or a run whose metrics are finite (NaN only where a metric is
undefined, e.g. precision with no stop). Never another exception, never NaN with success.

Bounded for CI: fixed example counts, derandomized (the same examples every run), tiny workloads.
"""

from __future__ import annotations

import math
import re

import pytest
import yaml
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from evalstop_gym.benchmarks import cli
from evalstop_gym.benchmarks.sweep.pipeline import prepare
from evalstop_gym.benchmarks.usage import UsageError, parse_overrides
from evalstop_gym.config import CONFIG_DIR, ConfigError, SimConfig, load_sim_config, to_dict
from evalstop_gym.experiment import load_experiment
from evalstop_gym.metrics import METRIC_COLUMNS
from evalstop_gym.policies import PolicyNameError
from evalstop_gym.simulate import simulate

FAST = settings(max_examples=150, deadline=None, derandomize=True, database=None,
                suppress_health_check=list(HealthCheck))
RUNS = settings(FAST, max_examples=200)
USER_ERRORS = (ConfigError, PolicyNameError, UsageError)
# "section.key: ...", "cells[0].overrides: ...", "/path/x.yaml: ...", "--set 'k=v': ...".
NAMED = re.compile(r"^(--set '.*'|[\w./+=-]+(\[\d+\])?(\.[\w]+(\[\d+\])?)*): \S")


def leaves(data: dict, prefix: str = "") -> dict[str, object]:
    """Dotted key -> default value, for every field of the platform config."""
    out: dict[str, object] = {}
    for key, value in data.items():
        name = f"{prefix}{key}"
        if isinstance(value, dict):
            out.update(leaves(value, f"{name}."))
        else:
            out[name] = value
    return out


DEFAULTS = leaves(to_dict(SimConfig()))
KEYS = sorted(DEFAULTS)
CHOICES = ["gaussian", "student_t", "ar1", "synthetic", "philly", "exact", "independent",
           "per_gpu", "per_type", "", "x"]
nasty_floats = st.one_of(st.floats(allow_nan=True, allow_infinity=True),
                         st.sampled_from([0.0, -1.0, 1e-300, 1e300, 1e-9, 0.5, 2.0, 1e12]))
junk = st.one_of(nasty_floats, st.integers(-10**15, 10**15), st.booleans(), st.none(),
                 st.text(max_size=6), st.sampled_from(CHOICES),
                 st.lists(st.one_of(nasty_floats, st.integers(-5, 50)), max_size=3),
                 st.dictionaries(st.text(max_size=4), st.integers(), max_size=2))


@st.composite
def plausible(draw, key: str) -> object:
    """A value near the field's default (so that many fuzzed configs run), or junk."""
    default = DEFAULTS[key]
    if isinstance(default, bool) or draw(st.integers(0, 4)) == 0:
        return draw(junk)
    if isinstance(default, float):
        return draw(st.floats(0.0, 3 * default + 1.0))
    if isinstance(default, int):
        return draw(st.integers(0, 3 * default + 2))
    if isinstance(default, tuple) and len(default) == 2 and isinstance(default[0], (int, float)):
        pair = sorted(draw(st.floats(0.0, 2 * float(default[1]) + 1.0)) for _ in range(2))
        return [type(default[0])(round(v)) if isinstance(default[0], int) else v for v in pair]
    return draw(junk)


@st.composite
def overrides(draw, keys: list[str] = KEYS, most: int = 3) -> dict[str, object]:
    chosen = draw(st.lists(st.sampled_from(keys), min_size=1, max_size=most, unique=True))
    return {k: draw(plausible(k)) for k in chosen}


def assert_one_line_naming(exc: Exception) -> None:
    text = str(exc)
    assert "\n" not in text, text
    assert NAMED.match(text), f"does not start with the field it names: {text!r}"


def undefined(metric: str, records: list[dict]) -> bool:
    """Whether `metric` has a zero denominator (NaN is then its honest value)."""
    stopped = [r for r in records if r["stopped"]]
    hacking = [r for r in records if r["is_hacking"]]
    healthy = [r for r in records if r["job_type"] == "rlhf" and not r["is_hacking"]]
    denominators = {
        "precision": len(stopped), "recall": len(hacking), "recall_early": len(hacking),
        "fpr": len(healthy), "fpr_all": len(records) - len(hacking),
        "ttfuc": sum(not math.isnan(r["ttfuc"]) for r in records),
        "wasted_frac": sum(r["gpu_minutes"] for r in records),
        "saved_frac": sum(r["planned_gpu_minutes"] for r in records),
        "quality_regret": sum(r["job_type"] != "lora" and not math.isnan(r["delivered_true_score"])
                              for r in records),
        "jain": sum(r["gpu_minutes"] for r in records),
        "utilization": max(r["end_time"] for r in records) - min(r["arrival"] for r in records),
    }
    if metric == "f1":   # NaN when precision or recall is, or when both are 0 (no true stop)
        true_stops = sum(r["stopped"] and r["is_hacking"] for r in records)
        return undefined("precision", records) or undefined("recall", records) or not true_stops
    return denominators.get(metric, 1) == 0


def assert_finite_metrics(metrics: dict, records: list[dict]) -> None:
    for name in METRIC_COLUMNS:
        value = metrics[name]
        assert math.isfinite(value) or (math.isnan(value) and undefined(name, records)), \
            f"{name} = {value} although it is defined"
    assert metrics["jct"] > 0 and metrics["makespan"] > 0


@FAST
@given(overrides())
def test_fuzzed_overrides_build_or_name_the_field(fuzzed):
    try:
        config = load_sim_config(overrides=fuzzed)
    except ConfigError as exc:
        assert_one_line_naming(exc)
        return
    assert isinstance(config, SimConfig)
    for key in fuzzed:   # what was accepted is what the config holds (no silent coercion)
        section, _, field = key.rpartition(".")
        node = config
        for part in section.split("."):
            node = getattr(node, part)
        value = getattr(node, field)
        assert not isinstance(value, float) or math.isfinite(value), (key, value)


RUN_KEYS = [k for k in KEYS if not k.startswith(("trace.", "reward.", "workload.source",
                                                  "workload.n_jobs", "curves.source"))]
POLICIES = ["SRTF-Est", "EvalStop-2+SRTF-Est", "StopAt-0.65+FIFO", "LossPlateau+SJF-Est",
            "CUSUM-0-3+LossAware", "EvalStop-1+EvalSched"]


@RUNS
@given(overrides(RUN_KEYS, most=2), st.sampled_from(POLICIES), st.integers(0, 2**32))
def test_fuzzed_platforms_run_to_finite_metrics(fuzzed, policy, seed):
    """Through the public simulate, on tiny workloads (12 jobs)."""
    try:
        config = load_sim_config(overrides={"workload.n_jobs": 12, **fuzzed})
    except ConfigError as exc:
        assert_one_line_naming(exc)
        event("refused")
        return
    event("ran")
    if config.evals.interval < 0.01:
        config = config.with_overrides({"evals.interval": 0.01})   # keep each run short
    result = simulate(config, policy, seed)
    assert_finite_metrics(result.metrics, result.records)


SPECIAL_VALUES = ["[", "{", ".nan", ".inf", "-.inf", "1e-300", "1e+300", "2017-11-07 00:00:00",
                  "2020-13-01 00:00:00", "true", "null", "[1, 2]", "{a: 1, a: 2}", "!!python/x",
                  "&a [*a]", "0x10", "1_000", "'8'"]
setting_text = st.one_of(
    st.text(max_size=30),
    st.builds(lambda k, v: f"{k}={v}", st.sampled_from(KEYS + ["nope.key", "cluster"]),
              st.one_of(st.text(max_size=12), st.sampled_from(SPECIAL_VALUES))))


@FAST
@given(st.lists(setting_text, min_size=1, max_size=3))
def test_fuzzed_set_strings_load_or_fail_in_one_line(settings_list):
    try:
        prepare("e2", parse_overrides(settings_list))
    except USER_ERRORS as exc:
        assert "\n" not in str(exc), str(exc)


yaml_values = st.recursive(
    st.one_of(st.none(), st.booleans(), st.integers(-3, 10**6), nasty_floats, st.text(max_size=8),
              st.sampled_from(["FIFO", "SRTF-Est", "EvalStop-2", "none", "noise.sigma",
                               "defaults.yaml", "../x", "e2.yaml"])),
    lambda inner: st.one_of(st.lists(inner, max_size=3),
                            st.dictionaries(st.sampled_from(
                                ["base", "detector", "label", "overrides", "param", "value",
                                 "values", "noise.sigma", "cluster.gpus", "x"]), inner,
                                max_size=3)),
    max_leaves=8)
EXPERIMENT_KEYS = ["name", "title", "platform", "overrides", "seeds", "reference", "cells",
                   "sweep", "extra_references", "description", "junk"]


@FAST
@given(st.dictionaries(st.sampled_from(EXPERIMENT_KEYS), yaml_values, max_size=6),
       st.booleans())
def test_fuzzed_experiment_files_load_or_name_the_key(tmp_path_factory, data, valid_cells):
    if valid_cells:   # reach the deeper checks more often
        data = {"platform": str(CONFIG_DIR / "defaults.yaml"),
                "cells": [{"base": "FIFO"}, {"base": "SRTF-Est", "detector": "EvalStop-2"}],
                **{k: v for k, v in data.items() if k not in ("cells", "platform")}}
    path = tmp_path_factory.mktemp("exp") / "x.yaml"
    path.write_text(yaml.safe_dump(data))
    try:
        load_experiment(path)
    except ConfigError as exc:
        assert_one_line_naming(exc)


@FAST
@given(st.binary(max_size=60))
def test_fuzzed_bytes_as_an_experiment_file(tmp_path_factory, raw):
    path = tmp_path_factory.mktemp("raw") / "x.yaml"
    path.write_bytes(raw)
    try:
        load_experiment(path)
    except ConfigError as exc:
        assert_one_line_naming(exc)


TINY = f"""
name: tiny
platform: {CONFIG_DIR / 'defaults.yaml'}
overrides: {{workload.n_jobs: 8, cluster.gpus: 16}}
seeds: [1]
cells:
  - {{base: SRTF-Est, detector: none}}
  - {{base: SRTF-Est, detector: EvalStop-2}}
"""


def as_settings(fuzzed: dict[str, object]) -> list[str]:
    """Overrides as the --set strings a user would type (values in YAML flow style)."""
    return [f"{k}={yaml.safe_dump(v, default_flow_style=True).strip().removesuffix('...')}"
            .strip() for k, v in fuzzed.items()]


@settings(FAST, max_examples=10)
@given(st.one_of(st.lists(setting_text, min_size=1, max_size=2),
                 overrides(RUN_KEYS, most=1).map(as_settings)))
def test_fuzzed_cli_runs_exit_0_with_finite_results_or_2_in_one_line(tmp_path_factory, capsys,
                                                                     settings_list):
    root = tmp_path_factory.mktemp("cli")
    (root / "tiny.yaml").write_text(TINY)
    argv = ["run", str(root / "tiny.yaml"), "--out", str(root / "out")]
    for item in [*settings_list, "workload.n_jobs=8", "evals.interval=0.2"]:
        argv += ["--set", item]
    code = cli.main(argv)
    err = capsys.readouterr().err.strip()
    event(f"exit {code}")
    if code == 2:
        assert "Traceback" not in err and len(err.splitlines()) == 1, err
        return
    assert code == 0
    import pandas as pd

    folders = sorted((root / "out").glob("tiny*/runs.csv"))   # --set variants get their own
    assert len(folders) == 1, folders
    runs = pd.read_csv(folders[0])
    assert len(runs) == 2
    assert runs[["jct", "makespan", "n_stopped"]].map(math.isfinite).all().all()


def test_the_field_pattern_accepts_the_shapes_errors_take():
    for text in ("cluster.gpus: x", "cells[0].overrides: x", "x.yaml: cells[1]: x",
                 "--set 'a=[': not valid", "e2: cell FIFO: x", "workload.mix: x"):
        assert NAMED.match(text), text
    with pytest.raises(AssertionError):
        assert_one_line_naming(ValueError("something went wrong"))
