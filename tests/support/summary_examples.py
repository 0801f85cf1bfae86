"""One complete step summary per step (a day-2 run that passed the gate), built from the models of
ranking/core/summaries.py: tests build their summaries on these, and the published JSON Schema
carries them as ``examples`` (infra/summaries_doc.py, ``make schema``)."""

from __future__ import annotations

import datetime as dt
from typing import Any

from ranking.core.summaries import (
    Anomaly,
    CandidateMetrics,
    DataValidation,
    DecideSummary,
    EpochSummary,
    EvalSummary,
    FreshnessSummary,
    GateCheck,
    GateSummary,
    GateThresholds,
    HeuristicSummary,
    Lineage,
    MaterializeSummary,
    MetricsSummary,
    ModelMetrics,
    PromoteSummary,
    RejectSummary,
    RunSummary,
    SliceSummary,
    StepBrief,
    StepSummary,
    TrackSummary,
    TrainSummary,
    TrainWindow,
    ValidationSummary,
    WarmStart,
    WindowSummary,
)


def example_summaries() -> dict[str, StepSummary]:
    """One complete summary per step (a day-2 run that passed the gate): tests build their
    summaries on these, and the schema carries them as ``examples``."""
    metrics: dict[str, Any] = {
        "save_hit_at_3": 0.41,
        "auc": 0.74,
        "ne": 0.93,
        "log_loss": 0.12,
        "calibration": 1.02,
        "base_rate": 0.031,
        "rows": 10_000,
        "requests_with_save": 310,
    }
    day, window_id, home = dt.date(2026, 12, 1), "9f" * 32, "/ws"
    at = dt.datetime(2026, 12, 1, 3, 0, tzinfo=dt.UTC)
    epoch: dict[str, Any] = {
        "samples": 200_000,
        "steps": 196,
        "samples_per_second": 4000.0,
        "lookup_ratio": 0.3,
    }
    epochs = [
        EpochSummary(
            epoch=1, phase="frozen", loss=0.125, duration_seconds=50.0, exposed_lookup_ratio=0.2, **epoch
        ),
        EpochSummary(
            epoch=2,
            phase="joint",
            loss=0.118,
            duration_seconds=50.0,
            exposed_lookup_ratio=0.21,
            **epoch,
            eval=EvalSummary(**metrics),
        ),
    ]
    check = GateCheck(
        name="save_hit_at_3_change", passed=True, value=0.0125, threshold=-0.1, detail="", ci=(-0.004, 0.03)
    )
    # the default gate as a verdict recorded before the slice guard holds it (its keys left out)
    thresholds = {k: v for k, v in GateThresholds().model_dump().items() if not k.startswith("slice_")}
    found = [
        FreshnessSummary(
            latest_source_date=day, earliest_source_date=dt.date(2026, 10, 1), source_days=62, lag_seconds=7200.0,
            reference=at, max_lag_hours=None,
        ),
        WindowSummary(
            window_id=window_id, end=day, days=20, rows_train=200_000, rows_eval=10_000, label_rate=0.031,
            days_built=1, days_reused=20, days_repaired={}, missing_days=[], feature_version="ab82022137bbefad",
            duration_seconds=12.5, manifest=f"{home}/windows/2026-12-01_20d/manifest.json",
        ),
        ValidationSummary(
            window_id=window_id, end=day, days=20, verdict="warn",
            anomalies=[
                Anomaly(
                    kind="row_count_jump", feature=None, day=day, statistic="rows", value=4_000.0, threshold=5_000.0,
                    compared="14 days 2026-11-17..2026-11-30", detail="4000 rows vs a median of 10000 in its history (-60%)",
                    history_days=14, policy="warn",
                ),
            ],
            counts={"fail": 0, "warn": 1, "accepted": 0}, leak_checked=True, leak_clean=True,
            schema_path=f"{home}/validation/schema/3d535374b460fb6d.json", schema_inferred=False, weekly=False,
            drift={"pin_stats__save_rate_28d": 0.004}, skew={"pin_stats__save_rate_28d": 0.002}, statistics_computed=1,
            report=f"{home}/validation/windows/2026-12-01_20d/report.md", duration_seconds=0.4,
        ),
        MaterializeSummary(
            mode="incremental", start=None, end=day, end_timestamp=at, feature_views=["pin_stats", "user_stats"],
            online_store="sqlite", duration_seconds=4.0,
        ),
        TrainSummary(
            run_dir=f"{home}/runs/r1", schedule="F,J", schedule_spec="delayed", pipeline="semisync", remedy="none",
            seed=0, epochs=epochs, eval=EvalSummary(**metrics), samples_per_second=4000.0,
            wall_seconds_by_phase={"frozen": 50.0, "joint": 50.0}, lookup_ratio_by_phase={"frozen": 0.3, "joint": 0.3},
            exposed_lookup_ratio_by_phase={"frozen": 0.2, "joint": 0.21},
            window=TrainWindow(
                window_id=window_id, manifest=f"{home}/windows/2026-12-01_20d/manifest.json", end=day, days=20,
                rows_train=200_000, rows_eval=10_000, feature_version="ab82022137bbefad",
                train_dates=[day - dt.timedelta(days=20 - i) for i in range(20)], eval_date=day,
            ),
            warm_start=WarmStart(source="base v0001", path=f"{home}/registry/versions/v0001/model.pt", scope="all"),
            resumed_after_epoch=None, world_size=1, device="cpu", sharding={"t_pin_id": "table_wise/fused@0"},
            code_version="0.1.0", started_at=at, duration_seconds=100.0,
            lineage=Lineage(kind="full", parent=None, full_retrain_end=day, since=None, reason="full retrain"),
            data_validation=DataValidation(
                verdict="warn", window_id=window_id, leak_checked=True, leak_clean=True,
                counts={"fail": 0, "warn": 1, "accepted": 0}, accepted=[],
                report=f"{home}/validation/windows/2026-12-01_20d/report.md",
            ),
            effective_config=f"{home}/runs/r1/effective_config.json", version="v0003",
        ),
        GateSummary(
            decision="pass", checks=[check], failed_checks=[],
            candidate=CandidateMetrics(version="v0003", random_save_hit_at_3=0.3, **metrics),
            champion=ModelMetrics(version="v0002", **{**metrics, "save_hit_at_3": 0.405}),
            relative_change=0.0125, ci=(-0.004, 0.03), eval_date=day, config=GateThresholds.model_validate(thresholds),
            anchor=None, reference=None,
            heuristic=HeuristicSummary(
                name="pin_save_rate", **{**metrics, "save_hit_at_3": 0.35}, relative_change=0.171, ci=(0.12, 0.22),
                champion_relative_change=0.157, margin=0.0, policy="warn",
            ),
            slices=[
                SliceSummary(
                    name="user:first_seen", requests_with_save=61, candidate=0.31, heuristic=0.3, champion=0.33,
                    relative_change=-0.061, ci=(-0.2, 0.08), judged=True, judged_ci=(-0.29, 0.17), loss_p=0.21,
                ),
                SliceSummary(
                    name="user_stats__country:other", requests_with_save=12, candidate=0.42, heuristic=0.33,
                    champion=0.4, relative_change=0.05, ci=(-0.18, 0.3),
                ),
            ],
            duration_seconds=3.25,
        ),
        DecideSummary(
            branch="promote", reason="gate passed", force=False, version="v0003", end=day, decision="pass",
            failed_checks=[], champion="v0002", champion_trained_for=day - dt.timedelta(days=1), dry_run=False,
            force_promote=False,
        ),
        PromoteSummary(version="v0003", previous="v0002", reason="gate passed", forced=False, noop=False, seq=3),
        RejectSummary(version="v0003", failed_checks=["save_hit_at_3_change"], reason="gate rejected"),
        MetricsSummary(
            status="success", failed_step=None, delivery="textfile", target=f"{home}/metrics/ranker.prom",
            push_ok=None, push_attempts=None, push_error=None, steps=["gate", "promote", "train", "window"],
            series=71,
        ),
        TrackSummary(
            record_id="retrain:manual__2026-12-01__20261201T030000Z-1a2b", experiment="ranker-retrain",
            mlflow_run_id="0f" * 16, url="http://127.0.0.1:5000/#/experiments/1/runs/" + "0f" * 16,
            queued=False, decision="promoted",
            message="tracked retrain:manual__2026-12-01__20261201T030000Z-1a2b as MLflow run " + "0f" * 16,
        ),
        RunSummary(
            end=day, days=20, dry_run=False, decision="pass", version="v0003", promoted=True, forced=False,
            kept_champion=False, attempt=1, failed_checks=[],
            steps=[StepBrief(step="window", exit_code=0, duration_seconds=12.5)], champion="v0003",
            duration_seconds=120.0,
        ),
    ]  # fmt: skip
    return {str(m.step): m for m in found}
