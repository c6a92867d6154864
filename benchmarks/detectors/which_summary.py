"""The study's summary: per density and detector, the simulated means, the corpus's and the
public runs' false stops and recall, the oracle at the detector's own FPR; and the
recommendation read from it (`which_study`'s budgets and targets)."""

from __future__ import annotations

import numpy as np
import pandas as pd

from ..corpus.public_scoring import summarise_public
from .oracle import recall_at_fpr
from .which_study import (
    DENSITIES,
    E2_RECALL_PROMISE,
    MAX_AR1_FPR,
    MAX_CORPUS_FALSE_STOPS,
    MAX_FPR,
    MAX_PUBLIC_FALSE_STOPS,
    ORACLE,
    ORACLE_FPR,
    PEER_BUDGET,
    PUBLIC_COLUMNS,
    RECALL_TARGETS,
    pct,
)


def oracle_at(oracle: pd.DataFrame, noise: str, density: str,
              fpr: float) -> tuple[float, float, float]:
    """The oracle's (recall, early recall, FPR) at the threshold whose FPR is at most `fpr`,
    over every seed's RLHF jobs at this noise and density."""
    jobs = oracle[(oracle.noise == noise) & (oracle.density == density)]
    healthy, hacking = jobs[~jobs.is_hacking], jobs[jobs.is_hacking]
    threshold, recall = recall_at_fpr(healthy.peak.to_numpy(), hacking.peak.to_numpy(), fpr)
    early = float(np.mean(hacking.peak_early.to_numpy() > threshold))
    return recall, early, float(np.mean(healthy.peak.to_numpy() > threshold))


def public_columns(public: pd.DataFrame) -> dict[tuple[str, str], dict[str, float]]:
    """Per (density, detector): the public corpus's recall and false stops on each half, and
    on the test half the share of the decline avoided, of the gain lost, and the drop at stops."""
    out: dict[tuple[str, str], dict[str, float]] = {}
    for r in summarise_public(public).itertuples():
        row = out.setdefault((r.density, r.detector), {})
        row[f"{r.split}_recall"], row[f"{r.split}_false_stops"] = r.recall, r.false_stops
        if r.split == "test":
            row.update(test_decline_avoided=r.decline_avoided, test_gain_lost=r.gain_lost,
                       test_drop_share=r.drop_share)
    return out


def summarise(sim: pd.DataFrame, corpus: pd.DataFrame, oracle: pd.DataFrame,
              public: pd.DataFrame | None = None) -> pd.DataFrame:
    """One row per (density, detector): the means over seeds, the corpus's false stops, the
    public corpus's columns (`public_columns`) and the oracle's recall at the detector's own FPR
    (Gaussian and AR(1)); then the oracle itself at `ORACLE_FPR`."""
    mean = sim.groupby(["noise", "density", "detector"], sort=False)[
        ["recall", "recall_early", "fpr", "fpr_monitored", "gpu_min_saved"]].mean()
    real = public_columns(public) if public is not None and len(public) else {}
    rows = []
    for density in DENSITIES:
        for det in mean.index.get_level_values("detector").unique():
            g, a = mean.loc[("gauss", density, det)], mean.loc[("ar1", density, det)]
            drift = mean.loc[("drift", density, det)] if ("drift", density, det) in mean.index \
                else pd.Series({"recall": np.nan, "fpr": np.nan})
            stops = corpus[(corpus.density == density) & (corpus.detector == det)]["stopped"]
            best = oracle_at(oracle, "gauss", density, g.fpr)[0]
            rows.append({"density": density, "detector": det, "recall": g.recall,
                         "recall_early": g.recall_early, "gpu_min_saved": g.gpu_min_saved,
                         "fpr": g.fpr, "ar1_recall": a.recall, "ar1_fpr": a.fpr,
                         "ar1_fpr_monitored": a.fpr_monitored, "drift_recall": drift.recall,
                         "drift_fpr": drift.fpr,
                         "corpus_false_stops": stops.mean() if len(stops) else np.nan,
                         "oracle_recall": best,
                         "ar1_oracle_recall": oracle_at(oracle, "ar1", density, a.fpr)[0],
                         "share_of_oracle": g.recall / best if best > 0 else np.nan,
                         **{c: real.get((density, det), {}).get(c, np.nan)
                            for c in PUBLIC_COLUMNS}})
        recall, early, fpr = oracle_at(oracle, "gauss", density, ORACLE_FPR)
        ar1_recall, _, ar1_fpr = oracle_at(oracle, "ar1", density, ORACLE_FPR)
        rows.append({"density": density, "detector": ORACLE, "recall": recall,
                     "recall_early": early, "gpu_min_saved": np.nan, "fpr": fpr,
                     "ar1_recall": ar1_recall, "ar1_fpr": ar1_fpr, "ar1_fpr_monitored": np.nan,
                     "drift_recall": np.nan, "drift_fpr": np.nan, "corpus_false_stops": np.nan,
                     "oracle_recall": recall,
                     "ar1_oracle_recall": ar1_recall, "share_of_oracle": 1.0})
    return pd.DataFrame(rows)


