"""The monitoring fold pinned (issue 22: build_samples and advance_state split without a change):
a sequence of runs (pass, rejects, a forced promotion, a failed run, a republish, an evaluate-only
run, a no-op promotion) gives the same state after every run, and every run the same series, with
the same names, labels, values and order."""

from __future__ import annotations

import hashlib
import json
from typing import Any

import pytest
from monitoring_fixtures import DAY, EVAL, NOW, write_contract_run, write_summary

from ranking.core.workspace import Workspace
from ranking.monitoring import state as state_module
from ranking.monitoring.runs import load_run
from ranking.monitoring.samples import build_samples
from ranking.monitoring.state import MetricsState, advance_state

Folded = tuple[list[dict[str, Any]], list[list[tuple[str, float]]]]


def fold_sequence(ws: Workspace) -> Folded:
    """The state after each publish and the samples each publish produced."""
    write_contract_run(ws, "d1")
    write_contract_run(ws, "d2", decision="reject", train_seconds=90.0)
    write_contract_run(ws, "d3", decision="reject", champion=False)
    write_contract_run(ws, "d4", decision="reject")
    write_summary(ws, "d4", "promote", {"version": "v-d4", "forced": True, "noop": False})
    write_summary(ws, "d5", "window", {"rows_train": 10, "duration_seconds": 1.0})
    write_summary(ws, "d6", "evaluate", {"metrics": {**EVAL, "save_hit_at_3": 0.3}, "duration_seconds": 2.0})
    write_contract_run(ws, "d7", train_seconds=50.0)
    write_summary(ws, "d7", "promote", {"version": "v-d6", "forced": False, "noop": True})
    write_contract_run(ws, "d8", train_seconds=70.0, latest_source_date="2026-12-02", end="2026-12-03")
    steps = [
        ("d1", {}),
        ("d2", {}),
        ("d3", {}),
        ("d4", {}),
        ("d5", {"status": "failed", "failed_step": "train"}),
        ("d2", {}),  # a republish of an older run
        ("d6", {}),
        ("d7", {}),
        ("d8", {}),
        ("d5", {"status": "failed", "failed_step": "train"}),
    ]
    state = MetricsState()
    states, samples = [], []
    for i, (rid, kw) in enumerate(steps):
        run = load_run(ws, rid, **kw)
        state = advance_state(state, run, NOW + i * DAY)
        states.append(state.to_json())
        samples.append([(s.key, s.value) for s in build_samples(run, state, NOW + i * DAY + 5)])
    return states, samples


# per publish: runs success, failed; promotions false, true; rejections; consecutive rejections;
# last success, failure, promotion; feature source end; materialize end; counted run ids in order
STATES = [
    (1.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1796000000.0, None, 1796000000.0, 1796083200.0, 1796083200.0, ["d1"]),
    (
        2.0,
        0.0,
        1.0,
        0.0,
        1.0,
        1.0,
        1796086400.0,
        None,
        1796000000.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2"],
    ),
    (
        3.0,
        0.0,
        1.0,
        0.0,
        2.0,
        2.0,
        1796172800.0,
        None,
        1796000000.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3"],
    ),
    (
        4.0,
        0.0,
        1.0,
        1.0,
        3.0,
        0.0,
        1796259200.0,
        None,
        1796259200.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3", "d4"],
    ),
    (
        4.0,
        1.0,
        1.0,
        1.0,
        3.0,
        0.0,
        1796259200.0,
        1796345600.0,
        1796259200.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3", "d4", "d5"],
    ),
    (
        4.0,
        1.0,
        1.0,
        1.0,
        3.0,
        0.0,
        1796432000.0,
        1796345600.0,
        1796259200.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3", "d4", "d5"],
    ),
    (
        5.0,
        1.0,
        1.0,
        1.0,
        3.0,
        0.0,
        1796518400.0,
        1796345600.0,
        1796259200.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3", "d4", "d5", "d6"],
    ),
    (
        6.0,
        1.0,
        1.0,
        1.0,
        3.0,
        0.0,
        1796604800.0,
        1796345600.0,
        1796259200.0,
        1796083200.0,
        1796083200.0,
        ["d1", "d2", "d3", "d4", "d5", "d6", "d7"],
    ),
    (
        7.0,
        1.0,
        2.0,
        1.0,
        3.0,
        0.0,
        1796691200.0,
        1796345600.0,
        1796691200.0,
        1796256000.0,
        1796256000.0,
        ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"],
    ),
    (
        7.0,
        1.0,
        2.0,
        1.0,
        3.0,
        0.0,
        1796691200.0,
        1796777600.0,
        1796691200.0,
        1796256000.0,
        1796256000.0,
        ["d1", "d2", "d3", "d4", "d5", "d6", "d7", "d8"],
    ),
]

