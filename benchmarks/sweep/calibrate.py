"""`evalstop-bench calibrate`: which lost constants move which claim, and which values fit E2.

The paper's hyper-parameter table is lost, so arrival rate, eval cost, tau, the loss and
healthy-curve constants, sigma and the collapse exponent were chosen here. This searches them
with Optuna's TPE sampler, fitting E2's stated figures over many seeds with common random
numbers: every trial runs the same seeds, and every cell of a seed the same workload (as e2x),
so two trials differ by their constants only. E1 and E3 are never fitted: their claims are
judged at the defaults and at the best constants, and a constant should change in
defaults.yaml only when they do not get worse. Writes under --out: `study.sqlite` (Optuna's
storage: a second run resumes it), `trials.csv`, `best.yaml`, `sensitivity.csv` (one-at-a-time
elasticities around the defaults) and `calibration.md`.
"""

from __future__ import annotations

import argparse
import logging
import math
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any, NamedTuple

import pandas as pd
import yaml

from evalstop_gym.config import SimConfig, read_yaml
from evalstop_gym.experiment import experiment_path, load_experiment
from evalstop_gym.policies import parse_policy
from evalstop_gym.simulate import simulate

from .. import durable
from ..analysis.claims import FIT, NOT, REPRO, SAME
from ..analysis.paper_claims import E2_FIGURES
from ..analysis.stats import improvement
from ..analysis.tables import to_markdown
from ..catalog import CLAIMS, VALIDATION
from .runner import run_one, specs

log = logging.getLogger(__name__)
SRTF, EVAL2 = "SRTF-Est", "EvalStop-2+SRTF-Est"
SA65, LP = "StopAt-0.65+SRTF-Est", "LossPlateau+SRTF-Est"
FIT_POLICIES = (SRTF, EVAL2, SA65, LP)
RANK = {REPRO: 3, FIT: 2, SAME: 1, NOT: 0}
STEP = 0.1   # relative step of the one-at-a-time elasticities
CALIBRATION_HEADING = "## Calibration of the lost constants\n"
SAMPLER_SEED = 0   # --sampler-seed's default (command() prints it only when it differs)


class Constant(NamedTuple):
    """A lost constant: its search range, how to read it off a config, and the overrides that
    set it (some set a range around it, keeping the range's shape)."""

    name: str
    lo: float
    hi: float
    read: Callable[[SimConfig], float]
    write: Callable[[SimConfig, float], dict[str, Any]]


def _eval_minutes(c: SimConfig, v: float) -> dict[str, Any]:
    return {f"job_types.{t}.eval_minutes": getattr(c.job_types, t).eval_minutes * v
            for t in ("lora", "dpo", "rlhf")}


CONSTANTS = (
    Constant("arrival_rate", 0.18, 0.36, lambda c: c.workload.arrival_rate_per_min,
             lambda c, v: {"workload.arrival_rate_per_min": v}),
    Constant("eval_cost_scale", 0.2, 1.5, lambda c: 1.0, _eval_minutes),
    Constant("tau", 0.4, 0.6, lambda c: c.metrics.tau, lambda c, v: {"metrics.tau": v}),
    Constant("rlhf_loss_residual_hi", 0.03, 0.15, lambda c: c.job_types.rlhf.loss.residual[1],
             lambda c, v: {"job_types.rlhf.loss.residual": [c.job_types.rlhf.loss.residual[0],
                                                             v]}),
    Constant("dpo_plateau_lo", 0.5, 0.9, lambda c: c.job_types.dpo.loss.plateau_progress[0],
             lambda c, v: {"job_types.dpo.loss.plateau_progress": [v, min(1.0, v + 0.4)]}),
    Constant("healthy_time_constant_lo", 0.5, 2.0,
             lambda c: c.curves.rlhf_healthy.time_constant[0],
             lambda c, v: {"curves.rlhf_healthy.time_constant": [v, 3.0 * v]}),
    Constant("sigma", 0.01, 0.05, lambda c: c.noise.sigma, lambda c, v: {"noise.sigma": v}),
    Constant("collapse_mid", 1.5, 3.0, lambda c: sum(c.curves.rlhf_hacking.collapse) / 2,
             lambda c, v: {"curves.rlhf_hacking.collapse": [v - 0.5, v + 0.5]}),
)


