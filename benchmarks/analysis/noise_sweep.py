"""Every detector under every noise model: BEYOND.md's section of the noise sweep, and its claims.

The sweep's cells are labelled "<detector>@<noise model>" (configs/e7x.yaml); its SRTF-Est
reference cell is labelled "SRTF-Est" and serves every noise model, since a base scheduler never
reads an eval. Pure functions of the runs DataFrame; the figure is drawn by `beyond_figures`.
"""

from __future__ import annotations

import math
from collections.abc import Sequence

import pandas as pd

from .claims import Row, holds
from .noise_models import FPR_BAR, NOISE_MODELS, NOISE_NAMES
from .section_inputs import SectionInputs
from .tables import pct, to_markdown

REFERENCE = "SRTF-Est"
TABLE_SIGMAS = (0.05, 0.10)
RECALL_BAR = 0.80
BAR_NOISE, BAR_SIGMA = "ar1", 0.10   # where issue 5's bar is judged
BLIND_FPR = 0.5   # a rule whose FPR stays above this at every noise level cannot tell hacking
ADAPTIVE = ("Patience", "CUSUM", "BOCPD", "MedianPruner")
METRICS = ("precision", "recall", "fpr", "jct_gain")


def split_label(label: str) -> tuple[str, str]:
    """'CUSUM-0-3@ar1' -> ('CUSUM-0-3', 'ar1'); the reference cell has no noise model."""
    detector, _, noise = str(label).partition("@")
    return detector, noise


def with_gain(runs: pd.DataFrame, reference: str = REFERENCE) -> pd.DataFrame:
    """Rows of detector cells with `noise`, `sigma` and `jct_gain` vs the reference run."""
    runs = runs.assign(sigma=runs["value"].astype(float).round(4))
    base = runs[runs["label"] == reference].set_index(["sigma", "seed"])["jct"]
    if base.empty:
        raise ValueError(f"no reference runs labelled {reference!r}; cannot compute JCT gains")
    cells = runs[runs["label"] != reference].copy()
    parts = cells["label"].map(split_label)
    cells["detector"] = [p[0] for p in parts]
    cells["noise"] = [p[1] for p in parts]
    ref = base.reindex(pd.MultiIndex.from_frame(cells[["sigma", "seed"]])).to_numpy()
    cells["jct_gain"] = (ref - cells["jct"].to_numpy()) / ref
    return cells


def summarise(runs: pd.DataFrame) -> pd.DataFrame:
    """Mean over seeds of precision, recall, FPR and JCT gain per (noise, detector, sigma)."""
    cells = with_gain(runs)
    order = list(dict.fromkeys(cells["detector"]))
    out = cells.groupby(["noise", "detector", "sigma"], sort=False)[list(METRICS)].mean()
    out = out.reset_index()
    out["detector"] = pd.Categorical(out["detector"], order, ordered=True)
    return out.sort_values(["noise", "detector", "sigma"]).reset_index(drop=True)


def beyond_table(summary: pd.DataFrame, sigmas: Sequence[float] = TABLE_SIGMAS) -> str:
    """Precision / recall / FPR / JCT gain of every detector and noise model at `sigmas`."""
    rows = []
    for (model, det), sub in summary.groupby(["noise", "detector"], sort=False, observed=True):
        row = {"noise": NOISE_NAMES.get(model, model), "detector": det}
        for s in sigmas:
            hit = sub[(sub["sigma"] - s).abs() < 1e-9]
            vals = hit.iloc[0] if len(hit) else pd.Series(dtype=float)
            for m, name in (("precision", "P"), ("recall", "R"), ("fpr", "FPR"),
                            ("jct_gain", "JCT gain")):
                row[f"{name} @{s:g}"] = pct(float(vals.get(m, math.nan)))
        rows.append(row)
    return to_markdown(pd.DataFrame(rows))


def _at(summary: pd.DataFrame, model: str, sigma: float) -> pd.DataFrame:
    return summary[(summary["noise"] == model) & ((summary["sigma"] - sigma).abs() < 1e-9)]


def best_under_fpr(summary: pd.DataFrame, model: str, sigma: float,
                   fpr_bar: float = FPR_BAR) -> pd.Series | None:
    """The detector with the highest recall among those keeping FPR <= fpr_bar."""
    sub = _at(summary, model, sigma)
    ok = sub[sub["fpr"] <= fpr_bar]
    return None if ok.empty else ok.sort_values(["recall", "precision"]).iloc[-1]


def _desc(row: pd.Series) -> str:
    return (f"{row['detector']} (precision {pct(row['precision'])}, recall {pct(row['recall'])}, "
            f"FPR {pct(row['fpr'])}, JCT gain {pct(row['jct_gain'])})")


def _adaptive(summary: pd.DataFrame, model: str, sigma: float) -> pd.DataFrame:
    sub = _at(summary, model, sigma)
    return sub[sub["detector"].astype(str).str.startswith(ADAPTIVE)]


def _where(model: str, sigma: float) -> str:
    return f"{NOISE_NAMES.get(model, model)} noise at sigma = {sigma:g}"


