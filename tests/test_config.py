"""Bad configuration stops with a message naming the field and the allowed range."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from evalstop_gym.config import CONFIG_DIR, ConfigError, load_sim_config
from evalstop_gym.experiment import load_experiment


@pytest.mark.parametrize("overrides, message", [
    ({"workload.hacking_fraction": 1.5}, r"workload.hacking_fraction: 1.5 is outside .*\[0, 1\]"),
    ({"cluster.gpus": -4}, r"cluster.gpus: -4 is outside the allowed range \[1, inf\)"),
    ({"noise.sigma": -0.1}, r"noise.sigma: -0.1 is outside the allowed range \[0, inf\)"),
    ({"workload.mix": {"lora": 0.5, "dpo": 0.5, "rlhf": 0.5}}, r"workload.mix: .* sum to 1"),
    ({"evals.interval": 0}, r"evals.interval: 0(\.0)? is outside the allowed range \(0, 1\]"),
    ({"noise.model": "cauchy"}, r"noise.model: 'cauchy' is not one of"),
    ({"cluster.gpus": 2.5}, r"cluster.gpus: expected a whole number"),
    ({"job_types.rlhf.duration_min": [300, 60]}, r"duration_min: low 300.0 is above high 60.0"),
    ({"workload.mixx": 1}, r"workload.mixx: unknown key"),
])
def test_bad_values_name_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_sim_config(overrides=overrides)


def test_unknown_yaml_key_is_rejected(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("cluster:\n  gpus: 8\n  gpuz: 9\n")
    with pytest.raises(ConfigError, match=r"cluster: unknown key\(s\) gpuz; allowed: gpus"):
        load_sim_config(path)


def test_defaults_load_and_describe_e2():
    cfg = load_sim_config()
    assert cfg.cluster.gpus == 64 and cfg.workload.n_jobs == 200
    assert cfg.workload.mix.rlhf == pytest.approx(0.8)


def test_experiment_errors_name_the_cell(tmp_path):
    path = tmp_path / "exp.yaml"
    path.write_text(f"name: x\nplatform: {CONFIG_DIR / 'defaults.yaml'}\n"
                    "cells:\n  - {base: FIFO, detectr: EvalStop-2}\n")
    with pytest.raises(ConfigError, match=r"cells\[0\]: unknown key\(s\) detectr"):
        load_experiment(path)
    with pytest.raises(ConfigError, match="no file"):
        load_experiment("e99")


def test_a_platform_can_extend_another(tmp_path):
    child = tmp_path / "child.yaml"
    child.write_text(f"extends: {CONFIG_DIR / 'defaults.yaml'}\n"
                     "overrides: {noise.sigma: 0.07}\n")
    assert load_sim_config(child).noise.sigma == 0.07
    assert load_sim_config(child).cluster == load_sim_config().cluster
    child.write_text(f"extends: {CONFIG_DIR / 'defaults.yaml'}\nnoise: {{sigma: 0.07}}\n")
    with pytest.raises(ConfigError, match="takes only 'overrides'"):
        load_sim_config(child)


def test_the_dataclass_defaults_are_the_defaults_file():
    from evalstop_gym.config import SimConfig

    assert SimConfig() == load_sim_config()


def test_a_platform_is_named_by_experiment_file_or_platform_file():
    from evalstop_gym.experiment import load_experiment, platform_config

    assert platform_config("e7") == load_experiment("e7").config
    assert platform_config(CONFIG_DIR / "gao_faithful.yaml").curves.rlhf_hacking.collapse == (
        1.0, 1.0)
    assert platform_config("defaults") == load_sim_config()


def test_a_subnormal_eval_interval_is_refused_in_one_line():
    """1 / 2e-313 overflows to infinity; the memory check still names the field (found by
    test_fuzz_inputs: it raised OverflowError)."""
    with pytest.raises(ConfigError, match=r"^evals.interval: 200 jobs x [\d,]+ check points"):
        load_sim_config(overrides={"evals.interval": 2.2250738585e-313})



# A run's digest as the runner computes it, and the config's part of it, in a fresh process.
DIGEST = """
import hashlib, json, evalstop_gym
from evalstop_gym.benchmarks.sweep import runner
from evalstop_gym.config import CONFIG_DIR, to_dict
from evalstop_gym.experiment import load_experiment
spec = runner.specs(load_experiment("e2"), seeds=[42])[1]
blob = json.dumps(to_dict(spec.config), sort_keys=True, default=str)
print(json.dumps({"package": evalstop_gym.__file__, "configs": str(CONFIG_DIR),
                  "config": hashlib.sha256(blob.encode()).hexdigest(), "digest": spec.digest}))
"""


@pytest.fixture(scope="module")
def digests(tmp_path_factory):
    """e2's first seed's EvalStop-2 run, planned from the checkout (editable) and from the
    package laid out as a wheel installs it (policies/, benchmarks/, configs/ inside)."""
    from installed_layout import installed_layout

    wheel = installed_layout(tmp_path_factory.mktemp("wheel"))
    out = {}
    for name, path in (("editable", ""), ("wheel", str(wheel))):
        env = {**os.environ, "PYTHONPATH": path}
        done = subprocess.run([sys.executable, "-c", DIGEST], cwd=tmp_path_factory.mktemp(name),
                              env=env, capture_output=True, text=True, timeout=300, check=True)
        out[name] = json.loads(done.stdout)
    assert out["wheel"]["package"].startswith(str(wheel))        # the layouts really differ
    assert out["editable"]["configs"] != out["wheel"]["configs"]
    return out


def test_the_config_enters_a_run_digest_the_same_under_a_wheel(digests):
    """No install path (CONFIG_DIR, a platform file's place) is part of the config."""
    assert digests["editable"]["config"] == digests["wheel"]["config"]


def test_a_run_digest_is_the_same_under_an_editable_install_and_a_wheel(digests):
    assert digests["editable"]["digest"] == digests["wheel"]["digest"]
