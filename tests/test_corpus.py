"""The shipped real-curve corpus, its labels from test curves, and `curves.source: corpus`."""

from __future__ import annotations

import json

import numpy as np
import pytest

from evalstop_gym.config import CONFIG_DIR, ConfigError, load_sim_config
from evalstop_gym.policies import parse_policy
from evalstop_gym.simulate import simulate
from evalstop_gym.traces.corpus import at_progress, corpus_file, label_run, load_family
from evalstop_gym.workloads import generate_workload

PROVENANCE = corpus_file("supervised").parent / "provenance.json"


def corpus_config(**overrides):
    return load_sim_config(CONFIG_DIR / "defaults.yaml", overrides={
        "curves.source": "corpus", "workload.n_jobs": 80, **overrides})


def test_shipped_families_meet_the_sizes_and_span_the_knobs() -> None:
    sup, rew = load_family("supervised"), load_family("reward")
    assert len(sup) >= 60 and len(rew) >= 40
    assert all(len(r.steps) >= 50 for r in sup + rew)
    for runs in (sup, rew):           # both labels occur in both families
        assert 0 < sum(r.declines for r in runs) < len(runs)
    settings = json.loads(PROVENANCE.read_text())["families"]["supervised"]["settings"]
    assert {s["schedule"] for s in settings} == {"constant", "step", "cosine", "warmup_decay",
                                                 "one_cycle"}
    assert {s["optimizer"] for s in settings} == {"sgd_momentum", "adam", "adamw"}
    assert {s["large"] for s in settings} == {s["regularised"] for s in settings} == {True, False}
    assert sum(p.stat().st_size for p in PROVENANCE.parent.iterdir()) < 3_000_000


def test_labels_come_from_the_test_curve() -> None:
    rng = np.random.default_rng(0)
    steps = np.arange(1, 61) * 10
    rise = 0.5 + 0.4 * (1 - np.exp(-steps / 150.0)) + 0.004 * rng.standard_normal(60)
    peaked = np.where(steps < 300, rise, rise - 0.0008 * (steps - 300))
    assert label_run(rise, steps, 600)[0] is False
    declines, peak, drop = label_run(peaked, steps, 600)
    assert declines and 0.4 <= peak <= 0.6 and drop > 0.1
    flat_noise = 0.8 + 0.02 * rng.standard_normal(60)   # wobbles, but no more than its noise
    assert label_run(flat_noise, steps, 600)[0] is False


def test_jobs_draw_corpus_curves_with_their_labels_and_recorded_noise() -> None:
    config = corpus_config(**{"evals.interval": 0.05})
    jobs = generate_workload(config, 3)
    by_id = {r.run_id: r for fam in ("supervised", "reward") for r in load_family(fam)}
    families = {"rlhf": "reward", "dpo": "supervised", "lora": "supervised"}
    for job in jobs:
        fam = families[job.job_type]
        run = load_family(fam)[int(job.curve_params[1])]
        assert run.run_id in by_id and run.family == fam
        idx = at_progress(run, job.eval_points)
        assert np.array_equal(job.eval_observed, run.eval_score[idx])   # no extra noise
        assert np.array_equal(job.eval_true, run.test_score[idx])
        assert job.is_hacking == run.declines
    assert {j.is_hacking for j in jobs} == {True, False}
    again = generate_workload(config, 3)
    assert all(np.array_equal(a.eval_observed, b.eval_observed) for a, b in
               zip(jobs, again, strict=True))


def test_added_noise_only_when_asked() -> None:
    recorded = generate_workload(corpus_config(), 5)
    added = generate_workload(corpus_config(**{"curves.corpus_noise": "added"}), 5)
    assert any(not np.array_equal(a.eval_observed, b.eval_observed)
               for a, b in zip(recorded, added, strict=True))


def test_native_density_maps_each_corpus_eval_to_one_job_eval() -> None:
    jobs = generate_workload(corpus_config(**{"evals.interval": 1 / 60}), 1)
    job = next(j for j in jobs if j.job_type == "rlhf")
    run = load_family("reward")[int(job.curve_params[1])]
    assert len(job.eval_points) == len(run.steps)
    assert np.array_equal(at_progress(run, job.eval_points), np.arange(len(run.steps)))


def test_corpus_workload_gives_the_same_run_on_both_engines() -> None:
    config = corpus_config(**{"evals.interval": 0.05})
    policy = "DeclineTest-0.05+SRTF-Est"
    ref = simulate(config, parse_policy(policy), 2, engine="python")
    nat = simulate(config, parse_policy(policy), 2, engine="native")
    assert ref.metrics["recall"] > 0
    assert repr(ref.metrics) == repr(nat.metrics) and repr(ref.records) == repr(nat.records)


@pytest.mark.parametrize("field,value", [("curves.source", "real"),
                                         ("curves.corpus_rlhf", "vision"),
                                         ("curves.corpus_noise", "none")])
def test_bad_corpus_settings_name_the_field(field: str, value: str) -> None:
    with pytest.raises(ConfigError, match=field.split(".")[1]):
        corpus_config(**{field: value})
