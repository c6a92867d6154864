"""Bad input at construction: config dataclasses, platform and experiment files (issue 13).

Each input the hardening issue lists gets its clean ConfigError (or, for a valid value, success).
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass

import pytest

from evalstop_gym import config as config_module
from evalstop_gym.config import (
    CONFIG_DIR,
    ClusterConfig,
    ConfigError,
    EvalSchedule,
    JobTypeConfig,
    Mix,
    NoiseConfig,
    SimConfig,
    Validated,
    WorkloadConfig,
    _f,
    load_sim_config,
    parse_yaml,
)
from evalstop_gym.experiment import load_experiment

NAN, INF = math.nan, math.inf


@pytest.mark.parametrize("make, message", [
    (lambda: NoiseConfig(sigma=NAN), r"NoiseConfig.sigma: expected a finite number, got nan"),
    (lambda: Mix(0.5, 0.5, 0.5), r"Mix: lora \+ dpo \+ rlhf must sum to 1, got 1.5"),
    (lambda: WorkloadConfig(hacking_fraction=2.0), r"hacking_fraction: 2.0 is outside .*\[0, 1\]"),
    (lambda: EvalSchedule(interval=0), r"EvalSchedule.interval: 0(\.0)? is outside .*\(0, 1\]"),
    (lambda: ClusterConfig(gpus=NAN), r"ClusterConfig.gpus: expected a finite whole number"),
    (lambda: ClusterConfig(gpus=INF), r"ClusterConfig.gpus: expected a finite whole number"),
    (lambda: ClusterConfig(gpus=True), r"ClusterConfig.gpus: expected a whole number, got True"),
    (lambda: ClusterConfig(gpus=2.5), r"ClusterConfig.gpus: expected a whole number, got 2.5"),
    (lambda: ClusterConfig(gpus=10**12), r"gpus: 1000000000000 is above the supported maximum "
                                         r"1,000,000 \(more GPUs than any cluster built\)"),
    (lambda: WorkloadConfig(n_tenants=10**12), r"n_tenants: .* above the supported maximum"),
    (lambda: WorkloadConfig(n_jobs=NAN), r"WorkloadConfig.n_jobs: expected a finite whole"),
    (lambda: JobTypeConfig(gpus=(4, 2.5)), r"JobTypeConfig.gpus: expected a whole number"),
    (lambda: SimConfig(cluster=5), r"^cluster: expected a ClusterConfig \(a section\), got 5"),
    (lambda: NoiseConfig(model="cauchy"), r"NoiseConfig.model: 'cauchy' is not one of"),
])
def test_direct_construction_is_validated(make, message):
    with pytest.raises(ConfigError, match=message):
        make()


def test_construction_normalises_what_it_accepts():
    assert ClusterConfig(gpus=8.0).gpus == 8 and type(ClusterConfig(gpus=8.0).gpus) is int
    assert NoiseConfig(sigma=1).sigma == 1.0 and type(NoiseConfig(sigma=1).sigma) is float
    assert JobTypeConfig(gpus=[1, 2]).gpus == (1, 2)
    assert dataclasses.replace(NoiseConfig(), sigma=0.1).sigma == 0.1
    with pytest.raises(ConfigError, match="sigma"):
        dataclasses.replace(NoiseConfig(), sigma=-1.0)


def test_every_config_dataclass_validates_itself():
    """A section added without the Validated base would escape every check."""
    classes = [obj for obj in vars(config_module).values()
               if isinstance(obj, type) and dataclasses.is_dataclass(obj)
               and obj.__module__.startswith(f"{config_module.__name__}.")]
    assert len(classes) >= 15
    assert all(issubclass(cls, Validated) for cls in classes), \
        [c.__name__ for c in classes if not issubclass(c, Validated)]


def test_a_new_field_is_checked_from_its_metadata_alone():
    @dataclass(frozen=True)
    class NewSection(Validated):
        count: int = _f(2, 1, None, "things", cap=10, why="ten is plenty")
        share: float = _f(0.5, 0, 1, "a fraction")

    assert NewSection(count=3).count == 3
    with pytest.raises(ConfigError, match=r"NewSection.count: 11 is above .* 10 \(ten is plenty\)"):
        NewSection(count=11)
    with pytest.raises(ConfigError, match=r"NewSection.share: expected a finite number"):
        NewSection(share=NAN)


@pytest.mark.parametrize("overrides, message", [
    ({"cluster.gpus": NAN}, r"^cluster.gpus: expected a finite whole number, got nan$"),
    ({"workload.n_jobs": 10**12}, r"^workload.n_jobs: .* above the supported maximum 10,000,000"),
    ({"workload.n_jobs": 5_000_000}, r"^workload.n_jobs: 5,000,000 jobs x 9 check points .* "
                                     r"GiB of memory \(estimated\); a run is limited to 8 GiB"),
    ({"evals.interval": 1e-9}, r"^evals.interval: 200 jobs x 1,000,000,002 check points"),
    ({"workload.arrival_rate_per_min": 1e-300}, r"^workload.arrival_rate_per_min: 1e-300 spreads"
                                                r" 200 arrivals over about 2e\+302 minutes"),
    ({"cluster.gpus": 2}, r"^cluster.gpus: a dpo job needs up to 4 GPUs \(job_types.dpo.gpus\) "
                          r"but the cluster has 2"),
    ({"job_types.rlhf.gpus": [4, 100]}, r"^cluster.gpus: a rlhf job needs up to 100 GPUs"),
    ({"cluster.kinds": [{"name": "a", "count": 32, "speed": 1.0},
                        {"name": "b", "count": 32, "speed": 2.0}],
      "job_types.rlhf.gpus": [4, 40]}, r"^cluster.gpus: a rlhf job needs up to 40 GPUs .* one "
                                       r"GPU kind has 32"),
    ({"trace.start": "2020-13-01 00:00:00"},
     r"^trace.start: '2020-13-01 00:00:00' is not 'YYYY-MM-DD HH:MM:SS'"),
    ({"noise": 5}, r"^noise: expected a section \(mapping\), got 5"),
])
def test_loaded_configs_refuse_with_the_field(overrides, message):
    with pytest.raises(ConfigError, match=message):
        load_sim_config(overrides=overrides)


def test_a_job_type_that_never_occurs_may_be_larger_than_the_cluster():
    cfg = load_sim_config(overrides={"workload.mix": {"lora": 0.5, "dpo": 0.5, "rlhf": 0.0},
                                     "cluster.gpus": 4})
    assert cfg.cluster.gpus == 4


def test_a_valid_datetime_from_yaml_is_accepted():
    value = parse_yaml("2017-11-07 00:00:00", "--set trace.start")
    cfg = load_sim_config(overrides={"trace.start": value})
    assert cfg.trace.start == "2017-11-07 00:00:00"


@pytest.mark.parametrize("text, message", [
    ("[", r"^where: not valid YAML: expected the node content.* at line 1, column 2$"),
    ("2020-13-01 00:00:00", r"^where: not valid YAML: month must be in 1..12$"),
    ("{a: 1, a: 2}", r"^where: not valid YAML: key 'a' given twice at line 1, column 8$"),
])
def test_yaml_problems_are_one_line(text, message):
    with pytest.raises(ConfigError, match=message):
        parse_yaml(text, "where")


def test_yaml_reads_exponents_without_a_dot_as_numbers():
    assert parse_yaml("1e-9", "x") == 1e-9 and parse_yaml("1E+12", "x") == 1e12
    assert parse_yaml("6214e9", "x") == "6214e9"   # a Philly cluster id stays text


def _write(tmp_path, name, body: str | bytes):
    path = tmp_path / name
    path.write_bytes(body if isinstance(body, bytes) else body.encode())
    return path


PLATFORM = f"platform: {CONFIG_DIR / 'defaults.yaml'}\n"
CELLS = "cells:\n  - {base: FIFO}\n  - {base: SRTF-Est}\n"


@pytest.mark.parametrize("body, message", [
    (b"\xff\xfe\x00binary", r"x.yaml: not UTF-8 text \(byte 0\)"),
    (PLATFORM + "cells: [\n", r"x.yaml: not valid YAML: .* at line 3, column 1"),
    (PLATFORM + "seeds: [1]\nseeds: [2]\n" + CELLS, r"x.yaml: not valid YAML: key 'seeds' "
                                                     r"given twice at line 3"),
    ("- just\n- a list\n", r"x.yaml: expected a mapping at the top level, got list"),
    ("platform: 5\n" + CELLS, r"^x.yaml: platform: expected printable text, got 5$"),
    (PLATFORM + "overrides: [1, 2]\n" + CELLS, r"^x.yaml: overrides: expected a mapping"),
    (PLATFORM + "overrides: abc\n" + CELLS, r"^x.yaml: overrides: expected a mapping"),
    (PLATFORM + "overrides: {cluster.gpus: .nan}\n" + CELLS,
     r"^x.yaml: cluster.gpus: expected a finite whole number"),
    (PLATFORM + "extra_references: [1]\n" + CELLS, r"^x.yaml: extra_references: expected a "
                                                    r"mapping"),
    (PLATFORM + "extra_references: {a: 1}\n" + CELLS, r"^x.yaml: extra_references.a: expected a"
                                                       r" mapping with keys among"),
    (PLATFORM + "cells: [1]\n", r"^x.yaml: cells\[0\]: expected a mapping with at least 'base'"),
    (PLATFORM + "cells: {base: FIFO}\n", r"^x.yaml: cells: expected a non-empty list"),
    (PLATFORM + "cells:\n  - {base: FIFO, overrides: [1, 2]}\n",
     r"^x.yaml: cells\[0\].overrides: expected a mapping"),
    (PLATFORM + "cells:\n  - {base: [FIFO]}\n", r"^x.yaml: cells\[0\].base: expected printable"),
    (PLATFORM + "sweep: {param: noise.sigma, values: 5}\n" + CELLS,
     r"^x.yaml: sweep.values: expected a non-empty list, got 5$"),
    (PLATFORM + "sweep: [1]\n" + CELLS,
     r"^x.yaml: sweep: expected a mapping with at least 'param', 'values'"),
    (PLATFORM + "sweep: {param: noise.sigma, values: [0.1, [2]]}\n" + CELLS,
     r"^x.yaml: sweep.values\[1\]: expected a number, text or nothing"),
    (PLATFORM + "sweep: {param: p, values: [1], overrides: [5]}\n" + CELLS,
     r"^x.yaml: sweep.overrides\[0\]: expected a mapping"),
    (PLATFORM + "name: ../../x\n" + CELLS, r"^x.yaml: name: '../../x' is not a plain folder name"),
    (PLATFORM + "name: /tmp/x\n" + CELLS, r"^x.yaml: name: '/tmp/x' is not a plain folder name"),
    (PLATFORM + "name: 5\n" + CELLS, r"^x.yaml: name: 5 is not a plain folder name"),
    (PLATFORM + "cells:\n  - {base: FIFO}\n  - {base: FIFO}\n",
     r"^x: cells\[0\] and cells\[1\] are the same cell 'FIFO'"),
    (PLATFORM + "reference: {base: SJF-Est}\n" + CELLS,
     r"^x.yaml: reference: \{'base': 'SJF-Est'\} matches no cell"),
    (PLATFORM + "extra_references: {b: {base: FIFO, detector: EvalStop-2}}\n" + CELLS,
     r"^x.yaml: extra_references.b: .* matches no cell"),
    (PLATFORM + "seeds: [1, 1]\n" + CELLS, r"^x.yaml: seeds: expected .* distinct"),
    (PLATFORM + "overrides: {cluster.gpus: 2}\n" + CELLS, r"^x.yaml: cluster.gpus: a dpo job"),
    (PLATFORM + "cells:\n  - {base: FIFO, overrides: {cluster.gpus: 2}}\n",
     r"^x: cell FIFO: cluster.gpus: a dpo job needs up to 4 GPUs"),
])
def test_experiment_files_name_the_file_and_key(tmp_path, body, message):
    with pytest.raises(ConfigError, match=message):
        load_experiment(_write(tmp_path, "x.yaml", body))


def test_a_reference_matching_a_cell_and_a_labelled_duplicate_are_fine(tmp_path):
    body = (PLATFORM + "reference: {base: FIFO}\ncells:\n  - {base: FIFO}\n"
            "  - {base: FIFO, label: again}\n")
    exp = load_experiment(_write(tmp_path, "x.yaml", body))
    assert [c.key for c in exp.cells] == ["FIFO", "again"]


@pytest.mark.parametrize("files, message", [
    ({"a.yaml": "extends: b.yaml\n", "b.yaml": "extends: a.yaml\n"},
     r"^a.yaml: extends: cycle a.yaml -> b.yaml -> a.yaml$"),
    ({"a.yaml": "extends: a.yaml\n"}, r"^a.yaml: extends: cycle a.yaml -> a.yaml$"),
    ({"a.yaml": "extends: 5\n"}, r"^a.yaml: extends: expected a file name, got 5$"),
    ({"a.yaml": f"extends: {CONFIG_DIR / 'defaults.yaml'}\noverrides: [1]\n"},
     r"^a.yaml: overrides: expected a mapping of dotted keys"),
    ({"a.yaml": f"extends: {CONFIG_DIR / 'defaults.yaml'}\noverrides: oops\n"},
     r"^a.yaml: overrides: expected a mapping of dotted keys"),
    ({"a.yaml": "cluster: {gpus: .inf}\n"}, r"^a.yaml: cluster.gpus: expected a finite whole"),
])
def test_platform_files_name_the_file(tmp_path, files, message):
    for name, body in files.items():
        _write(tmp_path, name, body)
    with pytest.raises(ConfigError, match=message):
        load_sim_config(tmp_path / "a.yaml")


@pytest.mark.parametrize("overrides", [[1], "noise.sigma=1", {1: 2}])
def test_overrides_must_be_a_mapping_of_dotted_keys(overrides):
    with pytest.raises(ConfigError, match=r"^overrides: "):
        SimConfig().with_overrides(overrides)


def test_an_infeasible_platform_built_in_python_fails_before_the_run():
    """simulate and gym.make check a SimConfig built directly as load_sim_config checks a file."""
    import gymnasium as gym

    from evalstop_gym.config import ClusterConfig, SimConfig
    from evalstop_gym.simulate import simulate

    with pytest.raises(ConfigError, match=r"^cluster.gpus: a dpo job needs up to 4 GPUs"):
        simulate(SimConfig(cluster=ClusterConfig(gpus=2)), "SRTF-Est", 1)
    with pytest.raises(ConfigError, match=r"^cluster.gpus: a dpo job needs up to 4 GPUs"):
        gym.make("EvalStopCluster-v0", config="defaults", **{"cluster.gpus": 2})