class Target(NamedTuple):
    """An E2 figure the search fits: the paper's value and the claim's tolerance."""

    name: str
    paper: float
    tol: float


# The E2 figures fitted, read from paper_claims' table (value and tolerance typed once there).
# The wasted fractions (34.5%, 26.9%) are left out: the stated curves cap the waste near 20%
# whatever the lost constants are.
FITTED = ("srtf_jct", "evalstop_jct", "evalstop_jct_gain", "evalstop_wasted_change",
          "evalstop_stopped", "stopat_precision", "stopat_fpr_all", "lossplateau_recall",
          "lossplateau_fpr_all")
TARGETS = tuple(Target(n, E2_FIGURES[n].paper, E2_FIGURES[n].tol) for n in FITTED)
# E2's stated bounds, fitted as hinges: (figure, bound, +1 for ">=" / -1 for "<=", scale)
BOUNDS = tuple((n, E2_FIGURES[n].paper, E2_FIGURES[n].sense, E2_FIGURES[n].tol)
               for n in ("evalstop_precision", "evalstop_recall", "evalstop_fpr_all"))


def e2_figures(metrics: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """The fitted figures (and EvalStop's TTFUC gap to StopAt, for the sensitivity table) from
    the mean metrics of each E2 cell."""
    s, e, a, lp = metrics[SRTF], metrics[EVAL2], metrics[SA65], metrics[LP]
    return {"srtf_jct": s["jct"], "evalstop_jct": e["jct"],
            "evalstop_jct_gain": improvement("jct", e["jct"], s["jct"]),
            "evalstop_wasted_change": improvement("wasted_frac", e["wasted_frac"],
                                                  s["wasted_frac"]),
            "evalstop_stopped": e["n_stopped"], "stopat_precision": a["precision"],
            "stopat_fpr_all": a["fpr_all"], "lossplateau_recall": lp["recall"],
            "lossplateau_fpr_all": lp["fpr_all"], "evalstop_precision": e["precision"],
            "evalstop_recall": e["recall"], "evalstop_fpr_all": e["fpr_all"],
            "ttfuc_gap_vs_stopat": 100 * (e["ttfuc"] - a["ttfuc"]) / a["ttfuc"]}


def misfit(fig: Mapping[str, float]) -> float:
    """Sum of squared misses in tolerance units, plus squared hinge misses of the bounds."""
    total = sum(((fig[t.name] - t.paper) / t.tol) ** 2 for t in TARGETS)
    total += sum(max(0.0, sign * (bound - fig[n]) / scale) ** 2 for n, bound, sign, scale in BOUNDS)
    return float(total) if math.isfinite(total) else 1e9


class Search:
    """E2 under given constants, on fixed seeds (common random numbers across trials)."""

    def __init__(self, seeds: Sequence[int], n_jobs: int | None,
                 free: Sequence[str] = ()) -> None:
        known = [c.name for c in CONSTANTS]
        unknown = sorted(set(free) - set(known))
        if unknown:
            raise ValueError(f"--constants: unknown {', '.join(unknown)}; known: "
                             f"{', '.join(known)}")
        self.seeds = tuple(seeds)
        self.size = {"workload.n_jobs": n_jobs} if n_jobs else {}
        self.free = tuple(c for c in CONSTANTS if not free or c.name in free)
        self.base = load_experiment("e2").config

    @property
    def settings(self) -> dict[str, Any]:
        """What a stored study's trials depend on besides their constants."""
        return {"seeds": list(self.seeds), "n_jobs": self.size.get("workload.n_jobs"),
                "free": [c.name for c in self.free]}

    def overrides(self, values: Mapping[str, float]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for c in CONSTANTS:
            if c.name in values:
                out.update(c.write(self.base, float(values[c.name])))
        return out

    def defaults(self) -> dict[str, float]:
        return {c.name: float(c.read(self.base)) for c in CONSTANTS}

    def figures(self, values: Mapping[str, float]) -> dict[str, float]:
        config = self.base.with_overrides({**self.overrides(values), **self.size})
        metrics = {}
        for name in FIT_POLICIES:
            runs = [simulate(config, parse_policy(name), s).metrics for s in self.seeds]
            metrics[name] = pd.DataFrame(runs).mean().to_dict()   # NaNs skipped
        return e2_figures(metrics)


def run_study(search: Search, out: Path, trials: int, sampler_seed: int) -> Any:
    """Optuna TPE over CONSTANTS, stored in out/study.sqlite; runs only the missing trials. The
    first trial is the defaults, so the search's best is never worse than them."""
    import optuna
    from sqlalchemy.exc import SQLAlchemyError

    out.mkdir(parents=True, exist_ok=True)
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    db = out / "study.sqlite"
    try:
        study = optuna.create_study(
            study_name="e2-fit", storage=f"sqlite:///{db.resolve()}",
            sampler=optuna.samplers.TPESampler(seed=sampler_seed), direction="minimize",
            load_if_exists=True)
    except SQLAlchemyError as exc:   # a damaged or foreign file where the study is kept
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise ValueError(f"{db}: not an Optuna study database ({reason}); move it away or use "
                         "another --out") from None
    stored = study.user_attrs.get("settings")
    if stored is not None and stored != search.settings:
        raise ValueError(f"{out} holds a search over other settings ({stored}); use another "
                         "--out or the same seeds, --n-jobs and --constants")
    study.set_user_attr("settings", search.settings)
    done = [t for t in study.trials if t.state == optuna.trial.TrialState.COMPLETE]
    if not study.trials:
        defaults = search.defaults()
        study.enqueue_trial({c.name: defaults[c.name] for c in search.free})

    def objective(trial: Any) -> float:
        values = {**search.defaults(),
                  **{c.name: trial.suggest_float(c.name, c.lo, c.hi) for c in search.free}}
        fig = search.figures(values)
        for k, v in fig.items():
            trial.set_user_attr(k, v)
        return misfit(fig)

    remaining = max(0, trials - len(done))
    log.info("calibrate: %d trials stored, %d to run", len(done), remaining)
    try:
        study.optimize(objective, n_trials=remaining, show_progress_bar=remaining > 0)
    except SQLAlchemyError as exc:   # e.g. "database or disk is full"; finished trials are kept
        reason = str(getattr(exc, "orig", None) or exc).splitlines()[0]
        raise ValueError(f"{db}: cannot store a trial ({reason}); the trials stored so far are "
                         "kept: free space and run again to resume") from None
    return study


def sensitivity(search: Search, at: Mapping[str, float]) -> pd.DataFrame:
    """One-at-a-time elasticities around `at`: d ln(figure) / d ln(constant), from a central
    difference of +-STEP (relative), clipped to the search range. Rows: constants."""
    from tqdm import tqdm

    mid, rows = search.figures(at), []
    for c in tqdm(CONSTANTS, desc="sensitivity", leave=False):
        x = at[c.name]
        lo, hi = max(c.lo, x * (1 - STEP)), min(c.hi, x * (1 + STEP))
        down, up = search.figures({**at, c.name: lo}), search.figures({**at, c.name: hi})
        row = {"constant": c.name, "value": x}
        for k in mid:
            scale = abs(mid[k]) if abs(mid[k]) > 1e-12 else math.nan
            row[k] = ((up[k] - down[k]) / scale) / ((hi - lo) / x) if x else math.nan
        rows.append(row)
    return pd.DataFrame(rows)


def validate(overrides: Mapping[str, Any], n_jobs: int | None,
             seeds: Sequence[int] | None) -> pd.DataFrame:
    """E1 and E3's claims with `overrides` applied to the platform beneath each experiment's
    own overrides (as a change to defaults.yaml would be): one row per claim."""
    rows = []
    for name in VALIDATION:
        own = read_yaml(experiment_path(name)).get("overrides") or {}
        changes = {k: v for k, v in overrides.items() if k not in own}
        if n_jobs:
            changes["workload.n_jobs"] = n_jobs
        exp = load_experiment(name).with_overrides(changes)
        runs = pd.DataFrame([run_one(s)["row"] for s in specs(exp, seeds)])
        rows += [r._asdict() for r in CLAIMS[name](runs)]
    return pd.DataFrame(rows)


def compare(before: pd.DataFrame, after: pd.DataFrame) -> tuple[pd.DataFrame, bool]:
    """Verdicts side by side; True when no claim's verdict is worse after than before."""
    table = pd.DataFrame({"claim": before["experiment"] + ": " + before["claim"],
                          "paper": before["paper"], "defaults": before["ours"],
                          "verdict at defaults": before["verdict"], "best": after["ours"].values,
                          "verdict at best": after["verdict"].values})
    worse = [RANK[b] > RANK[a] for b, a in zip(before["verdict"], after["verdict"], strict=True)]
    return table, not any(worse)


def add_arguments(p: argparse.ArgumentParser) -> None:
    p.add_argument("--out", default="results/calibration", help="output folder (its "
                   "study.sqlite resumes a search; default: results/calibration, where "
                   "`evalstop-bench report` looks)")
    p.add_argument("--trials", type=int, default=300, help="total TPE trials, the defaults "
                   "first (default 300; trials already stored count)")
    p.add_argument("--constants", nargs="+", metavar="NAME", default=None,
                   help="search only these constants, the rest at their defaults (default: "
                        f"all of {', '.join(c.name for c in CONSTANTS)})")
    p.add_argument("--seeds", type=int, nargs="+", default=list(range(1, 11)),
                   help="E2 seeds every trial runs (common random numbers; default 1..10)")
    p.add_argument("--validation-seeds", type=int, nargs="+", default=None,
                   help="seeds of the E1/E3 validation (default: the experiments' own)")
    p.add_argument("--n-jobs", type=int, default=None,
                   help="jobs per run (default: the experiments' 200; smaller for a quick look)")
    p.add_argument("--sampler-seed", type=int, default=SAMPLER_SEED, help="TPE sampler seed")


def main(args: argparse.Namespace) -> int:
    from ..usage import UsageError, check_output

    if args.trials < 1 or (args.n_jobs is not None and args.n_jobs < 1):
        raise UsageError("--trials and --n-jobs must be at least 1")
    for option, seeds in (("--seeds", args.seeds), ("--validation-seeds", args.validation_seeds),
                          ("--sampler-seed", [args.sampler_seed])):
        if seeds is not None and (min(seeds) < 0 or len(set(seeds)) != len(seeds)):
            raise UsageError(f"{option} {' '.join(map(str, seeds))}: expected distinct whole "
                             "numbers >= 0")
    out = check_output(args.out, "--out", "dir")
    try:
        search = Search(args.seeds, args.n_jobs, args.constants or ())
        study = run_study(search, out, args.trials, args.sampler_seed)
    except ValueError as exc:
        raise UsageError(str(exc)) from None
    defaults = search.defaults()
    best = {**defaults, **study.best_trial.params}
    sens = sensitivity(search, defaults)
    before = validate({}, args.n_jobs, args.validation_seeds)
    after = validate(search.overrides(best), args.n_jobs, args.validation_seeds)
    table, not_worse = compare(before, after)
    default_misfit = misfit(search.figures(defaults))
    adopt = not_worse and study.best_value < default_misfit
    durable.write_csv(study.trials_dataframe(), out / "trials.csv")
    durable.write_csv(sens, out / "sensitivity.csv")
    durable.write_text(out / "best.yaml", yaml.safe_dump(
        {"constants": best, "overrides": search.overrides(best), "misfit": study.best_value,
         "misfit_at_defaults": default_misfit, "adopt": adopt}, sort_keys=False))
    text = summary(search, study, defaults, default_misfit, sens, table, adopt, args)
    durable.write_text(out / "calibration.md", text)
    print(f"wrote {out / 'calibration.md'}: best misfit {study.best_value:.2f} (defaults "
          f"{default_misfit:.2f}); {'adopt' if adopt else 'keep the defaults'}")
    return 0


def summary(search: Search, study: Any, defaults: Mapping[str, float], default_misfit: float,
            sens: pd.DataFrame, table: pd.DataFrame, adopt: bool,
            args: argparse.Namespace) -> str:
    """calibration.md: the search, its best constants and figures, validation, sensitivity."""
    best = study.best_trial
    values = {**defaults, **best.params}
    consts = pd.DataFrame({"constant": [c.name for c in CONSTANTS],
                           "range": [f"[{c.lo:g}, {c.hi:g}]" if c in search.free else "fixed"
                                     for c in CONSTANTS],
                           "defaults": [f"{defaults[c.name]:.4g}" for c in CONSTANTS],
                           "best": [f"{values[c.name]:.4g}" for c in CONSTANTS]})
    at_defaults = study.trials[0].user_attrs
    figs = pd.DataFrame({"figure": [t.name for t in TARGETS],
                         "paper": [f"{t.paper:g}" for t in TARGETS],
                         "tolerance": [f"±{t.tol:g}" for t in TARGETS],
                         "defaults": [f"{at_defaults.get(t.name, math.nan):.4g}" for t in TARGETS],
                         "best": [f"{best.user_attrs[t.name]:.4g}" for t in TARGETS]})
    shown = sens[["constant", *(t.name for t in TARGETS), "ttfuc_gap_vs_stopat"]].round(2)
    n_jobs = search.size.get("workload.n_jobs", search.base.workload.n_jobs)
    size = f"{n_jobs} jobs per run"
    still = [str(r["constant"]) for _, r in sens.iterrows()
             if all(math.isfinite(r[t.name]) and abs(r[t.name]) < 0.005 for t in TARGETS)]
    unmoved = (f" Moving no fitted E2 figure (|elasticity| < 0.005): {', '.join(still)}."
               if still else "")
    verdict = ("**Adopt**: the best constants fit E2 better and no E1/E3 claim gets worse."
               if adopt else "**Keep the defaults**: the best constants either do not fit E2 "
               "better or make an E1/E3 claim (not fitted) worse.")
    return "\n".join([
        CALIBRATION_HEADING,
        f"`evalstop-bench calibrate {' '.join(command(args))}`: Optuna TPE, "
        f"{len(study.trials)} "
        f"trials, each E2's cells {', '.join(FIT_POLICIES)} on seeds "
        f"{', '.join(map(str, search.seeds))} ({size}; the same seeds in every trial: common "
        f"random numbers). Misfit: squared misses in tolerance units, summed over the figures "
        f"below, plus EvalStop's stated bounds (precision, recall >= 95%, FPR <= 3%). Best "
        f"misfit {study.best_value:.2f} (trial {best.number}); at the defaults "
        f"{default_misfit:.2f}.\n", verdict + "\n", to_markdown(consts), "",
        "E2 figures fitted (means over the seeds):\n", to_markdown(figs), "",
        "Validation (not fitted): E1 and E3's claims at the defaults and at the best "
        "constants.\n", to_markdown(table), "",
        f"Sensitivity: one-at-a-time elasticities around the defaults, d ln(figure) / "
        f"d ln(constant), central differences of ±{STEP:.0%} (a 1% rise of the constant moves "
        f"the figure by that many percent).{unmoved}\n", to_markdown(shown), ""])


def command(args: argparse.Namespace) -> list[str]:
    """The options that shaped this search, as they would be typed: the seeds always, the
    others when they differ from their defaults, so the printed command reproduces it."""
    parts = [f"--trials {args.trials}", "--seeds " + " ".join(map(str, args.seeds))]
    if args.constants:
        parts.append("--constants " + " ".join(args.constants))
    if args.n_jobs:
        parts.append(f"--n-jobs {args.n_jobs}")
    if args.validation_seeds is not None:
        parts.append("--validation-seeds " + " ".join(map(str, args.validation_seeds)))
    if args.sampler_seed != SAMPLER_SEED:
        parts.append(f"--sampler-seed {args.sampler_seed}")
    return parts