def bar_finding(summary: pd.DataFrame, model: str = BAR_NOISE, sigma: float = BAR_SIGMA) -> str:
    """Whether an adaptive detector keeps FPR <= 5% with recall >= 80% (issue 5's bar)."""
    adaptive = _adaptive(summary, model, sigma)
    met = adaptive[(adaptive["fpr"] <= FPR_BAR) & (adaptive["recall"] >= RECALL_BAR)]
    where = _where(model, sigma)
    if len(met):
        return f"**Bar met** under {where} by " + "; ".join(_desc(r) for _, r in met.iterrows())
    lines = [f"**Bar not met** under {where}: no adaptive detector keeps FPR <= "
             f"{FPR_BAR:.0%} with recall >= {RECALL_BAR:.0%}"]
    capped = adaptive[adaptive["fpr"] <= FPR_BAR]
    if len(capped):
        lines.append("Best recall at FPR <= 5%: " + _desc(capped.sort_values("recall").iloc[-1]))
    recall_ok = adaptive[adaptive["recall"] >= RECALL_BAR]
    if len(recall_ok):
        lines.append("Lowest FPR at recall >= 80%: " + _desc(recall_ok.sort_values("fpr").iloc[0]))
    return ". ".join(lines) + "."


def blind_rules(summary: pd.DataFrame) -> pd.Series:
    """The lowest FPR of each rule whose FPR is >= BLIND_FPR at every noise level and sigma."""
    lowest = summary.groupby("detector", observed=True)["fpr"].min()
    return lowest[lowest >= BLIND_FPR]


def which_detector(summary: pd.DataFrame, sigmas: Sequence[float] = TABLE_SIGMAS) -> list[str]:
    """Per noise model and sigma: the highest-recall rule at FPR <= 5%, else the lowest FPR."""
    lines = []
    for model in [m for m in NOISE_MODELS if m in set(summary["noise"])]:
        for s in sigmas:
            sub = _at(summary, model, s)
            if sub.empty:
                continue
            best = best_under_fpr(summary, model, s)
            pick = (f"highest recall at FPR <= 5%: {_desc(best)}" if best is not None else
                    f"no rule keeps FPR <= 5%; lowest FPR: {_desc(sub.sort_values('fpr').iloc[0])}")
            lines.append(f"- {NOISE_NAMES.get(model, model)}, sigma {s:g}: {pick}.")
    blind = blind_rules(summary)
    if len(blind):
        lines.append(f"- {', '.join(map(str, blind.index))}: FPR >= {blind.min():.0%} at every "
                     "noise level; their JCT gains come from stopping healthy jobs too.")
    return lines


def section(runs: pd.DataFrame | None, inputs: SectionInputs) -> str:
    """The table at each sigma, the figure (drawn into `inputs.figures_dir`) and the findings."""
    if runs is None:
        return ""
    from .beyond_figures import noise_figure

    summary = summarise(runs)
    inputs.drawn += noise_figure(summary, inputs.figures_dir)
    return "\n".join([f"## Every detector under every noise model ({inputs.name})\n",
                      "![precision and FPR vs sigma](figures/beyond_noise.png)\n",
                      beyond_table(summary), "", "## Findings\n", bar_finding(summary), "",
                      *which_detector(summary), ""])


def claims(runs: pd.DataFrame, name: str = "e7x") -> list[Row]:
    """Issue 5's bar, and the findings' word on the rules that stop healthy jobs too."""
    summary = summarise(runs)
    return [bar_claim(summary, name), blind_claim(summary, name)]


def bar_claim(summary: pd.DataFrame, name: str) -> Row:
    """An adaptive detector keeps FPR <= 5% with recall >= 80% where issue 5 sets the bar."""
    capped = _adaptive(summary, BAR_NOISE, BAR_SIGMA)
    capped = capped[capped["fpr"] <= FPR_BAR].sort_values(["recall", "precision"])
    best = capped.iloc[-1] if len(capped) else None
    ours = ("no adaptive detector keeps FPR <= 5%" if best is None else
            f"best recall at FPR <= 5%: {best['detector']} {pct(best['recall'])} (FPR "
            f"{pct(best['fpr'])})")
    return holds(name, f"An adaptive detector ({', '.join(ADAPTIVE)}) keeps FPR <= "
                 f"{FPR_BAR:.0%} with recall >= {RECALL_BAR:.0%} under "
                 f"{_where(BAR_NOISE, BAR_SIGMA)} (issue 5's bar)",
                 f"recall >= {RECALL_BAR:.0%} at FPR <= {FPR_BAR:.0%}", ours,
                 best is not None and best["recall"] >= RECALL_BAR, "cell means over the seeds")


def blind_claim(summary: pd.DataFrame, name: str) -> Row:
    """The rules that stop healthy jobs at every noise level owe their JCT gains to it: each
    gains more than every rule keeping FPR <= 5% (none such: nothing to show, the claim fails)."""
    blind = blind_rules(summary)
    cells = summary[summary["detector"].isin(blind.index)]
    capped = summary[summary["fpr"] <= FPR_BAR]
    low, high = cells["jct_gain"].min(), capped["jct_gain"].max()
    ok = len(cells) > 0 and len(capped) > 0 and low > high
    ours = (f"{', '.join(map(str, blind.index)) or 'no rule'}: lowest JCT gain {pct(low)}; "
            f"highest at FPR <= {FPR_BAR:.0%}: {pct(high)}")
    return holds(name, f"The rules with FPR >= {BLIND_FPR:.0%} at every noise level gain JCT by "
                 "stopping healthy jobs too", "gain above every rule at FPR <= 5%", ours, ok,
                 "every noise model and sigma")
