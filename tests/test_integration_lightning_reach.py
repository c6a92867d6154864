"""A Lightning stop reaches the user: a WARNING on Lightning's logger without `verbose`, and the
evidence as `evalstop/*` metrics in the trainer's loggers (a real CSVLogger) and
callback_metrics; replaying that metrics.csv still judges the monitored metric."""

from __future__ import annotations

import csv
import logging
import runpy
from pathlib import Path

import pytest

pytest.importorskip("lightning")
from lightning.pytorch.loggers import CSVLogger  # noqa: E402

import evalstop_gym  # noqa: E402
from evalstop_gym.integrations.lightning import EvalStopCallback  # noqa: E402

EXAMPLE = runpy.run_path(str(Path(__file__).parents[1] / "examples" / "lightning_fit.py"))


def test_the_stop_is_a_warning_and_the_evidence_is_logged(tmp_path, caplog):
    callback = EvalStopCallback(monitor="val_score", mode="max", detector="EvalStop-2")
    fit = EXAMPLE["trainer"](callback, logger=CSVLogger(tmp_path, name="lightning_logs"))
    with caplog.at_level(logging.INFO, logger="lightning.pytorch"):
        fit.fit(EXAMPLE["OneWeight"](), EXAMPLE["loader"](2.0), EXAMPLE["loader"](1.0))
    assert callback.decision.stop
    stops = [r for r in caplog.records if r.name.endswith("evalstop")
             and "Signaling Trainer to stop" in r.getMessage()]
    assert [r.levelname for r in stops] == ["WARNING"]
    assert f"at step {callback.best_step}" in stops[0].getMessage()
    assert float(fit.callback_metrics["evalstop/stop"]) == 1.0
    assert float(fit.callback_metrics["evalstop/best_step"]) == callback.best_step
    path = Path(fit.logger.log_dir) / "metrics.csv"
    with path.open() as handle:
        rows = [r for r in csv.DictReader(handle) if r.get("evalstop/stop")]
    assert len(rows) == callback.decision.n_evals
    assert [int(r["step"]) for r in rows][-1] == fit.global_step == callback.stopped_step
    assert [float(r["evalstop/stop"]) for r in rows] == [0.0] * (len(rows) - 1) + [1.0]
    row = evalstop_gym.replay(path, detectors="EvalStop-2").iloc[0]
    assert row["metric"] == "val_score" and row["kept_step"] == callback.best_step