FINAL = {
    "runs_total": {"success": 7.0, "failed": 1.0},
    "run_failures_total": {
        "freshness": 0.0,
        "window": 0.0,
        "validate": 0.0,
        "train": 1.0,
        "evaluate": 0.0,
        "gate": 0.0,
        "promote": 0.0,
        "reject": 0.0,
        "materialize": 0.0,
        "metrics": 0.0,
        "run": 0.0,
        "other": 0.0,
    },
    "promotions_total": {"false": 2.0, "true": 1.0},
    "rejections_total": 3.0,
    "push_failures_total": 0.0,
    "consecutive_rejections": 0.0,
    "last_success_timestamp": 1796691200.0,
    "last_failure_timestamp": 1796777600.0,
    "last_promotion_timestamp": 1796691200.0,
    "feature_source_end_timestamp": 1796256000.0,
    "materialize_end_timestamp": 1796256000.0,
    "duration_history": {
        "gate": [["d1", 3.25], ["d3", 3.25], ["d4", 3.25], ["d2", 3.25], ["d7", 3.25], ["d8", 3.25]],
        "materialize": [["d1", 4.0], ["d3", 4.0], ["d4", 4.0], ["d2", 4.0], ["d7", 4.0], ["d8", 4.0]],
        "train": [["d1", 100.0], ["d3", 100.0], ["d4", 100.0], ["d2", 90.0], ["d7", 50.0], ["d8", 70.0]],
        "validate": [["d1", 0.4], ["d3", 0.4], ["d4", 0.4], ["d2", 0.4], ["d7", 0.4], ["d8", 0.4]],
        "window": [["d1", 12.5], ["d3", 12.5], ["d4", 12.5], ["d2", 12.5], ["d7", 12.5], ["d8", 12.5]],
        "evaluate": [["d6", 2.0]],
    },
    "counted": {
        "d1": ["promotion:false", "status:success"],
        "d2": ["rejection", "status:success"],
        "d3": ["rejection", "status:success"],
        "d4": ["promotion:true", "rejection", "status:success"],
        "d5": ["failure:train", "status:failed"],
        "d6": ["status:success"],
        "d7": ["status:success"],
        "d8": ["promotion:false", "status:success"],
    },
    "last_publish": {},
}


def _row(s: dict[str, Any]) -> tuple[Any, ...]:
    return (
        s["runs_total"]["success"],
        s["runs_total"]["failed"],
        s["promotions_total"]["false"],
        s["promotions_total"]["true"],
        s["rejections_total"],
        s["consecutive_rejections"],
        s["last_success_timestamp"],
        s["last_failure_timestamp"],
        s["last_promotion_timestamp"],
        s["feature_source_end_timestamp"],
        s["materialize_end_timestamp"],
        list(s["counted"]),
    )


def test_the_state_after_each_run_is_as_pinned(ws: Workspace) -> None:
    states, _ = fold_sequence(ws)
    assert [_row(s) for s in states] == STATES
    assert states[-1] == FINAL
    assert json.dumps(states[-1]) == json.dumps(FINAL)  # the state file's key order too


