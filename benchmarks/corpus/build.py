"""`evalstop-bench corpus build`: train every corpus run and write the shipped data files.

Each family's generator (`supervised`, `reward_hacking`) lists its runs' settings and trains one
run from its settings alone; this command runs them all (with a progress bar), writes one CSV
per family in the replay format and `provenance.json` (every run's
settings, the library versions, the label of each run from its test curve, and the Gao fit of
the hacking reward runs) into `--out` (default: `corpus/` in the current folder), each file
atomically. `--only FAMILY` rebuilds one family. The corpus the package ships is never written
over: a folder inside the installed package is refused; to update the shipped files, build into
a folder of your own, compare, and copy them over by hand.
"""

from __future__ import annotations

import argparse
import json
import logging
import platform
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from evalstop_gym.traces.corpus import FAMILIES, corpus_file, read_runs

from ..durable import write_text
from . import reward_hacking, supervised
from .output import check_out, to_csv
from .seeding import REPRODUCIBLE

log = logging.getLogger(__name__)
DEFAULT_OUT = Path("corpus")

GENERATORS: dict[str, Any] = {"supervised": supervised, "reward": reward_hacking}
COLUMNS = {
    "supervised": ("job_id", "step", "eval_score", "loss", "test_score", "val_loss", "test_loss",
                   "family", "max_steps"),
    "reward": ("job_id", "step", "eval_score", "loss", "test_score", "proxy_reward", "kl",
               "family", "max_steps"),
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("action", choices=["build", "public", "noise-fit"],
                   help="build: train every run, write the files; public: rebuild the corpus "
                        "of public runs from snapshots of their repositories (--snapshots); "
                        "noise-fit: fit the simulator's drift noise to the public corpus's "
                        "design half, write noise_fit.json")
    p.add_argument("--out", type=Path, default=DEFAULT_OUT,
                   help=f"folder to write to (default: {DEFAULT_OUT}/ in the current folder; a "
                        "folder inside the installed package, such as the shipped corpus, is "
                        "refused)")
    p.add_argument("--only", choices=FAMILIES, default=None, help="rebuild one family only")
    p.add_argument("--snapshots", type=Path, default=None,
                   help="public: a folder holding a snapshot (git directory or clone) of each "
                        "repository sources.json names, as <owner>+<name>/ or <owner>/<name>/")


def train_family(family: str, progress: Callable[[], None]) -> list[dict[str, Any]]:
    """Every run of a family, trained in order; the rows of all runs."""
    gen = GENERATORS[family]
    rows: list[dict[str, Any]] = []
    for run in gen.run_settings():
        rows += gen.train_run(run)
        progress()
    return rows


def provenance(families: Sequence[str], out: Path) -> dict[str, Any]:
    """Settings, versions, labels and the Gao fit, for the provenance file."""
    import numpy
    import sklearn
    import torch

    from .gao_fit import fit_hacking_runs

    doc: dict[str, Any] = {
        "command": "evalstop-bench corpus build",
        "versions": {"python": platform.python_version(), "torch": torch.__version__,
                     "numpy": numpy.__version__, "scikit-learn": sklearn.__version__},
        "machine": platform.machine(), "reproducible": REPRODUCIBLE, "families": {}}
    for family in families:
        gen = GENERATORS[family]
        runs = read_runs(out / corpus_file(family).name)
        doc["families"][family] = {
            "generator": gen.__name__, "n_evals": gen.N_EVALS,
            "settings": [s._asdict() for s in gen.run_settings()],
            "labels": {r.run_id: {"declines": bool(r.declines), "peak_progress": r.peak_progress,
                                  "drop": r.drop} for r in runs}}
        if family == "reward":
            doc["families"][family]["gao_fit"] = fit_hacking_runs(runs, out / "reward.csv")
    return doc


def main(args: argparse.Namespace) -> int:
    from tqdm import tqdm

    if args.action == "public":
        from . import public

        return public.main(args)
    if args.action == "noise-fit":
        from . import noise_fit

        return noise_fit.main(args)
    out = check_out(args.out)
    families = [args.only] if args.only else list(FAMILIES)
    total = sum(len(GENERATORS[f].run_settings()) for f in families)
    with tqdm(total=total, desc="corpus runs", unit="run") as bar:
        for family in families:
            rows = train_family(family, lambda: bar.update(1))
            write_text(out / corpus_file(family).name, to_csv(rows, COLUMNS[family]))
    old = out / "provenance.json"
    doc = json.loads(old.read_text()) if old.exists() and args.only else {"families": {}}
    new = provenance(families, out)
    new["families"] = {**doc.get("families", {}), **new["families"]}
    write_text(old, json.dumps(new, indent=1) + "\n")
    log.info("corpus written to %s", out)
    return 0
