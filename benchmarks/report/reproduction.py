"""`evalstop-bench report`: run whatever is missing, then write REPRODUCTION.md from the runs.

Every measured number in the report is computed from OUT/<exp>/runs.csv; the paper's numbers come
the paper states (as encoded in `paper_claims.py`, rendered in docs/paper-figures.md).
"""

from __future__ import annotations

import argparse
import datetime
import logging
import os
import platform
import subprocess
import sys
import time
from collections.abc import Mapping, Sequence
from pathlib import Path

import pandas as pd

from evalstop_gym.config import CONFIG_DIR, ConfigError
from evalstop_gym.experiment import list_experiments

from .. import durable
from ..analysis.claims import ALPHA, FIT, REPRO, SAME, VERDICTS, Row
from ..analysis.tables import to_markdown
from ..catalog import BEYOND, CLAIMS, MATRIX
from ..sweep.calibrate import CALIBRATION_HEADING
from ..sweep.pipeline import collate_out, prepare, run_experiment, variant
from ..sweep.runner import load_runs
from .learned import learned_section

log = logging.getLogger(__name__)
LEARNED_DIRS = (Path("runs/ppo_stop"), Path("runs/ppo_stop_seed20000"),
                Path("runs/ppo_stop_seed30000"), Path("runs/dqn_stop"))


def add_arguments(p: argparse.ArgumentParser) -> None:
    from ..sweep.command import add_sweep_arguments

    add_sweep_arguments(p, "results")
    p.add_argument("--reproduction", default="REPRODUCTION.md",
                   help="where to write the report (default: REPRODUCTION.md in the current "
                        "directory; BEYOND.md and figures/ go beside it)")
    p.add_argument("--no-beyond", dest="beyond", action="store_false",
                   help=f"skip the beyond-the-paper experiments ({', '.join(BEYOND)}) and "
                        "BEYOND.md")
    p.add_argument("--learned", nargs="*", default=[str(d) for d in LEARNED_DIRS],
                   help="training output folders whose results.csv go into the report")
    p.add_argument("--calibration", nargs="*", default=None,
                   help="folders of `evalstop-bench calibrate` runs whose calibration.md (the "
                        "search's result and sensitivity table) go into the report (default: "
                        "every OUT/calibration* folder)")
    p.add_argument("--train-rl", action="store_true",
                   help="train the PPO and DQN stop policies first where results are missing "
                        "(a few minutes each)")


def check_outputs(args: argparse.Namespace) -> None:
    """REPRODUCTION.md, and BEYOND.md and figures/ beside it, writable before any run starts."""
    from ..usage import check_output

    folders = [*args.learned, *(args.calibration or ())]   # read: nothing written inside them
    inputs = [*(Path(d) / "results.csv" for d in args.learned),
              *(Path(d) / "calibration.md" for d in args.calibration or ()), *folders]
    report = check_output(args.reproduction, "--reproduction", "file", inputs)
    check_output(report.parent / "figures", "--reproduction", "dir", folders)
    if args.beyond:
        check_output(report.parent / "BEYOND.md", "--reproduction", "file", folders)
    check_output(args.out, "--out", "dir", folders)
    check_inputs(args)


def check_inputs(args: argparse.Namespace) -> None:
    """--learned and --calibration read before any run: another tool's folder, a file where a
    folder is expected or a binary calibration.md is a one-line UsageError naming the option."""
    from ..usage import UsageError
    from .learned import load_learned

    for folder in args.learned:
        load_learned(Path(folder))
    for given in args.calibration or ():
        if Path(given).is_file():
            raise UsageError(f"--calibration {given}: is a file; expected a folder of "
                             f"`evalstop-bench calibrate` (holding calibration.md)")
        read_calibration(Path(given) / "calibration.md")


def read_calibration(path: Path) -> str | None:
    """calibration.md's text (None when absent); a file that is not UTF-8 text is refused."""
    from ..usage import UsageError

    if not path.is_file():
        return None
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise UsageError(f"--calibration {path.parent}: {path.name} is not text (UTF-8); "
                         f"expected the calibration.md `evalstop-bench calibrate` writes") \
            from None


def claim_rows(runs: Mapping[str, pd.DataFrame]) -> list[Row]:
    rows: list[Row] = []
    for name, fn in CLAIMS.items():
        if name in runs:
            rows.extend(fn(runs[name]))
    return rows


def calibrated_constants() -> list[str]:
    """The lines of defaults.yaml whose comment says the value was calibrated here."""
    lines = (CONFIG_DIR / "defaults.yaml").read_text().splitlines()
    return [line.strip() for line in lines if "calibrated" in line and ":" in line.split("#")[0]]


def machine(sweep_s: float, cpu_s: float) -> str:
    return (f"- machine: {platform.platform()}, {os.cpu_count()} CPU(s), Python "
            f"{platform.python_version()}\n- wall time of this report's sweeps: {sweep_s:.1f} s "
            f"(runs simulated now only; finished runs are reused)\n- summed per-run simulation "
            f"time of every run in the matrix: {cpu_s:.1f} s\n- generated: "
            f"{datetime.datetime.now().isoformat(timespec='seconds')}")


