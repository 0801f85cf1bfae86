"""What each run logs to MLflow, built from step summaries (ranking/tracking/builders.py): pure,
no MLflow. The summaries are the complete examples of tests/support (a day-2 run that passed)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest
from summary_examples import example_summaries

from ranking.core.summaries import (
    DecideSummary,
    GateCheck,
    GateSummary,
    PromoteSummary,
    RejectSummary,
    StepError,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
)
from ranking.core.workspace import Workspace
from ranking.pipeline.graph import RunOutcome
from ranking.tracking.builders import (
    RETRAIN_EXPERIMENT,
    RetrainFolder,
    config_params,
    partitions_sha,
    pretrain_record,
    retrain_record,
    train_record,
)
from ranking.tracking.hooks import read_retrain_folder
from ranking.tracking.records import MAX_PARAM_VALUE_CHARS, TrackingRecord
from ranking.trainer.reports.curve_data import CurvePoint, TrainingCurve

EFFECTIVE: dict[str, Any] = {
    "config": {
        "recipe": {"epochs": 3, "schedule": "F,J,J", "warm_start": "base", "history_features": False},
        "gate": {"min_hit": 0.2},
        "window": {"days": 20},
    },
    "sources": {
        "recipe.epochs": "params",
        "recipe.schedule": "review:r-2026-11-30:base-fj",
        "recipe.warm_start": "file:/ws/ranker.toml",
        "recipe.history_features": "default",
        "gate.min_hit": "default",
        "window.days": "env",
    },
    "files": ["/ws/ranker.toml"],
}


def folder(**update: Any) -> RetrainFolder:
    ex = example_summaries()
    base: dict[str, Any] = {
        "run_id": "manual__2026-12-01__20261201T030000Z-1a2b",
        "status": "success",
        "window": ex["window"],
        "validate_": ex["validate"],
        "train": ex["train"],
        "gate": ex["gate"],
        "decide": ex["decide"],
        "promote": ex["promote"],
        "effective": EFFECTIVE,
        "start_ms": 1_000_000,
        "end_ms": 1_120_500,
    }
    return RetrainFolder.model_validate({**base, **update})


def metric(record: TrackingRecord, key: str) -> list[tuple[int, float]]:
    return [(m.step, m.value) for m in record.metrics if m.key == key]


def test_a_promoted_run_is_one_retrain_record() -> None:
    record = retrain_record(folder())
    assert record.record_id == "retrain:manual__2026-12-01__20261201T030000Z-1a2b"
    assert record.experiment == RETRAIN_EXPERIMENT == "ranker-retrain"
    assert record.run_name == "manual__2026-12-01__20261201T030000Z-1a2b"
    assert record.status == "FINISHED"
    tags = record.tags
    assert tags["ranker.decision"] == "promoted" and tags["ranker.reason"] == "gate passed"
    assert tags["ranker.version"] == "v0003"
    assert (tags["ranker.champion_before"], tags["ranker.champion"]) == ("v0002", "v0003")
    assert tags["ranker.window"] == "2026-11-11..2026-12-01"
    assert tags["ranker.base"] == "v0001" and tags["ranker.code_version"] == "0.1.0"
    assert tags["ranker.review"] == "review:r-2026-11-30:base-fj"
    assert tags["ranker.recipe"] == "base-fj"  # the review's recipe names it
    assert metric(record, "wall_seconds") == [(0, 120.5)]
    assert "ranker.failed_step" not in tags


def test_the_gate_checks_value_threshold_and_verdict() -> None:
    ex = example_summaries()
    gate = ex["gate"]
    assert isinstance(gate, GateSummary)
    checks = [
        *gate.checks,
        GateCheck(name="calibration", passed=False, value=2.4, threshold=(0.5, 2.0), detail=""),
        GateCheck(name="scores_not_constant", passed=True, value=None, threshold=1e-06, detail=""),
    ]
    record = retrain_record(folder(gate=gate.model_copy(update={"checks": checks})))
    assert metric(record, "gate.save_hit_at_3_change.value") == [(0, 0.0125)]
    assert metric(record, "gate.save_hit_at_3_change.threshold") == [(0, -0.1)]
    assert metric(record, "gate.save_hit_at_3_change.passed") == [(0, 1.0)]
    assert metric(record, "gate.save_hit_at_3_change.ci_low") == [(0, -0.004)]
    assert metric(record, "gate.calibration.threshold_low") == [(0, 0.5)]
    assert metric(record, "gate.calibration.threshold_high") == [(0, 2.0)]
    assert metric(record, "gate.calibration.passed") == [(0, 0.0)]
    assert metric(record, "gate.scores_not_constant.value") == []  # no value: no point, not a 0
    assert metric(record, "gate.scores_not_constant.threshold") == [(0, 1e-06)]
    assert metric(record, "candidate_save_hit_at_3") == [(0, 0.41)]
    assert metric(record, "champion_save_hit_at_3") == [(0, 0.405)]


def test_train_loss_per_step_from_the_curve_else_per_epoch() -> None:
    train = example_summaries()["train"]
    assert isinstance(train, TrainSummary)
    # the example's two epochs of 196 steps each: without a curve, each epoch's loss at its last step
    without = retrain_record(folder())
    assert metric(without, "train_loss") == [(196, 0.125), (392, 0.118)]
    curve = TrainingCurve(
        every_steps=49,
        points=[
            CurvePoint(
                step=49 * (i + 1),
                epoch=1 + i // 4,
                phase="F" if i < 4 else "J",
                loss=0.2 - i / 100,
                samples=1,
            )
            for i in range(8)
        ],
    )
    with_curve = retrain_record(folder(curve=curve))
    losses = metric(with_curve, "train_loss")
    assert [s for s, _ in losses] == [49, 98, 147, 196, 245, 294, 343, 392]
    assert len(losses) > len(train.epochs)
    assert metric(with_curve, "train_loss_epoch") == [(1, 0.125), (2, 0.118)]
    assert metric(with_curve, "eval_save_hit_at_3") == [(2, 0.41)]  # epoch 1 was not evaluated
    assert metric(with_curve, "lookup_share.frozen") == [(0, 0.3)]


def test_params_are_the_effective_config_with_the_sources_that_are_not_defaults() -> None:
    params = config_params(EFFECTIVE)
    assert params["recipe.epochs"] == "3" and params["recipe.schedule"] == "F,J,J"
    assert params["recipe.history_features"] == "false" and params["gate.min_hit"] == "0.2"
    assert params["recipe.epochs.source"] == "params"
    assert params["recipe.warm_start.source"] == "file:/ws/ranker.toml"
    assert params["window.days.source"] == "env"
    assert "gate.min_hit.source" not in params and "recipe.history_features.source" not in params
    long = config_params({"config": {"features": {"views": ["x" * 100] * 100}}, "sources": {}})
    assert len(long["features.views"]) == MAX_PARAM_VALUE_CHARS
    assert config_params(None) == {}


def _variant(name: str) -> dict[str, Any]:
    """The example run changed into each kind of outcome."""
    ex = example_summaries()
    decide, promote, validate = ex["decide"], ex["promote"], ex["validate"]
    assert isinstance(decide, DecideSummary) and isinstance(promote, PromoteSummary)
    assert isinstance(validate, ValidationSummary)
    reject = RejectSummary(version="v0003", failed_checks=["auc_drop"], reason="gate rejected: auc_drop")
    dry = decide.model_copy(
        update={"branch": "keep_champion", "dry_run": True, "decision": "reject", "reason": "dry run"}
    )
    nan = StepError(step="train", exit_code=2, error="loss is NaN at epoch 2")
    return {
        "rejected": {"promote": None, "reject": reject},
        "dry-run-kept": {"promote": None, "decide": dry},
        "promoted-forced": {"promote": promote.model_copy(update={"forced": True})},
        "validation-stopped": {
            "status": "failed",
            "failed_step": "validate",
            "validate_": validate.model_copy(update={"verdict": "fail"}),
            "train": None,
        },
        "failed": {"status": "failed", "failed_step": "train", "train": None, "errors": {"train": nan}},
    }[name]


@pytest.mark.parametrize(
    ("decision", "status"),
    [
        ("rejected", "FINISHED"),
        ("dry-run-kept", "FINISHED"),
        ("promoted-forced", "FINISHED"),
        ("validation-stopped", "FAILED"),
        ("failed", "FAILED"),
    ],
)
def test_each_decision_is_tagged(decision: str, status: str) -> None:
    update = _variant(decision)
    record = retrain_record(folder(**update))
    assert record.tags["ranker.decision"] == decision
    assert record.status == status
    if status == "FAILED":
        assert record.tags["ranker.failed_step"] == update["failed_step"]
    else:
        assert "ranker.failed_step" not in record.tags
    if decision == "failed":
        assert record.tags["ranker.reason"] == "step train failed: loss is NaN at epoch 2"
    if decision == "rejected":
        assert record.tags["ranker.reason"] == "gate rejected: auc_drop"
    if decision == "dry-run-kept":
        assert record.tags["ranker.champion"] == record.tags["ranker.champion_before"] == "v0002"
        assert "gate reject" in record.tags["ranker.reason"]


def test_partitions_hash_is_the_data_not_the_order() -> None:
    days = [(dt.date(2026, 12, d), f"{d:02d}" * 32) for d in range(1, 5)]
    assert partitions_sha(days) == partitions_sha(reversed(days))
    changed = [*days[:-1], (days[-1][0], "ff" * 32)]
    assert partitions_sha(changed) != partitions_sha(days)
    assert partitions_sha([*days, (dt.date(2026, 12, 5), None)]) is None  # an old build: no claim


def test_a_training_run_of_its_own() -> None:
    train = example_summaries()["train"]
    assert isinstance(train, TrainSummary)
    record = train_record(
        train, run_name="2026-12-01_20d-20261201T030000", effective=EFFECTIVE, partitions="ab" * 32
    )
    assert record.record_id == "train:2026-12-01_20d-20261201T030000"
    assert record.experiment == "ranker-train"
    assert record.tags["ranker.version"] == "v0003" and record.tags["ranker.partitions_sha"] == "ab" * 32
    assert record.params["recipe.epochs"] == "3"
    assert metric(record, "final_save_hit_at_3") == [(0, 0.41)]
    failed = train_record(train.model_copy(update={"exit_code": 2, "error": "boom"}), run_name="x")
    assert failed.status == "FAILED" and failed.tags["ranker.reason"] == "boom"


def test_a_run_folder_is_read_into_the_record(tmp_path: Path) -> None:
    """The folder the steps recorded, with its run folder's files: artifacts, curve, config, data hash."""
    ws = Workspace(tmp_path / "home")
    ex = example_summaries()
    run_dir = ws.root / "runs" / "r1"
    run_dir.mkdir(parents=True)
    (run_dir / "effective_config.json").write_text(json.dumps(EFFECTIVE))
    (run_dir / "report.md").write_text("# report\n")
    curve = TrainingCurve(
        every_steps=10,
        points=[CurvePoint(step=10 * i, epoch=1, phase="F", loss=0.3, samples=i) for i in (1, 2, 3)],
    )
    (run_dir / "training_curve.json").write_text(curve.model_dump_json())
    manifest = ws.root / "windows" / "m.json"
    manifest.parent.mkdir(parents=True)
    manifest.write_text(
        json.dumps(
            {
                "train": [{"date": "2026-11-30", "sha256": "aa" * 32, "rows": 1}],
                "eval": {"date": "2026-12-01", "sha256": "bb" * 32, "rows": 1},
            }
        )
    )
    train = ex["train"]
    window = ex["window"]
    assert isinstance(train, TrainSummary) and isinstance(window, WindowSummary)
    train = train.model_copy(
        update={
            "run_dir": str(run_dir),
            "effective_config": str(run_dir / "effective_config.json"),
            "window": train.window.model_copy(update={"manifest": str(manifest)}),
        }
    )
    for step, summary in {**ex, "train": train}.items():
        if step in ("window", "validate", "train", "gate", "decide", "reject"):
            path = ws.step_summary_path("r1", step)
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(json.dumps({**summary.body(), "step": step, "run_id": "r1"}))
    ws.step_summary_path("r1", "promote").write_text("{torn")  # left out, never a crash
    f = read_retrain_folder(ws.pipeline / "r1", "r1", RunOutcome(status="success"), now=lambda: 2e9)
    assert f.promote is None and f.reject is not None
    assert f.curve == curve
    assert f.partitions_sha == partitions_sha(
        [(dt.date(2026, 11, 30), "aa" * 32), (dt.date(2026, 12, 1), "bb" * 32)]
    )
    names = sorted(Path(a).name for a in f.artifacts)
    run_files = ["report.md", "training_curve.json", "effective_config.json"]
    steps = ["window.json", "validate.json", "train.json", "gate.json", "decide.json", "reject.json"]
    assert names == sorted([*run_files, *steps])
    assert f.end_ms == 2_000_000_000_000 and f.start_ms is not None and f.start_ms < f.end_ms
    record = retrain_record(f)
    assert record.tags["ranker.decision"] == "rejected"
    assert record.tags["ranker.partitions_sha"] == f.partitions_sha
    assert len(metric(record, "train_loss")) == 3


