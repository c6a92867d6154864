"""The leaderboard page: every score file of one suite version as a row, beside the oracle's.

Rows are read back from `OUT/scores/*.json` (only those of the suite's digest: a score made on
another version is never ranked beside this one's), ranked by the IQM of their normalised
simulated scores. The oracle's row is the suite's own reference (1 on every simulated task by
construction; its per-seed values spread around 1), so the page shows how far each policy is
from nothing and from the limit on one scale.
"""

from __future__ import annotations

import json
import shlex
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd

from evalstop_gym.online import DEFAULT_DETECTOR
from evalstop_gym.policies.user_code import MODEL_PREFIX

from .. import durable
from .aggregate import family_aggregate, shown
from .normalise import scale
from .suite import Suite

ORACLE = "Oracle (Bayes, knows the model)"
PAGE_FIGURE = "leaderboard_profile"


def read_scores(out: Path, suite: Suite) -> list[dict[str, Any]]:
    """The score files in OUT/scores of this suite version, in file-name order."""
    records = [json.loads(p.read_text()) for p in sorted((out / "scores").glob("*.json"))]
    return [r for r in records if r.get("suite_digest") == suite.digest]


def oracle_record(suite: Suite) -> dict[str, Any]:
    """The reference's own row on the simulated tasks, from the suite's stored per-seed values."""
    runs = [{"task": t.id, "member": ORACLE, "seed": int(seed),
             "normalised": float(scale(v, suite.reference(t)["nostop"],
                                       suite.reference(t)["value"]))}
            for t in suite.simulated
            for seed, v in sorted(suite.reference(t)["per_seed"].items())]
    frame = pd.DataFrame(runs)
    return {"policy": ORACLE, "suite": suite.name, "suite_digest": suite.digest, "runs": runs,
            "tasks": [{"task": t, "normalised": float(g.normalised.mean())}
                      for t, g in frame.groupby("task", sort=False)],
            "aggregate": {"simulated": family_aggregate(frame),
                          "real": family_aggregate(frame.iloc[:0])}}


def ranked(records: Sequence[dict[str, Any]]) -> list[dict[str, Any]]:
    def key(r: dict[str, Any]) -> float:
        iqm = r["aggregate"]["simulated"]["iqm"]
        return -np.inf if iqm is None else float(iqm)
    return sorted(records, key=key, reverse=True)


def ci(agg: dict[str, Any]) -> str:
    if agg["iqm"] is None:
        return "n/a"
    return f"{agg['iqm']:.2f} [{agg['low']:.2f}, {agg['high']:.2f}]"


def summary_table(records: Sequence[dict[str, Any]]) -> list[str]:
    lines = ["| rank | policy | simulated IQM [95% CI] | simulated mean | real IQM [95% CI] "
             "| real mean |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(records, 1):
        sim, real = r["aggregate"]["simulated"], r["aggregate"]["real"]
        mean = {k: "n/a" if a["mean"] is None else f"{a['mean']:.2f}"
                for k, a in (("sim", sim), ("real", real))}
        name = f"`{shown(r['policy'])}`" + (" (the default)"
                                             if r["policy"] == DEFAULT_DETECTOR else "")
        lines.append(f"| {i} | {name} | {ci(sim)} | {mean['sim']} | {ci(real)} "
                     f"| {mean['real']} |")
    return lines


def task_table(records: Sequence[dict[str, Any]], suite: Suite) -> list[str]:
    """Each policy's normalised score per task (mean over seeds)."""
    ids = [t.id for t in suite.tasks]
    lines = ["| policy | " + " | ".join(ids) + " |", "|---|" + "---|" * len(ids)]
    for r in records:
        by = {t["task"]: t.get("normalised") for t in r["tasks"]}
        cells = ["n/a" if by.get(i) is None else f"{by[i]:.2f}" for i in ids]
        lines.append(f"| `{shown(r['policy'])}` | " + " | ".join(cells) + " |")
    return lines


def reference_lines(suite: Suite) -> list[str]:
    lines = ["| task | what | NoStop (0) | reference (1) | reference |", "|---|---|---|---|---|"]
    for t in suite.tasks:
        ref = suite.reference(t)
        what = (f"public runs ({suite.real_split} half), evals {t.real}" if t.is_real else
                f"{t.experiment} " + ", ".join(f"{k}={v}" for k, v in t.overrides.items()))
        lines.append(f"| {t.id} | {what} | {ref['nostop']:.3f} | {ref['value']:.3f} "
                     f"| {ref['source']} |")
    return lines


def score_commands(records: Sequence[dict[str, Any]], out: str) -> list[str]:
    """The commands that scored the rows: the single policies in one, each group in its own."""
    single = [shlex.quote(r["policy"]) for r in records if not isinstance(r["policy_digest"], dict)]
    groups = [r for r in records if isinstance(r["policy_digest"], dict)]
    tail = f" --suite {records[0]['suite']} --out {out} --workers 2" if records else ""
    return ([f"evalstop-bench score {' '.join(single)}{tail}"] if single else []) + [
        f"evalstop-bench score {' '.join(map(shlex.quote, r['policy_digest']))} --as "
        f"{shlex.quote(r['policy'])}{tail}" for r in groups]


def training_lines(records: Sequence[dict[str, Any]]) -> list[str]:
    """For each learned row, how its models were trained (`train`'s saved arguments)."""
    lines = []
    for r in records:
        runs = r.get("training")
        runs = list(runs.values()) if isinstance(runs, dict) and "algo" not in runs else [runs]
        runs = [t for t in runs if t]
        if not runs:
            continue
        t = runs[0]
        envs = f"--num-envs {t['num_envs']}" if t.get("num_envs") else f"--n-envs {t['n_envs']}"
        lines.append(f"- `{shown(r['policy'])}`: `evalstop-bench train --algo {t['algo']} "
                     f"--control {t['control']} --config {t['config']} {envs} "
                     f"--total-timesteps {t['total_timesteps']} --seed SEED`, SEED = "
                     + ", ".join(str(x["seed"]) for x in runs) + ".")
    return ["", "Learned rows, each model trained by:", "", *lines] if lines else []


def learned_note(records: Sequence[dict[str, Any]]) -> str:
    """A sentence saying so when no learned policy has a row yet."""
    if any(MODEL_PREFIX in json.dumps(r.get("policy_digest")) + r["policy"] for r in records):
        return ""
    return (" No learned policy has a row on this version yet: [Add a row](#add-a-row) shows "
            "how its training runs are scored as one.")


def write_page(page: Path, records: Sequence[dict[str, Any]], suite: Suite, command: str,
               text: str, out: str) -> None:
    """The page (`text` the prose around the tables) and its figure in figures/ beside it."""
    from ..analysis.figures import save
    from .profile import draw_profiles

    rows = ranked([*records, oracle_record(suite)])
    real_ids = {t.id for t in suite.real}
    save(draw_profiles(rows, real_ids), page.parent / "figures", PAGE_FIGURE)
    body = text.format(
        suite=suite.name, digest=suite.digest, command=command,
        scored="\n".join(score_commands(records, out)), learned=learned_note(records),
        trained="\n".join(training_lines(records)),
        seeds=", ".join(
            map(str, suite.seeds)),
        summary="\n".join(summary_table(rows)), tasks="\n".join(task_table(rows, suite)),
        references="\n".join(reference_lines(suite)), figure=f"figures/{PAGE_FIGURE}.png")
    durable.write_text(page, body)