def test_the_oldest_counted_runs_and_durations_are_dropped(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(state_module, "COUNTED_RUNS_KEPT", 3)
    monkeypatch.setattr(state_module, "DURATION_HISTORY", 2)
    states, _ = fold_sequence(ws)
    assert states[-1]["counted"] == {
        "d7": ["status:success"],
        "d8": ["promotion:false", "status:success"],
        "d5": ["failure:train", "status:failed"],
    }
    assert states[-1]["duration_history"] == {
        "gate": [["d2", 3.25], ["d7", 3.25], ["d8", 3.25]],
        "materialize": [["d2", 4.0], ["d7", 4.0], ["d8", 4.0]],
        "train": [["d2", 90.0], ["d7", 50.0], ["d8", 70.0]],
        "validate": [["d2", 0.4], ["d7", 0.4], ["d8", 0.4]],
        "window": [["d2", 12.5], ["d7", 12.5], ["d8", 12.5]],
        "evaluate": [["d6", 2.0]],
    }


CONTRACT_RUN = [
    ("ranker_last_run_timestamp_seconds", 1796000005.0),
    ("ranker_last_success_timestamp_seconds", 1796000000.0),
    ('ranker_last_run_status{status="success"}', 1.0),
    ('ranker_last_run_status{status="failed"}', 0.0),
    ("ranker_last_run_promoted", 1.0),
    ('ranker_runs_total{status="success"}', 1.0),
    ('ranker_runs_total{status="failed"}', 0.0),
    ('ranker_run_failures_total{step="freshness"}', 0.0),
    ('ranker_run_failures_total{step="window"}', 0.0),
    ('ranker_run_failures_total{step="validate"}', 0.0),
    ('ranker_run_failures_total{step="train"}', 0.0),
    ('ranker_run_failures_total{step="evaluate"}', 0.0),
    ('ranker_run_failures_total{step="gate"}', 0.0),
    ('ranker_run_failures_total{step="promote"}', 0.0),
    ('ranker_run_failures_total{step="reject"}', 0.0),
    ('ranker_run_failures_total{step="materialize"}', 0.0),
    ('ranker_run_failures_total{step="metrics"}', 0.0),
    ('ranker_run_failures_total{step="run"}', 0.0),
    ('ranker_run_failures_total{step="other"}', 0.0),
    ('ranker_stage_duration_seconds{stage="gate"}', 3.25),
    ('ranker_stage_duration_seconds{stage="materialize"}', 4.0),
    ('ranker_stage_duration_seconds{stage="train"}', 100.0),
    ('ranker_stage_duration_seconds{stage="validate"}', 0.4),
    ('ranker_stage_duration_seconds{stage="window"}', 12.5),
    ("ranker_run_duration_seconds", 120.15),
    ('ranker_train_info{pipeline="semisync",schedule="delayed"}', 1.0),
    ("ranker_train_samples_per_second", 4300.0),
    ("ranker_train_epochs", 3.0),
    ('ranker_train_epoch_loss{epoch="1",phase="frozen"}', 0.125),
    ('ranker_train_epoch_samples_per_second{epoch="1",phase="frozen"}', 5000.0),
    ('ranker_train_epoch_duration_seconds{epoch="1",phase="frozen"}', 30.0),
    ('ranker_train_epoch_loss{epoch="2",phase="joint"}', 0.118),
    ('ranker_train_epoch_samples_per_second{epoch="2",phase="joint"}', 4000.0),
    ('ranker_train_epoch_duration_seconds{epoch="2",phase="joint"}', 35.0),
    ('ranker_train_epoch_loss{epoch="3",phase="joint"}', 0.112),
    ('ranker_train_epoch_samples_per_second{epoch="3",phase="joint"}', 4000.0),
    ('ranker_train_epoch_duration_seconds{epoch="3",phase="joint"}', 35.0),
    ('ranker_embedding_lookup_ratio{phase="frozen"}', 0.18),
    ('ranker_embedding_lookup_exposed_ratio{phase="frozen"}', 0.15),
    ('ranker_embedding_lookup_ratio{phase="joint"}', 0.31000000000000005),
    ('ranker_embedding_lookup_exposed_ratio{phase="joint"}', 0.21),
    ('ranker_eval_save_hit_at_3_ratio{model="candidate"}', 0.41),
    ('ranker_eval_auc_ratio{model="candidate"}', 0.74),
    ('ranker_eval_normalized_entropy{model="candidate"}', 0.93),
    ('ranker_eval_save_hit_at_3_ratio{model="champion"}', 0.405),
    ('ranker_eval_auc_ratio{model="champion"}', 0.735),
    ('ranker_eval_normalized_entropy{model="champion"}', 0.94),
    ('ranker_eval_save_hit_at_3_ratio{model="heuristic"}', 0.35),
    ('ranker_eval_auc_ratio{model="heuristic"}', 0.74),
    ('ranker_eval_normalized_entropy{model="heuristic"}', 0.93),
    ('ranker_heuristic_relative_change{model="candidate"}', 0.171),
    ('ranker_heuristic_relative_change{model="champion"}', 0.157),
    ("ranker_heuristic_relative_change_ci_lower", 0.12),
    ('ranker_slice_requests_with_save{slice="user:first_seen"}', 61.0),
    ('ranker_slice_save_hit_at_3_ratio{model="candidate",slice="user:first_seen"}', 0.31),
    ('ranker_slice_save_hit_at_3_ratio{model="champion",slice="user:first_seen"}', 0.33),
    ('ranker_slice_save_hit_at_3_ratio{model="heuristic",slice="user:first_seen"}', 0.3),
    ('ranker_slice_relative_change{slice="user:first_seen"}', -0.061),
    ('ranker_slice_relative_change_ci_lower{slice="user:first_seen"}', -0.2),
    ('ranker_slice_relative_change_ci_upper{slice="user:first_seen"}', 0.08),
    ('ranker_slice_requests_with_save{slice="user_stats__country:other"}', 12.0),
    ('ranker_slice_save_hit_at_3_ratio{model="candidate",slice="user_stats__country:other"}', 0.42),
    ('ranker_slice_save_hit_at_3_ratio{model="champion",slice="user_stats__country:other"}', 0.4),
    ('ranker_slice_save_hit_at_3_ratio{model="heuristic",slice="user_stats__country:other"}', 0.33),
    ('ranker_slice_relative_change{slice="user_stats__country:other"}', 0.05),
    ('ranker_slice_relative_change_ci_lower{slice="user_stats__country:other"}', -0.18),
    ('ranker_slice_relative_change_ci_upper{slice="user_stats__country:other"}', 0.3),
    ('ranker_gate_check_passed{check="scores_finite"}', 1.0),
    ('ranker_gate_check_value{check="scores_finite"}', 1.0),
    ('ranker_gate_check_warning{check="scores_finite"}', 0.0),
    ('ranker_gate_check_passed{check="save_hit_at_3_floor"}', 1.0),
    ('ranker_gate_check_value{check="save_hit_at_3_floor"}', 0.41),
    ('ranker_gate_check_warning{check="save_hit_at_3_floor"}', 0.0),
    ('ranker_gate_check_threshold{check="save_hit_at_3_floor"}', 0.05),
    ('ranker_gate_check_passed{check="calibration"}', 1.0),
    ('ranker_gate_check_value{check="calibration"}', 1.02),
    ('ranker_gate_check_warning{check="calibration"}', 0.0),
    ('ranker_gate_check_passed{check="save_hit_at_3_change"}', 1.0),
    ('ranker_gate_check_value{check="save_hit_at_3_change"}', 0.0125),
    ('ranker_gate_check_warning{check="save_hit_at_3_change"}', 0.0),
    ('ranker_gate_check_threshold{check="save_hit_at_3_change"}', -0.01),
    ('ranker_gate_check_passed{check="leakage"}', 1.0),
    ('ranker_gate_check_value{check="leakage"}', 0.0125),
    ('ranker_gate_check_warning{check="leakage"}', 0.0),
    ('ranker_gate_check_threshold{check="leakage"}', 0.1),
    ("ranker_gate_relative_change", 0.0125),
    ("ranker_gate_relative_change_ci_lower", -0.004),
    ("ranker_gate_relative_change_ci_upper", 0.03),
    ("ranker_gate_passed", 1.0),
    ("ranker_gate_consecutive_rejections", 0.0),
    ('ranker_promotions_total{forced="false"}', 1.0),
    ('ranker_promotions_total{forced="true"}', 0.0),
    ("ranker_rejections_total", 0.0),
    ("ranker_last_promotion_timestamp_seconds", 1796000000.0),
    ('ranker_window_rows{split="train"}', 200000.0),
    ('ranker_window_rows{split="eval"}', 10000.0),
    ("ranker_window_length_days", 20.0),
    ('ranker_window_days{state="built"}', 1.0),
    ('ranker_window_days{state="reused"}', 19.0),
    ("ranker_window_label_rate_ratio", 0.031),
    ("ranker_window_end_timestamp_seconds", 1796083200.0),
    ("ranker_validation_passed", 1.0),
    ('ranker_validation_anomalies{policy="fail"}', 0.0),
    ('ranker_validation_anomalies{policy="warn"}', 1.0),
    ('ranker_validation_anomalies{policy="accepted"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="window_incomplete"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="empty_day"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="schema_type"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="schema_presence"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="schema_domain"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="schema_vocabulary"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="feature_all_null"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="feature_all_zero"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="feature_constant"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="null_rate_jump"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="zero_rate_jump"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="label_rate_jump"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="row_count_jump"}', 1.0),
    ('ranker_validation_anomalies_by_kind{kind="drift"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="skew"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="duplicate_rows"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="day_repeated"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="event_time_outside_day"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="leakage_event_time"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="leakage_snapshot_date"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="inconsistent_join"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="label_rate_bounds"}', 0.0),
    ('ranker_validation_anomalies_by_kind{kind="null_rate_cap"}', 0.0),
    ('ranker_validation_drift_score{comparison="drift",feature="pin_stats__save_rate_28d"}', 0.004),
    ('ranker_validation_drift_score{comparison="skew",feature="pin_stats__save_rate_28d"}', 0.002),
    ("ranker_feature_freshness_lag_seconds", 7200.0),
    ("ranker_feature_source_end_timestamp_seconds", 1796083200.0),
    ("ranker_materialize_end_timestamp_seconds", 1796083200.0),
    ("ranker_metrics_push_failures_total", 0.0),
]

FAILED_RUN = [
    ("ranker_last_run_timestamp_seconds", 1796345605.0),
    ("ranker_last_success_timestamp_seconds", 1796259200.0),
    ("ranker_last_failure_timestamp_seconds", 1796345600.0),
    ('ranker_last_run_status{status="success"}', 0.0),
    ('ranker_last_run_status{status="failed"}', 1.0),
    ("ranker_last_run_promoted", 0.0),
    ('ranker_runs_total{status="success"}', 4.0),
    ('ranker_runs_total{status="failed"}', 1.0),
    ('ranker_run_failures_total{step="freshness"}', 0.0),
    ('ranker_run_failures_total{step="window"}', 0.0),
    ('ranker_run_failures_total{step="validate"}', 0.0),
    ('ranker_run_failures_total{step="train"}', 1.0),
    ('ranker_run_failures_total{step="evaluate"}', 0.0),
    ('ranker_run_failures_total{step="gate"}', 0.0),
    ('ranker_run_failures_total{step="promote"}', 0.0),
    ('ranker_run_failures_total{step="reject"}', 0.0),
    ('ranker_run_failures_total{step="materialize"}', 0.0),
    ('ranker_run_failures_total{step="metrics"}', 0.0),
    ('ranker_run_failures_total{step="run"}', 0.0),
    ('ranker_run_failures_total{step="other"}', 0.0),
    ('ranker_stage_duration_seconds{stage="window"}', 1.0),
    ('ranker_stage_duration_baseline_seconds{stage="gate"}', 3.25),
    ('ranker_stage_duration_baseline_seconds{stage="materialize"}', 4.0),
    ('ranker_stage_duration_baseline_seconds{stage="train"}', 100.0),
    ('ranker_stage_duration_baseline_seconds{stage="validate"}', 0.4),
    ('ranker_stage_duration_baseline_seconds{stage="window"}', 12.5),
    ("ranker_run_duration_seconds", 1.0),
    ("ranker_gate_consecutive_rejections", 0.0),
    ('ranker_promotions_total{forced="false"}', 1.0),
    ('ranker_promotions_total{forced="true"}', 1.0),
    ("ranker_rejections_total", 3.0),
    ("ranker_last_promotion_timestamp_seconds", 1796259200.0),
    ('ranker_window_rows{split="train"}', 10.0),
    ('ranker_window_rows{split="eval"}', 10000.0),
    ("ranker_window_length_days", 20.0),
    ('ranker_window_days{state="built"}', 1.0),
    ('ranker_window_days{state="reused"}', 20.0),
    ("ranker_window_label_rate_ratio", 0.031),
    ("ranker_window_end_timestamp_seconds", 1796083200.0),
    ("ranker_feature_source_end_timestamp_seconds", 1796083200.0),
    ("ranker_materialize_end_timestamp_seconds", 1796083200.0),
    ("ranker_metrics_push_failures_total", 0.0),
]

EVALUATE_ONLY_RUN = [
    ("ranker_last_run_timestamp_seconds", 1796518405.0),
    ("ranker_last_success_timestamp_seconds", 1796518400.0),
    ("ranker_last_failure_timestamp_seconds", 1796345600.0),
    ('ranker_last_run_status{status="success"}', 1.0),
    ('ranker_last_run_status{status="failed"}', 0.0),
    ("ranker_last_run_promoted", 0.0),
    ('ranker_runs_total{status="success"}', 5.0),
    ('ranker_runs_total{status="failed"}', 1.0),
    ('ranker_run_failures_total{step="freshness"}', 0.0),
    ('ranker_run_failures_total{step="window"}', 0.0),
    ('ranker_run_failures_total{step="validate"}', 0.0),
    ('ranker_run_failures_total{step="train"}', 1.0),
    ('ranker_run_failures_total{step="evaluate"}', 0.0),
    ('ranker_run_failures_total{step="gate"}', 0.0),
    ('ranker_run_failures_total{step="promote"}', 0.0),
    ('ranker_run_failures_total{step="reject"}', 0.0),
    ('ranker_run_failures_total{step="materialize"}', 0.0),
    ('ranker_run_failures_total{step="metrics"}', 0.0),
    ('ranker_run_failures_total{step="run"}', 0.0),
    ('ranker_run_failures_total{step="other"}', 0.0),
    ('ranker_stage_duration_seconds{stage="evaluate"}', 2.0),
    ('ranker_stage_duration_baseline_seconds{stage="gate"}', 3.25),
    ('ranker_stage_duration_baseline_seconds{stage="materialize"}', 4.0),
    ('ranker_stage_duration_baseline_seconds{stage="train"}', 100.0),
    ('ranker_stage_duration_baseline_seconds{stage="validate"}', 0.4),
    ('ranker_stage_duration_baseline_seconds{stage="window"}', 12.5),
    ("ranker_run_duration_seconds", 2.0),
    ('ranker_eval_save_hit_at_3_ratio{model="candidate"}', 0.3),
    ('ranker_eval_auc_ratio{model="candidate"}', 0.74),
    ('ranker_eval_normalized_entropy{model="candidate"}', 0.93),
    ("ranker_gate_consecutive_rejections", 0.0),
    ('ranker_promotions_total{forced="false"}', 1.0),
    ('ranker_promotions_total{forced="true"}', 1.0),
    ("ranker_rejections_total", 3.0),
    ("ranker_last_promotion_timestamp_seconds", 1796259200.0),
    ("ranker_feature_source_end_timestamp_seconds", 1796083200.0),
    ("ranker_materialize_end_timestamp_seconds", 1796083200.0),
    ("ranker_metrics_push_failures_total", 0.0),
]

# every publish's samples, json-dumped: a change shows in the three runs above or, for the others,
# by printing ``json.dumps(samples)`` before and after
ALL_SAMPLES_SHA256 = "50d24a80121b7ba43c84108712d1cc8780c711042b8468f30aab5e3cb219efe4"


def test_the_samples_of_every_run_keep_their_names_values_and_order(ws: Workspace) -> None:
    _, samples = fold_sequence(ws)
    assert samples[0] == CONTRACT_RUN
    assert samples[4] == FAILED_RUN
    assert samples[6] == EVALUATE_ONLY_RUN
    assert hashlib.sha256(json.dumps(samples).encode()).hexdigest() == ALL_SAMPLES_SHA256
