"""Reading a run: its status and the step that failed, from flags, errored summaries and failure
records; unreadable summaries name their file."""

from __future__ import annotations

import pytest
from monitoring_fixtures import NOW, publish, values, write_contract_run, write_summary

from ranking.core.workspace import Workspace
from ranking.monitoring.fields import MetricsInputError
from ranking.monitoring.publish import publish as publish_run
from ranking.monitoring.runs import record_failure


def test_run_that_failed_before_any_step_is_publishable_only_as_failed(ws: Workspace) -> None:
    with pytest.raises(MetricsInputError, match="no step summaries"):
        publish_run(ws, "empty", now=NOW)
    v = publish(ws, "empty", status="failed", failed_step="freshness-check")
    assert v['ranker_run_failures_total{step="other"}'] == 1  # unknown step: bounded label


def test_an_errored_step_summary_marks_the_run_failed(ws: Workspace) -> None:
    # what `ranker run` records when a step raises a RankerError
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    write_summary(ws, "d1", "train", {"error": "training loss is NaN"}, exit_code=2)
    result = publish_run(ws, "d1", now=NOW)
    assert result.status == "failed" and result.failed_step == "train"
    v = values(result)
    assert v['ranker_run_failures_total{step="train"}'] == 1
    assert "ranker_gate_passed" not in v


def test_failure_records_from_callbacks_mark_the_run_failed(ws: Workspace) -> None:
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    record_failure(ws, "d1", "gate", "boom", now=NOW + 5)
    record_failure(ws, "d1", "train", "OOM", now=NOW + 1)  # the earliest failure is the cause
    result = publish_run(ws, "d1", now=NOW + 10)
    assert (result.status, result.failed_step) == ("failed", "train")


def test_gate_rejection_is_not_a_failure(ws: Workspace) -> None:
    write_contract_run(ws, "d1", decision="reject")  # gate exit code 1
    assert publish_run(ws, "d1", now=NOW).status == "success"


def test_the_failing_step_is_the_earliest_in_the_pipeline_not_the_run_summary(ws: Workspace) -> None:
    write_summary(ws, "d1", "window", {"duration_seconds": 2.0})
    write_summary(ws, "d1", "gate", {"error": "no eval scores"}, exit_code=2)
    write_summary(ws, "d1", "run", {"error": "step gate failed", "duration_seconds": 9.0}, exit_code=2)
    result = publish_run(ws, "d1", now=NOW)
    assert (result.status, result.failed_step) == ("failed", "gate")


def test_a_failed_earlier_publish_does_not_fail_the_run(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    write_summary(ws, "d1", "metrics", {"error": "state file unreadable"}, exit_code=2)
    assert publish_run(ws, "d1", now=NOW).status == "success"


def test_unreadable_summary_names_the_file(ws: Workspace) -> None:
    path = ws.step_summary_path("d1", "train")
    path.parent.mkdir(parents=True)
    path.write_text("{not json")
    with pytest.raises(MetricsInputError, match=r"train\.json"):
        publish_run(ws, "d1", now=NOW)
