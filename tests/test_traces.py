"""Trace replay: the synthetic generator is unchanged; Philly windows become jobs."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from evalstop_gym.config import ConfigError, JobTypeConfig, SimConfig, load_sim_config
from evalstop_gym.sim.curves import eval_noise, gao_hacking, saturating
from evalstop_gym.sim.workload import JOB_TYPES, eval_points
from evalstop_gym.workloads import generate_workload

SAMPLE = Path(__file__).parent / "data" / "philly_sample.csv"


def _reference_curve(config: SimConfig, job_type: str, is_hacking: bool, points: np.ndarray,
                     rng: np.random.Generator) -> tuple[np.ndarray, float, tuple[float, ...]]:
    """The per-job curve draw as it was written first (a frozen copy, one parameter per call)."""
    if is_hacking:
        c = config.curves.rlhf_hacking
        params = (rng.uniform(*c.start), rng.uniform(*c.gain), rng.uniform(*c.peak_progress),
                  rng.uniform(*c.collapse))
        return gao_hacking(points, *params), params[2], params
    c = {"lora": config.curves.lora, "dpo": config.curves.dpo,
         "rlhf": config.curves.rlhf_healthy}[job_type]
    params = (rng.uniform(*c.start), rng.uniform(*c.gain), rng.uniform(*c.time_constant))
    return saturating(points, *params), 1.0, params


def _reference_workload(config: SimConfig, seed: int) -> list[tuple]:
    """generate_workload as it was first written, one job and one draw at a time: an oracle.

    One intended change since: observed scores are clipped to the score range [0, 1].
    """
    wl = config.workload
    arrivals_rng, sizes_rng, curves_rng, noise_rng = (
        np.random.default_rng(s) for s in np.random.SeedSequence(seed).spawn(4))
    n = wl.n_jobs
    arrivals = np.cumsum(arrivals_rng.exponential(1.0 / wl.arrival_rate_per_min, n))
    tenants = arrivals_rng.integers(0, wl.n_tenants, n)
    mix = np.array([wl.mix.lora, wl.mix.dpo, wl.mix.rlhf])
    types = arrivals_rng.choice(3, size=n, p=mix / mix.sum())
    hacking = curves_rng.random(n) < wl.hacking_fraction
    points = eval_points(config.evals.interval, config.evals.final)
    noise = eval_noise(noise_rng, (n, len(points)), config.noise)
    out = []
    for i in range(n):
        job_type = JOB_TYPES[types[i]]
        profile: JobTypeConfig = getattr(config.job_types, job_type)
        duration = float(sizes_rng.uniform(*profile.duration_min))
        gpus = int(sizes_rng.integers(profile.gpus[0], profile.gpus[1] + 1))
        is_hacking = bool(job_type == "rlhf" and hacking[i])
        true_scores, peak, params = _reference_curve(config, job_type, is_hacking, points,
                                                     curves_rng)
        lc = profile.loss
        loss_params = (curves_rng.uniform(*lc.initial), curves_rng.uniform(*lc.floor_fraction),
                       curves_rng.uniform(*lc.plateau_progress), curves_rng.uniform(*lc.residual))
        out.append((i, int(tenants[i]), job_type, gpus, float(arrivals[i]),
                    profile.duration_estimate, duration, is_hacking, peak, points.tobytes(),
                    true_scores.tobytes(), np.clip(true_scores + noise[i], 0.0, 1.0).tobytes(),
                    profile.eval_minutes, loss_params, params))
    return out


def _as_tuples(jobs) -> list[tuple]:
    return [(j.job_id, j.tenant, j.job_type, j.gpus, j.arrival, j.duration_estimate, j.duration,
             j.is_hacking, j.peak_progress, j.eval_points.tobytes(), j.eval_true.tobytes(),
             j.eval_observed.tobytes(), j.eval_minutes, j.loss_params, j.curve_params)
            for j in jobs]


@pytest.mark.parametrize("overrides", [{}, {"noise.model": "ar1", "noise.sigma": 0.1},
                                       {"workload.mix": {"lora": 0.5, "dpo": 0.3, "rlhf": 0.2},
                                        "evals.interval": 0.05}])
@pytest.mark.parametrize("seed", [42, 7])
def test_synthetic_workload_is_bit_identical_to_the_reference(overrides, seed):
    cfg = load_sim_config(overrides=overrides)
    assert _as_tuples(generate_workload(cfg, seed)) == _reference_workload(cfg, seed)


def philly(**trace) -> SimConfig:
    base = {"path": str(SAMPLE), "cluster": "6214e9", "start": "2017-11-07 00:00:00"}
    return load_sim_config(overrides={"workload.source": "philly", "trace": {**base, **trace}})


def test_sample_trace_loads_sorted():
    from evalstop_gym.traces.philly import load_trace

    rows = load_trace(SAMPLE)
    assert len(rows.submit) == 297
    assert np.all(np.diff(rows.submit) >= 0)
    assert set(rows.cluster.tolist()) == {"6214e9", "11cb48"}


def test_philly_window_becomes_typed_capped_jobs():
    jobs = generate_workload(philly(), seed=1)
    assert len(jobs) == 197
    assert [j.job_id for j in jobs] == list(range(197))
    arrivals = [j.arrival for j in jobs]
    assert arrivals == sorted(arrivals) and 0 <= arrivals[0] and arrivals[-1] < 24 * 60
    types = {t: sum(j.job_type == t for j in jobs) for t in ("lora", "dpo", "rlhf")}
    assert types == {"lora": 56, "dpo": 17, "rlhf": 124}
    assert all(1 <= j.gpus <= 8 for j in jobs)
    assert not any(j.is_hacking for j in jobs if j.job_type != "rlhf")
    assert any(j.is_hacking for j in jobs)


def test_a_replayed_window_honours_exact_counts_and_corpus_curves():
    """The trace gives arrivals, sizes and types; labels and curves follow the workload's
    `counts` and `curves.source` exactly as a synthetic workload's do."""
    from evalstop_gym.sim.workload import exact_counts

    exact = philly().with_overrides({"workload.counts": "exact"})
    jobs = generate_workload(exact, seed=1)
    rlhf = [j for j in jobs if j.job_type == "rlhf"]
    wanted = exact_counts(len(rlhf), [exact.workload.hacking_fraction,
                                      1 - exact.workload.hacking_fraction])[0]
    assert sum(j.is_hacking for j in rlhf) == wanted
    corpus = generate_workload(philly().with_overrides({"curves.source": "corpus"}), seed=1)
    assert [(j.arrival, j.gpus, j.job_type) for j in corpus] == [
        (j.arrival, j.gpus, j.job_type) for j in jobs]
    assert all(len(j.curve_params) == 2 for j in corpus)   # (family, run): real curves


