"""A replayed day's record reads back through its model and writes back as it was recorded: the
report embeds each day as read, and a re-run reuses the days recorded before (by older versions too)."""

from __future__ import annotations

import json
import math
from pathlib import Path

from ranking.backtest.day import DayRecord
from ranking.core.atomic import atomic_write_json

SERVED_METRICS = {
    "auc": 0.6863611243899422,
    "base_rate": 0.029466666666666665,
    "calibration": 1.155881295767472,
    "log_loss": 0.1268138067346741,
    "ne": 0.9543243963155054,
    "requests_with_save": 151,
    "rows": 7500,
    "save_hit_at_3": 0.23529411764705882,
}
RECORDED = {  # a day as replay_day writes it (a reject on the leakage check)
    "candidate": {
        "metrics": {**SERVED_METRICS, "eval_date": "2026-11-11", "save_hit_at_3": 0.2986425339366516},
        "scores": "scores/2026-11-11-candidate.parquet",
        "version": "v0002",
    },
    "candidate_beat_served": True,
    "champion_after": "v0001",
    "champion_before": "v0001",
    "day": "2026-11-11",
    "decision": "reject",
    "error": None,
    "exit_code": 1,
    "failed_checks": ["leakage"],
    "fingerprint": "6a22cf8474131fcc9c5844b82c27ae0b",
    "gate_ci": [0.0793183940242763, 0.5208786231884057],
    "gate_decision": "reject",
    "kept_champion": False,
    "pretrain": {"base_range": ["2026-09-20", "2026-10-10"], "error": None, "exit_code": 0,
                 "seconds": 4, "version": "v0003"},
    "pretrain_seconds": 4,
    "promoted": False,
    "relative_change": 0.26923076923076916,
    "run_id": "backtest__2026-11-11__1",
    "run_seconds": 16.509,
    "served": {
        "age_days": 1,
        "forward": {"fresh": "v0001", "fresh_save_hit_at_3": 0.23529411764705882, "other": None,
                    "other_save_hit_at_3": None, "promoted_fresh": True},
        "metrics": SERVED_METRICS,
        "scores": "scores/2026-11-11-served.parquet",
        "trained_for": "2026-11-10",
        "version": "v0001",
    },
    "train_seconds": 10.085792313999264,
    "versions_after": 2,
}  # fmt: skip


def _round_trip(tmp_path: Path, recorded: dict[str, object]) -> tuple[DayRecord, str, str]:
    path = tmp_path / "day.json"
    atomic_write_json(path, recorded)
    record = DayRecord.read(path)
    atomic_write_json(tmp_path / "again.json", record.to_json())
    return record, path.read_text(), (tmp_path / "again.json").read_text()


def test_a_recorded_day_writes_back_byte_for_byte(tmp_path: Path) -> None:
    record, before, after = _round_trip(tmp_path, RECORDED)
    assert after == before
    assert record.metric("served", "save_hit_at_3") == SERVED_METRICS["save_hit_at_3"]
    assert record.served is not None and record.served.forward is not None
    assert record.gate_call() == "reject" and record.beat() is True and not record.failed


def test_a_day_without_its_window_or_a_model_keeps_only_the_keys_it_had(tmp_path: Path) -> None:
    """No window that day: the served model has neither scores nor forward; a failed run: no
    candidate; a metric that was NaN stays NaN in the record."""
    failed = {
        **RECORDED,
        "served": {"age_days": None, "metrics": {**SERVED_METRICS, "auc": math.nan}, "trained_for": None,
                   "version": "v0001"},
        "candidate": None,
        "exit_code": 2,
        "error": "step train failed",
    }  # fmt: skip
    record, before, after = _round_trip(tmp_path, failed)
    assert after == before and '"auc": NaN' in after
    assert record.failed and record.metric("served", "auc") is not None and record.scores_of("served") is None


def test_a_day_recorded_before_the_gate_decision_and_the_outcome_were_kept(tmp_path: Path) -> None:
    """An older record lacks gate_decision and candidate_beat_served (and may hold a key this
    version no longer writes): it reads, writes back as it was, and its gate call is the run's
    decision, its outcome the metrics'."""
    old = {k: v for k, v in RECORDED.items() if k not in ("gate_decision", "candidate_beat_served")}
    old["retired_key"] = {"kept": [1, 2]}
    record, before, after = _round_trip(tmp_path, old)
    assert after == before and "gate_decision" not in json.loads(after)
    assert record.gate_call() == "reject"
    assert record.beat() is True  # 0.2986 > 0.2353
