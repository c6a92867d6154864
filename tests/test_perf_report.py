"""The performance benchmark's plumbing: perf.json's keys and the tables, on a quick stand-in
for the slow parts (the real figures come from `python -m evalstop_gym.benchmarks.perf.engine`)."""

from __future__ import annotations

import argparse
import json

from evalstop_gym.benchmarks.perf import engine as perf


def test_perf_json_has_the_keys_issue_6_names(tmp_path, monkeypatch, capsys):
    def small_scaling(quick, timeout, engine="auto"):
        rows = [perf.scale_child(60, 16, engine), perf.scale_child(600, 64, engine)]
        rows[1]["growth_vs_prev"] = rows[1]["wall_s"] / rows[0]["wall_s"]
        rows[1]["cpu_growth_vs_prev"] = rows[1]["cpu_s"] / rows[0]["cpu_s"]
        return rows

    # timings do not matter here: skip the full collections the benchmark makes before each
    # timed call (slow in a test process that holds everything the suite imported)
    monkeypatch.setattr(perf.gc, "collect", lambda *a: 0)
    monkeypatch.setattr(perf, "BASES", ("FIFO", "LossAware"))
    monkeypatch.setattr(perf, "DETECTORS", ("EvalStop-2",))
    monkeypatch.setattr(perf, "scaling", small_scaling)
    monkeypatch.setattr(perf, "philly_replay", lambda timeout, engine="auto": None)
    monkeypatch.setattr(perf, "compile_seconds", lambda timeout: {"compile_s": 9.5})
    env_steps = perf.env_steps
    monkeypatch.setattr(perf, "env_steps", lambda: env_steps(0.2))
    args = argparse.Namespace(out=tmp_path, quick=True, repeats=1, timeout=60.0,
                              no_markdown=True)
    assert perf.main(args) == 0
    res = json.loads((tmp_path / "perf.json").read_text())
    assert res["events_per_s"] > 0 and res["bare_heap_events_per_s"] > 0
    assert res["ratio_vs_bare"] == res["events"]["native"]["ratio_vs_bare"]
    assert res["events"]["native"]["events"] == res["events"]["python"]["events"]
    assert all({"jobs", "gpus", "wall_s", "peak_mem_mb"} <= set(r) for r in res["scale"])
    assert [r["events"] for r in res["scale"]] == [r["events"] for r in res["scale_reference"]]
    assert set(res["env_steps_per_s"]) == {"stop", "full", "vector", "vector_full", "cartpole"}
    assert res["env_steps_per_s"]["vector"] > 0 and res["env_steps_per_s"]["vector_full"] > 0
    out = capsys.readouterr().out
    assert "engine / bare" in out and "| compiled |" in out and "identical" in out
    assert res["compile"] == {"compile_s": 9.5} and "empty numba cache" in out


def test_compile_child_imports_only_the_installed_package(tmp_path):
    """The compile-time child must run outside the checkout (a wheel install, another cwd),
    where the top-level `policies` folder is not importable."""
    code = perf.COMPILE_CODE.format(jobs=5)
    statements = code.split("; ")
    imports = [s for s in statements if s.startswith(("from ", "import "))]
    assert {s.split()[1].rstrip(",").split(".")[0] for s in imports} <= {
        "json", "time", "evalstop_gym"}
    # run the child's imports from another cwd (the compiled run itself takes too long here)
    res = perf._child("; ".join(imports + ["print(json.dumps({'ok': True}))"]), 120.0,
                      {"ok": False}, cwd=tmp_path)
    assert res == {"ok": True}