def copy_figures(out: Path, dest: Path, folders: Sequence[str] = MATRIX) -> list[str]:
    """Copy the PNG figures of the report's experiment folders (the paper's matrix, or its
    --set variant) into `dest`/figures; markdown lines embedding them. Only those folders: other
    variants in OUT draw figures of the same names, which must not replace these."""
    lines = []
    (dest / "figures").mkdir(parents=True, exist_ok=True)
    pngs = [png for name in folders for png in (out / name).glob("fig*.png")]
    for png in sorted(pngs, key=lambda p: p.name):
        durable.copy_file(png, dest / "figures" / png.name)
        written(dest / "figures" / png.name)
        lines.append(f"![{png.stem}](figures/{png.name})")
    return lines


def written(path: Path) -> None:
    """Say which file was just written, by its absolute path: a report may replace files a user
    keeps under git."""
    print(f"wrote {Path(path).resolve()}")


def variant_note(args: argparse.Namespace, overrides: Mapping) -> str:
    """The report's first lines when its runs are not the paper's defaults: seeds, overrides."""
    if not overrides and args.seeds is None:
        return ""
    seeds = " ".join(map(str, args.seeds)) if args.seeds else "each experiment's own"
    sets = ", ".join(f"`{k}={v}`" for k, v in overrides.items()) or "none"
    return (f"**Not the paper's defaults.** Seeds: {seeds}. Overrides: {sets}. Every figure "
            "below is from these runs.\n")


def report_command(args: argparse.Namespace) -> str:
    """The command that reproduces this report (seeds and overrides included)."""
    parts = ["evalstop-bench report"]
    if args.seeds:
        parts.append("--seeds " + " ".join(map(str, args.seeds)))
    parts += [f"--set {item}" for item in args.overrides or ()]
    return " ".join(parts)


def render(runs: Mapping[str, pd.DataFrame], out: Path, sweep_s: float, cpu_s: float,
           command: str, learned: str = "", figures: Sequence[str] = (),
           calibration: str = "", note: str = "",
           folders: Mapping[str, str] | None = None) -> str:
    """REPRODUCTION.md; `note` goes first (a variant's seeds and overrides), `folders` maps an
    experiment to its folder under `out` (its variant's, under --set)."""
    folders = folders or {n: n for n in runs}
    rows = claim_rows(runs)
    counts = {v: sum(r.verdict == v for r in rows) for v in VERDICTS}
    table = pd.DataFrame(rows, columns=list(Row._fields))
    parts = [
        "# Reproduction of the paper's stated figures\n", *([note] if note else []),
        f"Generated by `{command}` from the runs under `{out}`; do not edit by hand. Paper values "
        "are the figures the paper states (docs/paper-figures.md); ours are mean ± 95% CI over "
        "the seeds.\n",
        ", ".join(f"{n} {v}" for v, n in counts.items()) + f" (of {len(rows)} checks).\n",
        "**FPR.** Each FPR figure is judged once, as FP / all non-hacking jobs (`fpr_all`): "
        "the paper's own numbers rule out the definition over healthy RLHF jobs (`fpr`), "
        "under which stopping every RLHF job (StopAt) gives 100% whatever the workload, "
        "against the paper's 9.7% (E1), 64.5% (E2) and 77% (E8 at 20%). That FPR is shown "
        "beside each in the why column.\n",
        f"**Verdicts.** A stated change is `{REPRO}` when its size is within the tolerance and it "
        f"is significant, p < {ALPHA:g} by the paired t-test on per-seed differences against "
        "its reference (every cell of a seed runs the same workloads, so the seeds pair up); "
        "Welch's t-test only where a cell shares fewer than two seeds with its reference. The "
        "test is named beside each p. A right-signed change short of either is "
        f"`{SAME}`.\n",
        f"**Fits.** A `{FIT}` is a figure a constant was tuned to match (named in its row): "
        "agreeing with it tests nothing, so it is not counted as reproduced.\n",
        early_recall_note(runs.get("e2")),
        "## Checks\n", to_markdown(table), "",
        *(["## Figures\n", *figures, ""] if figures else []),
        learned,
        "## Calibrated constants (configs/defaults.yaml)\n", "```yaml",
        *calibrated_constants(), "```\n", calibration, "## Run\n", machine(sweep_s, cpu_s),
        "",
        "## Tables\n", *[(out / folders[n] / "table.md").read_text() for n in runs
                         if (out / folders[n] / "table.md").exists()],
    ]
    return "\n".join(parts)


def calibration_folders(out: Path, given: Sequence[str] | None) -> list[str]:
    """The folders named, or every `calibrate` run kept under --out."""
    if given is not None:
        return list(given)
    return [str(p) for p in sorted(out.glob("calibration*")) if p.is_dir()]


