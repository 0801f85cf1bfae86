"""Step summaries map to the catalogue's series: every documented field, bounds, fallbacks and
clear errors for malformed fields."""

from __future__ import annotations

import json
import math

import pytest
from monitoring_fixtures import EPOCH, EVAL, EXAMPLES, NOW, publish, write_contract_run, write_summary

from ranking.core.workspace import Workspace
from ranking.monitoring.catalogue import KNOWN_STEPS, MODELS, PHASES, STATUSES
from ranking.monitoring.delivery import textfile_path
from ranking.monitoring.fields import MetricsInputError
from ranking.monitoring.publish import publish as publish_run
from ranking.monitoring.state import state_path


def test_contract_run_maps_every_documented_field(ws: Workspace) -> None:
    write_contract_run(ws, "r1", train_seconds=100.0, joint_exposed=0.08)
    v = publish(ws, "r1")

    assert v["ranker_last_run_timestamp_seconds"] == NOW
    assert v["ranker_last_success_timestamp_seconds"] == NOW
    assert "ranker_last_failure_timestamp_seconds" not in v
    assert v['ranker_last_run_status{status="success"}'] == 1
    assert v['ranker_last_run_status{status="failed"}'] == 0
    assert v["ranker_last_run_promoted"] == 1
    # stages and the whole run (sum of stages without a 'run' summary)
    assert v['ranker_stage_duration_seconds{stage="train"}'] == 100.0
    assert v['ranker_stage_duration_seconds{stage="window"}'] == 12.5
    assert v['ranker_stage_duration_seconds{stage="gate"}'] == 3.25
    assert v['ranker_stage_duration_seconds{stage="materialize"}'] == 4.0
    assert v['ranker_stage_duration_seconds{stage="validate"}'] == 0.4
    assert v["ranker_run_duration_seconds"] == pytest.approx(100 + 12.5 + 0.4 + 3.25 + 4.0)
    assert not any(k.startswith("ranker_stage_duration_baseline_seconds") for k in v)  # first run
    # training
    assert v['ranker_train_info{pipeline="semisync",schedule="delayed"}'] == 1
    assert v["ranker_train_epochs"] == 3
    assert v["ranker_train_samples_per_second"] == 4300.0
    assert v['ranker_train_epoch_loss{epoch="2",phase="joint"}'] == 0.118
    assert v['ranker_train_epoch_samples_per_second{epoch="1",phase="frozen"}'] == 5000.0
    assert v['ranker_train_epoch_duration_seconds{epoch="3",phase="joint"}'] == pytest.approx(35.0)
    # lookup share by phase: duration-weighted over the phase's epochs
    assert v['ranker_embedding_lookup_ratio{phase="frozen"}'] == pytest.approx(0.18)
    assert v['ranker_embedding_lookup_ratio{phase="joint"}'] == pytest.approx(0.31)
    assert v['ranker_embedding_lookup_exposed_ratio{phase="joint"}'] == pytest.approx(0.08)
    # candidate and champion from the gate
    assert v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'] == 0.41
    assert v['ranker_eval_save_hit_at_3_ratio{model="champion"}'] == 0.405
    assert v['ranker_eval_auc_ratio{model="champion"}'] == 0.735
    assert v['ranker_eval_normalized_entropy{model="candidate"}'] == 0.93
    # gate
    assert v["ranker_gate_passed"] == 1
    assert v['ranker_gate_check_passed{check="save_hit_at_3_change"}'] == 1
    assert v['ranker_gate_check_value{check="save_hit_at_3_floor"}'] == 0.41
    assert v['ranker_gate_check_threshold{check="save_hit_at_3_floor"}'] == 0.05
    # a [low, high] threshold is not a single number: no series rather than a wrong one
    assert 'ranker_gate_check_threshold{check="calibration"}' not in v
    assert 'ranker_gate_check_value{check="calibration"}' in v
    assert v["ranker_gate_relative_change"] == 0.0125
    assert v["ranker_gate_relative_change_ci_lower"] == -0.004
    assert v["ranker_gate_relative_change_ci_upper"] == 0.03
    assert v["ranker_gate_consecutive_rejections"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 1
    assert v['ranker_promotions_total{forced="true"}'] == 0
    assert v["ranker_rejections_total"] == 0
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW
    # data
    assert v['ranker_window_rows{split="train"}'] == 200_000
    assert v['ranker_window_rows{split="eval"}'] == 10_000
    assert v["ranker_window_length_days"] == 20
    assert v['ranker_window_days{state="built"}'] == 1
    assert v['ranker_window_days{state="reused"}'] == 19
    assert v["ranker_window_label_rate_ratio"] == 0.031
    assert v["ranker_window_end_timestamp_seconds"] == 1_796_083_200.0  # 2026-12-01T00:00Z
    assert v["ranker_feature_freshness_lag_seconds"] == 7200.0
    assert v["ranker_feature_source_end_timestamp_seconds"] == 1_796_083_200.0  # end of 2026-11-30
    assert v["ranker_materialize_end_timestamp_seconds"] == 1_796_083_200.0
    # the data validation: a warning (row_count_jump), every kind present with its count, the scores
    assert v["ranker_validation_passed"] == 1
    assert v['ranker_validation_anomalies{policy="warn"}'] == 1
    assert v['ranker_validation_anomalies{policy="fail"}'] == 0
    assert v['ranker_validation_anomalies_by_kind{kind="row_count_jump"}'] == 1
    assert v['ranker_validation_anomalies_by_kind{kind="leakage_event_time"}'] == 0
    assert v['ranker_validation_drift_score{comparison="drift",feature="pin_stats__save_rate_28d"}'] == 0.004
    assert v['ranker_validation_drift_score{comparison="skew",feature="pin_stats__save_rate_28d"}'] == 0.002
    assert v['ranker_gate_check_warning{check="leakage"}'] == 0
    # counters start at zero for every label value (no missing series before the first event)
    assert v['ranker_runs_total{status="success"}'] == 1
    assert v['ranker_runs_total{status="failed"}'] == 0
    assert all(v[f'ranker_run_failures_total{{step="{s}"}}'] == 0 for s in KNOWN_STEPS)
    assert v["ranker_metrics_push_failures_total"] == 0


def test_ratio_series_are_between_0_and_1_and_labels_are_bounded(ws: Workspace) -> None:
    write_contract_run(ws, "r1")
    result = publish_run(ws, "r1", now=NOW)
    for s in result.samples:
        if s.name.endswith("_ratio"):
            assert 0.0 <= s.value <= 1.0, s.key
        labels = dict(s.labels)
        if "phase" in labels:
            assert labels["phase"] in PHASES
        if "model" in labels:
            assert labels["model"] in MODELS
        if "status" in labels:
            assert labels["status"] in STATUSES


def test_the_exposed_share_is_exported_only_as_measured(ws: Workspace) -> None:
    """A summary without the exposed share (timing off, an older trainer) exports none: it is not
    stood in for by the lookup share, not even for the sync pipeline."""
    epoch = {**EPOCH, "epoch": 1, "phase": "joint", "lookup_ratio": 0.2, "duration_seconds": 3.0}
    del epoch["exposed_lookup_ratio"]
    write_summary(ws, "r1", "train", {"pipeline": "sync", "schedule": "joint", "epochs": [epoch]})
    v = publish(ws, "r1")
    assert v['ranker_embedding_lookup_ratio{phase="joint"}'] == pytest.approx(0.2)
    assert 'ranker_embedding_lookup_exposed_ratio{phase="joint"}' not in v
    assert 'ranker_embedding_lookup_ratio{phase="frozen"}' not in v  # no frozen epoch ran
    measured = {**epoch, "exposed_lookup_ratio": 0.2}  # sync: what the trainer measures, equal
    write_summary(ws, "r2", "train", {"pipeline": "sync", "schedule": "joint", "epochs": [measured]})
    v = publish(ws, "r2")
    assert v['ranker_embedding_lookup_exposed_ratio{phase="joint"}'] == pytest.approx(0.2)


def test_candidate_falls_back_to_train_eval_without_gate(ws: Workspace) -> None:
    write_summary(ws, "r1", "train", {"eval": {**EVAL, "save_hit_at_3": 0.3, "auc": 0.7, "ne": 0.95}})
    v = publish(ws, "r1")
    assert v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'] == 0.3
    assert not any('model="champion"' in k for k in v)
    assert "ranker_gate_passed" not in v


def test_the_run_summary_gives_the_run_duration(ws: Workspace) -> None:
    write_contract_run(ws, "r1")
    write_summary(ws, "r1", "run", {"duration_seconds": 222.0, "decision": "pass"})
    v = publish(ws, "r1")
    assert v["ranker_run_duration_seconds"] == 222.0
    assert 'ranker_stage_duration_seconds{stage="run"}' not in v


@pytest.mark.parametrize(
    ("step", "body", "message"),
    [
        ("window", {"rows_train": "many"}, "rows_train: Input should be a valid integer.*'many'"),
        ("window", {"rows_train": None}, "rows_train: Input should be a valid integer"),
        ("window", {"days": None}, r"window\.json: days: "),
        (
            "train",
            {"epochs": [{**EPOCH, "phase": "warm"}]},
            "epochs.0.phase: Input should be 'frozen' or 'joint'",
        ),
        ("train", {"epochs": [{**EPOCH, "epoch": "one"}]}, "epochs.0.epoch: Input should be a valid integer"),
        ("train", {"epochs": [{**EPOCH, "epoch": 1000}]}, r"epoch must be in \[0, 1000\)"),
        ("train", {"epochs": {"1": {}}}, "epochs: Input should be a valid list"),
        ("train", {"eval": {"auc": 0.5}}, "eval.save_hit_at_3: Field required"),
        ("gate", {"decision": "maybe"}, "decision: Input should be 'pass' or 'reject'"),
        (
            "gate",
            {"checks": [{**EXAMPLES["gate"]["checks"][0], "name": 'bad"label'}]},
            "not a safe label value",
        ),
        ("gate", {"checks": [EXAMPLES["gate"]["checks"][0]] * 2}, "duplicate check name"),
        ("gate", {"ci": [0.1]}, "ci.1: Field required"),
        ("train", {"schedule": "F J J"}, "schedule"),
        ("window", {"end": "yesterday"}, "end: Input should be a valid date"),
        ("window", {"surprise": 1, "rows_train": "many"}, "rows_train"),  # unknown fields: ignored by readers
        ("window", [1, 2], "expected a JSON object"),
    ],
)
def test_malformed_fields_raise_clear_errors(ws: Workspace, step: str, body, message: str) -> None:
    """Every summary is read through its model (ranking.core.summaries): a field that does not
    fit names the file, the field and the value."""
    path = ws.step_summary_path("d1", step)
    path.parent.mkdir(parents=True)
    recorded = {**EXAMPLES[step], "step": step, **body} if isinstance(body, dict) else body
    path.write_text(json.dumps(recorded))
    with pytest.raises(MetricsInputError, match=message):
        publish_run(ws, "d1", now=NOW)
    assert not state_path(ws).exists()  # nothing half-updated
    assert not textfile_path(ws).exists()


def test_nan_metric_values_pass_through(ws: Workspace) -> None:
    write_summary(ws, "d1", "train", {"eval": {**EVAL, "save_hit_at_3": float("nan"), "auc": 0.5, "ne": 1.0}})
    v = publish(ws, "d1")
    assert math.isnan(v['ranker_eval_save_hit_at_3_ratio{model="candidate"}'])