def recommend(summary: pd.DataFrame, alone: bool = False) -> tuple[str | None, str]:
    """The best mean Gaussian recall among detectors safe at every density; and why. `alone`:
    only detectors whose budget holds for a run on its own (none of `PEER_BUDGET`)."""
    real = summary[summary.detector != ORACLE]
    if alone:
        real = real[~real.detector.str.split("-").str[0].isin(PEER_BUDGET)]
    safe = real.groupby("detector").filter(
        lambda g: bool((g.corpus_false_stops <= MAX_CORPUS_FALSE_STOPS).all()
                       and (g.design_false_stops <= MAX_PUBLIC_FALSE_STOPS).all()
                       and (g.fpr <= MAX_FPR).all() and (g.ar1_fpr <= MAX_AR1_FPR).all()))
    if safe.empty:
        return None, (f"no detector kept false stops of the corpus's and the public runs' "
                      f"healthy runs <= {MAX_CORPUS_FALSE_STOPS:.0%}, FPR <= {MAX_FPR:.0%} and "
                      f"AR(1) FPR <= {MAX_AR1_FPR:.0%} at every density")
    means = safe.groupby("detector")[["design_recall", "recall"]].mean()
    best = means.sort_values(["design_recall", "recall"], ascending=False)
    return str(best.index[0]), (
        f"of the detectors whose false stops of healthy runs (the corpus's, and the public "
        f"runs' design half) stay <= {MAX_CORPUS_FALSE_STOPS:.0%}, whose FPR stays <= "
        f"{MAX_FPR:.0%} and AR(1) FPR <= {MAX_AR1_FPR:.0%} at every density "
        f"({', '.join(best.index)}), it has the best mean recall of the public runs' declines "
        f"(design half, {best.design_recall.iloc[0]:.1%}; simulated: "
        f"{best.recall.iloc[0]:.1%})")


def recommendation_lines(summary: pd.DataFrame) -> list[str]:
    """The default (a run on its own) and, where it differs, the pick for groups of runs."""
    default, why = recommend(summary, alone=True)
    lines = [f"**Default** (`DEFAULT_DETECTOR`: a budget that holds for a run on its own, "
             f"whatever its peers): `{default}`: {why}." if default
             else f"**Default:** none: {why}."]
    lines += target_lines(summary, default) if default else []
    grouped, why = recommend(summary)
    if grouped != default:
        lines += ["", f"**For groups of runs** (MonitorGroup, Optuna, Ray Tune, `replay "
                     f"--group-by`; its budget holds as far as new healthy runs resemble the "
                     f"group's healthy ones): `{grouped}`: {why}."]
    return lines


def target_lines(summary: pd.DataFrame, default: str) -> list[str]:
    """The default against what a default must reach on real runs (the public test half) and
    keep in the simulator, each target met or missed with the measured number (none without the
    public corpus's columns)."""
    if "test_recall" not in summary.columns:
        return []
    rows = summary[summary.detector == default].set_index("density")
    checks = [(f"test recall at {d} >= {pct(RECALL_TARGETS[d])}",
               rows.at[d, "test_recall"], rows.at[d, "test_recall"] >= RECALL_TARGETS[d])
              for d in RECALL_TARGETS]
    checks += [(f"test false stops at {d} <= {pct(MAX_PUBLIC_FALSE_STOPS)}",
                rows.at[d, "test_false_stops"],
                rows.at[d, "test_false_stops"] <= MAX_PUBLIC_FALSE_STOPS) for d in RECALL_TARGETS]
    checks += [(f"E2 recall at 5% >= {pct(E2_RECALL_PROMISE)}", rows.at["5%", "recall"],
                rows.at["5%", "recall"] >= E2_RECALL_PROMISE)]
    cells = "; ".join(f"{name}: {pct(value)} ({'met' if ok else 'missed'})"
                      for name, value, ok in checks)
    return ["", f"**The default against its targets:** {cells}. Where recall is missed, the "
                "table of what the curves show before their last eval says how much of it the "
                "curves hold at that density."]