def calibration_section(folders: Sequence[str]) -> str:
    """The calibration runs' summaries (search result, validation, sensitivity), where found."""
    parts = []
    for path in (Path(f) / "calibration.md" for f in folders):
        text = read_calibration(path)
        if text is not None:
            when = datetime.datetime.fromtimestamp(path.stat().st_mtime).isoformat("T", "minutes")
            body = text.removeprefix(CALIBRATION_HEADING)
            if "**Adopt**" in body:   # the search recommends; configs/defaults.yaml decides
                body += ("\nThe defaults above are those of `configs/defaults.yaml` when this "
                         "search ran; a search's recommendation takes effect only when its "
                         "constants are written there.\n")
            parts.append(f"### `{path}` (written {when})\n{body}")
        else:
            log.warning("no %s: left out of the report", path)
    return "\n".join([CALIBRATION_HEADING, *parts]) if parts else ""


def early_recall_note(e2: pd.DataFrame | None) -> str:
    """How much of EvalStop-2's recall comes from stops at a job's final eval (E2)."""
    if e2 is None or "recall_early" not in e2:
        return ""
    cell = e2[(e2["base"] == "SRTF-Est") & (e2["detector"] == "EvalStop-2")]
    if cell.empty:
        return ""
    return ("**Recall.** A stop at a job's final eval counts as a detection (the job keeps its "
            "best checkpoint instead of its collapsed last one) but saves no compute. On E2, "
            f"EvalStop-2's recall is {cell['recall'].mean():.1%}; stopped before completion, "
            f"{cell['recall_early'].mean():.1%} (`recall_early`).\n")


def total_cpu_seconds(out: Path, names: Sequence[str]) -> float:
    """Summed per-run simulation seconds of the experiments `names` (their timing.csv)."""
    paths = [out / n / "timing.csv" for n in names]
    return sum(float(pd.read_csv(p)["wall_s"].sum()) for p in paths if p.exists())


def train_missing(folders: list[Path]) -> None:
    """Run the training script for each folder (named after its algorithm) without results."""
    for folder in folders:
        if (folder / "results.csv").exists():
            continue
        algo = "dqn" if "dqn" in folder.name else "ppo"
        seed = folder.name.rpartition("_seed")[2] if "_seed" in folder.name else "10000"
        subprocess.run([sys.executable, "-m", "evalstop_gym.benchmarks.cli", "train",
                        "--algo", algo, "--seed", seed, "--out", str(folder)], check=True)


def run_beyond(out: Path, overrides: Mapping, args: argparse.Namespace,
               root: Path) -> list[Path]:
    """The experiments beyond the paper (--set variants in folders of their own), then
    `root`/BEYOND.md from them; philly only if the trace exists. Returns the files written
    under `root` (BEYOND.md and its figures)."""
    from ..sweep.command import run_options
    from .beyond import write_beyond

    folders = {}
    for name in BEYOND:
        try:
            exp = variant(prepare(name, overrides), overrides)
            folders[name] = exp.name
            run_experiment(exp, out, args.seeds, args.workers, args.backend,
                           args.scheduler_address, run_options(args))
        except ConfigError as exc:  # e.g. the Philly trace is not on this machine
            log.warning("skipping %s: %s", name, exc)
    figures: list[Path] = []
    return [write_beyond(out, root, figures, folders), *figures]


def main(args: argparse.Namespace) -> int:
    from ..sweep.command import check_sweep_args, run_options
    from ..usage import parse_overrides

    check_sweep_args(args)
    out, overrides = Path(args.out), parse_overrides(args.overrides)
    start = time.perf_counter()
    names = [n for n in MATRIX if n in list_experiments()]
    exps = {n: variant(prepare(n, overrides), overrides) for n in names}   # --set: own folders
    folders = {n: exp.name for n, exp in exps.items()}
    for exp in exps.values():
        run_experiment(exp, out, args.seeds, args.workers, args.backend, args.scheduler_address,
                       run_options(args))
    collate_out(out)
    sweep_s = time.perf_counter() - start
    learned_dirs = [Path(d) for d in args.learned]
    if args.train_rl:
        train_missing(learned_dirs)
    runs = {n: load_runs(out / folders[n] / "runs.csv") for n in names}
    if not any(len(r) for r in runs.values()):   # nothing to report: keep the old report
        raise durable.OutputError(f"{out}: no runs of {', '.join(names) or 'the matrix'}; "
                                  f"{Path(args.reproduction).resolve()} is left as it was")
    root = Path(args.reproduction).resolve().parent
    figures = copy_figures(out, root, list(folders.values()))
    calibration = calibration_section(calibration_folders(out, args.calibration))
    text = render(runs, out, sweep_s, total_cpu_seconds(out, list(folders.values())),
                  report_command(args), learned_section(learned_dirs), figures, calibration,
                  variant_note(args, overrides), folders)
    durable.write_text(Path(args.reproduction), text)
    written(Path(args.reproduction))
    print(f"({sweep_s:.1f} s of sweeps)")
    if args.beyond:  # BEYOND.md (and its figures/) go beside REPRODUCTION.md
        for path in run_beyond(out, overrides, args, root):
            written(path)
    return 0