def test_a_base_model_and_a_pretrain_that_failed() -> None:
    from ranking.pipeline.pretrain import PretrainSummary

    train = example_summaries()["train"]
    assert isinstance(train, TrainSummary)
    base = PretrainSummary(
        run_id="pretrain__2026-12-01__x",
        for_end=dt.date(2026, 12, 1),
        base_range=(dt.date(2026, 10, 1), dt.date(2026, 11, 11)),
        days=41,
        schedule="F,J",
        epochs=2,
        version="v0004",
        previous_base="v0001",
        moved=True,
        steps=[],
        duration_seconds=30.0,
    )
    record = pretrain_record(base, train.model_copy(update={"version": "v0004"}))
    assert (record.record_id, record.experiment) == ("pretrain:pretrain__2026-12-01__x", "ranker-pretrain")
    assert record.tags["ranker.decision"] == "base-moved" and record.tags["ranker.version"] == "v0004"
    assert record.tags["ranker.base_before"] == "v0001" and record.tags["ranker.kind"] == "pretrain"
    assert record.tags["ranker.base_range"] == "2026-10-01..2026-11-11"
    assert record.status == "FINISHED" and metric(record, "train_loss")
    # the summary of a failed pretrain keeps exit code 0 (the command's is 2): its error says it failed
    failed = base.model_copy(
        update={"version": None, "moved": False, "failed_step": "window", "error": "no data"}
    )
    record = pretrain_record(failed, None)
    assert record.status == "FAILED" and record.tags["ranker.decision"] == "failed"
    assert record.tags["ranker.failed_step"] == "window" and record.tags["ranker.reason"] == "no data"
    assert "ranker.version" not in record.tags
