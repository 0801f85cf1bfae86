"""State across runs (each CLI call is a fresh process): counters, re-publishing, rejection streaks,
duration baselines, failed runs, and the file lock under concurrent publishes."""

from __future__ import annotations

from pathlib import Path

from monitoring_fixtures import DAY, NOW, publish, write_contract_run, write_summary

from ranking.core.workspace import Workspace
from ranking.monitoring.catalogue import DURATION_HISTORY
from ranking.monitoring.publish import publish as publish_run
from ranking.monitoring.runs import load_run
from ranking.monitoring.state import MetricsState, advance_state, load_state, state_path


def test_counters_keep_counting_across_runs_and_republishing_does_not_double_count(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    write_contract_run(ws, "d2", decision="reject")
    write_contract_run(ws, "d3", decision="reject")
    publish(ws, "d1", now=NOW)
    publish(ws, "d2", now=NOW + DAY)
    v = publish(ws, "d3", now=NOW + 2 * DAY)
    assert v['ranker_runs_total{status="success"}'] == 3
    assert v['ranker_promotions_total{forced="false"}'] == 1
    assert v["ranker_rejections_total"] == 2
    assert v["ranker_gate_consecutive_rejections"] == 2
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW
    assert v["ranker_gate_passed"] == 0
    assert v['ranker_gate_check_passed{check="save_hit_at_3_change"}'] == 0
    assert v["ranker_last_run_promoted"] == 0

    again = publish(ws, "d3", now=NOW + 2 * DAY + 60)  # an Airflow retry of the publish task
    assert again['ranker_runs_total{status="success"}'] == 3
    assert again["ranker_rejections_total"] == 2
    assert again["ranker_gate_consecutive_rejections"] == 2
    assert again["ranker_last_run_timestamp_seconds"] == NOW + 2 * DAY + 60

    write_contract_run(ws, "d4")
    v = publish(ws, "d4", now=NOW + 3 * DAY)
    assert v["ranker_gate_consecutive_rejections"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 2


def _dry_run(ws: Workspace, run_id: str, decision: str) -> None:
    """A dry run as the DAG's steps record it: gated, decided (dry_run), the champion kept."""
    write_contract_run(ws, run_id, decision=decision, promote=False)
    ws.step_summary_path(run_id, "reject").unlink(missing_ok=True)  # a dry run records no rejection
    write_summary(
        ws,
        run_id,
        "decide",
        {"branch": "keep_champion", "decision": decision, "dry_run": True, "version": f"v-{run_id}"},
    )


def test_a_dry_run_neither_counts_as_a_rejection_nor_ends_the_streak(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")
    write_contract_run(ws, "d2", decision="reject")
    publish(ws, "d1", now=NOW)
    publish(ws, "d2", now=NOW + DAY)
    _dry_run(ws, "dry-reject", "reject")
    v = publish(ws, "dry-reject", now=NOW + 2 * DAY)
    assert v["ranker_gate_consecutive_rejections"] == 2  # not 3: RankerGateRejectionsInARow stays quiet
    assert v["ranker_rejections_total"] == 2
    assert v['ranker_runs_total{status="success"}'] == 3  # still a run that succeeded
    assert v["ranker_gate_passed"] == 0  # its own gate's verdict is still exported

    _dry_run(ws, "dry-pass", "pass")
    v = publish(ws, "dry-pass", now=NOW + 3 * DAY)
    assert v["ranker_gate_consecutive_rejections"] == 2  # a dry run's pass promotes nothing: no reset
    assert v["ranker_gate_passed"] == 1

    write_contract_run(ws, "d3", decision="reject")
    v = publish(ws, "d3", now=NOW + 4 * DAY)
    assert v["ranker_gate_consecutive_rejections"] == 3
    assert v["ranker_rejections_total"] == 3


def test_a_run_stopped_by_data_validation_leaves_the_streak_as_it_is(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")
    publish(ws, "d1", now=NOW)
    write_summary(ws, "stopped", "validate", {"verdict": "fail"}, exit_code=2)
    v = publish(ws, "stopped", now=NOW + DAY, status="failed", failed_step="validate")
    assert v["ranker_gate_consecutive_rejections"] == 1
    assert v["ranker_rejections_total"] == 1
    assert v['ranker_runs_total{status="failed"}'] == 1
    assert v['ranker_run_failures_total{step="validate"}'] == 1


def test_forced_promotion_and_noop_promotion(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")
    write_summary(ws, "d1", "promote", {"version": "v-d1", "forced": True, "noop": False})
    v = publish(ws, "d1")
    assert v['ranker_promotions_total{forced="true"}'] == 1
    assert v["ranker_rejections_total"] == 1  # the gate did reject it
    assert v["ranker_gate_consecutive_rejections"] == 0  # but the champion moved
    assert v["ranker_last_run_promoted"] == 1

    write_contract_run(ws, "d2")
    write_summary(ws, "d2", "promote", {"version": "v-d1", "forced": False, "noop": True})
    v = publish(ws, "d2", now=NOW + DAY)
    assert v["ranker_last_run_promoted"] == 0
    assert v['ranker_promotions_total{forced="false"}'] == 0
    assert v["ranker_last_promotion_timestamp_seconds"] == NOW


def test_duration_baseline_is_the_median_of_previous_runs(ws: Workspace) -> None:
    for i, secs in enumerate([100.0, 120.0, 110.0]):
        write_contract_run(ws, f"d{i}", train_seconds=secs)
        v = publish(ws, f"d{i}", now=NOW + i * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0  # median(100, 120)
    write_contract_run(ws, "d3", train_seconds=400.0)
    v = publish(ws, "d3", now=NOW + 3 * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0  # median(100, 120, 110)
    assert v['ranker_stage_duration_seconds{stage="train"}'] == 400.0
    v = publish(ws, "d3", now=NOW + 3 * DAY + 5)  # republishing excludes the run from its baseline
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 110.0


def test_baseline_window_keeps_the_latest_runs_only(ws: Workspace) -> None:
    for i in range(DURATION_HISTORY + 3):
        write_contract_run(ws, f"d{i}", train_seconds=1000.0 if i < 3 else 10.0)
        v = publish(ws, f"d{i}", now=NOW + i * DAY)
    assert v['ranker_stage_duration_baseline_seconds{stage="train"}'] == 10.0


def test_failed_run_keeps_last_success_and_counts_the_failed_step(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    publish(ws, "d1", now=NOW)
    write_summary(ws, "d2", "window", {"rows_train": 10, "duration_seconds": 1.0})
    v = publish(ws, "d2", now=NOW + DAY, status="failed", failed_step="train")
    assert v['ranker_last_run_status{status="failed"}'] == 1
    assert v['ranker_last_run_status{status="success"}'] == 0
    assert v["ranker_last_success_timestamp_seconds"] == NOW
    assert v["ranker_last_failure_timestamp_seconds"] == NOW + DAY
    assert v['ranker_run_failures_total{step="train"}'] == 1
    assert v['ranker_runs_total{status="failed"}'] == 1
    assert v['ranker_runs_total{status="success"}'] == 1
    # the newest source-data fact survives a run that did not check freshness
    assert v["ranker_feature_source_end_timestamp_seconds"] == 1_796_083_200.0
    assert v["ranker_last_run_promoted"] == 0


def _publish_in_process(home: str, run_id: str) -> str:
    return publish_run(Workspace(Path(home)), run_id).status


def test_concurrent_publishes_of_one_workspace_count_every_run(ws: Workspace) -> None:
    import multiprocessing

    runs = [f"d{i}" for i in range(6)]
    for run_id in runs:
        write_contract_run(ws, run_id)
    with multiprocessing.get_context("spawn").Pool(len(runs)) as pool:
        statuses = pool.starmap(_publish_in_process, [(str(ws.root), r) for r in runs])
    assert statuses == ["success"] * len(runs)
    state = load_state(ws)
    assert state.runs_total["success"] == len(runs)  # no lost update between processes
    assert state.promotions_total["false"] == len(runs)
    assert set(state.counted) == set(runs)


def test_advance_state_is_pure(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")
    run = load_run(ws, "d1")
    before = MetricsState()
    snapshot = before.to_json()
    after = advance_state(before, run, NOW)
    assert before.to_json() == snapshot  # the input is not touched
    assert after.rejections_total == 1 and after.counted == {"d1": ["rejection", "status:success"]}
    assert advance_state(after, run, NOW + 1).rejections_total == 1  # the same run counts once
    assert not state_path(ws).exists()  # folding writes nothing
