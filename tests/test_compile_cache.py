"""The compiled kernel's cache lives in the user's cache folder, never inside the package.

A cache beside the source lands in site-packages: it fails on a read-only install and survives an
uninstall as a namespace package that shadows the next install. Each case runs E2 in a fresh
process with its own cache environment: the first on the compiled engine, whose cache holds the
engine's and the scorer's files; the others on the reference engine, which compiles only the
scorer. Where a function's code is cached is decided per function by one locator, so the scorer
shows it as well as the engine would, without a second and third cold compile of the engine.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

import evalstop_gym
from evalstop_gym.benchmarks import cli
from evalstop_gym.policies import registry

pytest.importorskip("numba")

RUN = ("from evalstop_gym.sim import jit; print('CACHING', jit.CACHING); "
       "from evalstop_gym.simulate import resolve_config, simulate; "
       "cfg = resolve_config('e2', {{'workload.n_jobs': 40}}); "
       "r = simulate(cfg, 'EvalStop-2+SRTF-Est', seed=3, engine='{engine}'); "
       "print('JCT', r.metrics['jct'])")
PACKAGE_DIRS = {Path(m.__file__).resolve().parent for m in (evalstop_gym, cli, registry)}
PACKAGE_ROOT = Path(evalstop_gym.__file__).resolve().parent


def compiled_run(env_updates: dict[str, str], engine: str = "native") -> str:
    env = {k: v for k, v in os.environ.items() if k not in ("NUMBA_CACHE_DIR",
                                                           "EVALSTOP_CACHE_DIR")}
    env.update(env_updates)
    proc = subprocess.run([sys.executable, "-c", RUN.format(engine=engine)], capture_output=True,
                          text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return proc.stdout


def cache_files(folder: Path) -> list[Path]:
    return [p for p in folder.rglob("*") if p.suffix in (".nbi", ".nbc")]


def package_cache_files() -> list[Path]:
    return [p for d in PACKAGE_DIRS for p in cache_files(d)]


def test_the_cache_goes_to_the_user_cache_folder(tmp_path):
    before = package_cache_files()
    out = compiled_run({"XDG_CACHE_HOME": str(tmp_path / "xdg")})
    assert "CACHING True" in out
    written = cache_files(tmp_path / "xdg" / "evalstop-gym" / "numba")
    assert written, "the compiled functions should be cached under the user's cache folder"
    compiled_files = {f.stem for folder in ("sim", "metrics")   # the engine and the scorer
                      for f in (PACKAGE_ROOT / folder).glob("*.py")}
    assert {p.parent.name.rsplit("-", 1)[0] for p in written} <= compiled_files, \
        "each cache folder is named after the engine or scoring file it caches"
    assert package_cache_files() == before, "nothing may be written inside the package"
    again = compiled_run({"XDG_CACHE_HOME": str(tmp_path / "xdg")})   # read back from the cache
    assert again.splitlines()[-1] == out.splitlines()[-1]


def test_an_unwritable_cache_folder_turns_caching_off(tmp_path):
    blocker = tmp_path / "not-a-folder"
    blocker.write_text("a file where the cache folder would be")
    before = package_cache_files()
    out = compiled_run({"EVALSTOP_CACHE_DIR": str(blocker / "cache")}, engine="python")
    assert "CACHING False" in out and "JCT" in out
    assert package_cache_files() == before


def test_numba_cache_dir_set_by_the_user_wins(tmp_path):
    compiled_run({"NUMBA_CACHE_DIR": str(tmp_path / "numba"),
                  "EVALSTOP_CACHE_DIR": str(tmp_path / "ours")}, engine="python")
    assert cache_files(tmp_path / "numba")
    assert not cache_files(tmp_path / "ours")