def test_window_scaling_and_type_mapping():
    from evalstop_gym.traces.philly import job_type_of

    cfg = philly().trace
    assert job_type_of(1800, 1, cfg) == "lora"        # 0.5 GPU-hours
    assert job_type_of(1801, 1, cfg) == "dpo"
    assert job_type_of(4 * 3600 + 1, 1, cfg) == "rlhf"
    assert job_type_of(60, 4, cfg) == "rlhf"          # many GPUs: RLHF whatever the length
    full, half = generate_workload(philly(), 3), generate_workload(philly(time_scale=0.5), 3)
    assert half[5].arrival == pytest.approx(full[5].arrival / 2)
    capped = generate_workload(philly(gpu_scale=4.0, gpu_cap=2, max_jobs=20, hours=6.0), 3)
    assert len(capped) <= 20 and all(j.gpus == 2 for j in capped)
    assert all(j.duration >= 1.0 for j in full)


def test_seed_changes_curves_not_the_trace():
    a, b = generate_workload(philly(), 1), generate_workload(philly(), 2)
    assert [(j.arrival, j.duration, j.gpus, j.job_type) for j in a] == \
        [(j.arrival, j.duration, j.gpus, j.job_type) for j in b]
    assert any(x.eval_observed[0] != y.eval_observed[0] for x, y in zip(a, b, strict=True))


def test_simulate_runs_unchanged_on_a_replayed_window():
    import evalstop_gym.policies as policies
    from evalstop_gym.simulate import simulate

    result = simulate(philly(hours=6.0), policies.make_policy("SRTF-Est", "EvalStop-2"), 42)
    assert result.metrics["n_stopped"] > 0 and result.metrics["jct"] > 0


@pytest.mark.parametrize("trace, message", [
    ({"cluster": "nope"}, "trace.cluster: 'nope' is not in the trace"),
    ({"start": "2016-01-01 00:00:00"}, "no jobs in cluster 6214e9"),
    ({"start": "07/11/2017"}, r"trace.start: .* is not 'YYYY-MM-DD HH:MM:SS'"),
    ({"hours": 0}, r"trace.hours: 0.0 is outside the allowed range \(0, inf\)"),
    ({"gpu_cap": 0}, r"trace.gpu_cap: 0 is outside the allowed range \[1, inf\)"),
    ({"lora_max_gpu_hours": 5.0}, "trace.lora_max_gpu_hours: 5 is above"),
    ({"colour": 1}, "trace: unknown key"),
])
def test_trace_config_errors_name_the_field(trace, message):
    with pytest.raises(ConfigError, match=message):
        generate_workload(philly(**trace), 1)


def test_workload_source_is_validated():
    with pytest.raises(ConfigError, match="workload.source: 'csv' is not one of synthetic, philly"):
        load_sim_config(overrides={"workload.source": "csv"})


@pytest.mark.parametrize("body, message", [
    ("timestamp,duration,num_gpus,cluster\n2017-11-07 01:00:00,abc,1,c\n", "line 2: cannot parse"),
    ("timestamp,duration,num_gpus,cluster\n2017-11-07 01:00:00,-5,1,c\n", "line 2: duration"),
    ("timestamp,duration,num_gpus,cluster\n2017-11-07 01:00:00,5,0,c\n", "line 2: num_gpus"),
    ("timestamp,duration,num_gpus,cluster\n2017-11-07 01:00:00,5,1,c\nyesterday,5,1,c\n",
     "line 3: timestamp 'yesterday'"),
    ("timestamp,duration,cluster\n", "line 1: missing column"),
    ("timestamp,duration,num_gpus,cluster\n", "no jobs after the header"),
])
def test_trace_file_errors_name_file_and_line(tmp_path, body, message):
    from evalstop_gym.traces.philly import TraceError, load_trace

    path = tmp_path / "trace.csv"
    path.write_text(body)
    with pytest.raises(TraceError, match=message):
        load_trace(path)


def test_missing_trace_file_says_what_to_do(tmp_path):
    from evalstop_gym.traces.philly import TraceError

    with pytest.raises(TraceError, match="trace file not found; set trace.path"):
        generate_workload(philly(path=str(tmp_path / "absent.csv")), 1)
