#!/usr/bin/env bash
# The wheel is the product: build it, install it (not editable, core dependencies only) into a
# fresh venv outside the checkout, and from another folder run the headline and make the env.
# Fails if the wheel leaks a generic top-level package (policies, benchmarks, configs), or if a
# run leaves files in site-packages that an uninstall would not remove.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT
start=$SECONDS
export PIP_DISABLE_PIP_VERSION_CHECK=1 MPLBACKEND=Agg

# The builder gets a venv of its own: the machine's python need not have `build`, and the
# checkout may hold a `build/` folder that would shadow it from the current folder.
python3 -m venv "$work/builder"
(cd "$work" && "$work/builder/bin/python" -m pip install --quiet build \
    && "$work/builder/bin/python" -m build --wheel --outdir "$work/dist" "$repo") \
    >"$work/build.log" 2>&1 || { cat "$work/build.log"; exit 1; }
wheel=("$work"/dist/evalstop_gym-*.whl)
echo "wheel: $(basename "${wheel[0]}") ($((SECONDS - start)) s)"

python3 -m venv "$work/venv"
"$work/venv/bin/python" -m pip install --quiet "${wheel[0]}" >"$work/pip.log" 2>&1 \
    || { cat "$work/pip.log"; exit 1; }
echo "installed into a fresh venv ($((SECONDS - start)) s)"

mkdir "$work/elsewhere" && cd "$work/elsewhere"
"$work/venv/bin/python" - <<'PY'
import pathlib, sysconfig
site = pathlib.Path(sysconfig.get_paths()["purelib"])
leaked = [n for n in ("policies", "benchmarks", "configs")
          if (site / n).exists() or (site / f"{n}.py").exists()]
assert not leaked, f"top-level packages leaked into site-packages: {leaked}"
import evalstop_gym
assert pathlib.Path(evalstop_gym.__file__).is_relative_to(site), evalstop_gym.__file__
print("site-packages holds evalstop_gym only (no top-level policies, benchmarks, configs)")
PY
"$work/venv/bin/evalstop-bench" run e2 --seeds 42 --out "$work/elsewhere/results" >"$work/run.log"
grep -q "EvalStop-2+SRTF-Est" "$work/run.log" || { cat "$work/run.log"; exit 1; }
test -s "$work/elsewhere/results/e2/table.md" && test -s "$work/elsewhere/results/e2/results_e2.png"
echo "evalstop-bench run e2 --seeds 42: ok ($((SECONDS - start)) s)"
"$work/venv/bin/python" -c 'import gymnasium as gym, evalstop_gym; env = gym.make("EvalStopCluster-v0"); env.reset(seed=0); env.step(0)'
echo "gym.make(\"EvalStopCluster-v0\"): ok"

# The compiled kernel's cache lives in the user's cache folder: after a run and an uninstall,
# nothing of the package is left in site-packages.
site="$("$work/venv/bin/python" -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')"
left="$(find "$site/evalstop_gym" \( -name '*.nbi' -o -name '*.nbc' \) | head -3)"
[ -z "$left" ] || { echo "compiled-code cache written inside site-packages: $left"; exit 1; }
"$work/venv/bin/python" -m pip uninstall --yes --quiet evalstop-gym
[ ! -e "$site/evalstop_gym" ] || { echo "uninstall left $(find "$site/evalstop_gym" | head -3)"; exit 1; }
echo "no cache inside site-packages; uninstall leaves nothing: ok"
echo "wheel check passed in $((SECONDS - start)) s"
