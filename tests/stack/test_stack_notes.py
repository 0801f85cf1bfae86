"""A retrain run's decision in Airflow's runs list (issue 35, deliver 3): the note each run
carries, read back through the REST API (`GET /api/v2/dags/ranker_retrain/dagRuns/{id}`), and the
overrides Param's reason rule enforced when a run is created.

On the session's stack (tests/stack/conftest.py), after test_stack.py's story when both run: two
manual runs of its own, so the module also holds alone (unpausing the DAG then first runs the
scheduled run of the latest interval, which promotes). Run R overrides the gate's floor to 1.0 (no
model reaches it: rejected, champion or not); run D is a dry run. The note is set by the
publish_metrics task through the connection ranker_airflow_api, which `infra/stack/stack.py up`
defines for the Airflow components."""

from __future__ import annotations

from typing import Any

import pytest
from stack_client import LAST_DAY, TEST_TIMEOUT, Stack, budget

pytestmark = [
    pytest.mark.slow,
    pytest.mark.integration,
    pytest.mark.airflow,
    pytest.mark.timeout(TEST_TIMEOUT),
]

RETRAIN = "ranker_retrain"
REASON = "stack test: a floor no model reaches"
CONF_REJECTED = {
    "window_end": LAST_DAY.isoformat(),
    "window_days": 4,
    "epochs": 1,
    "schedule": "joint",
    "overrides": {"gate.min_save_hit_at_3": 1.0, "reason": REASON},
}
CONF_DRY = {
    "window_end": LAST_DAY.isoformat(),
    "window_days": 4,
    "epochs": 1,
    "schedule": "joint",
    "dry_run": True,
}


@pytest.fixture(scope="module")
def noted_runs(stack: Stack) -> dict[str, dict[str, Any]]:
    stack.unpause(RETRAIN)
    for run_id, conf in (("stack-note-rejected", CONF_REJECTED), ("stack-note-dry", CONF_DRY)):
        resp = stack.trigger(RETRAIN, run_id, conf)
        assert resp.status_code == 200, resp.text
    timeout = budget("retrain_run", runs=4)  # a scheduled run may go first when the DAG was paused
    return {
        run_id: stack.wait_run(RETRAIN, run_id, timeout=timeout)
        for run_id in ("stack-note-rejected", "stack-note-dry")
    }


def test_a_rejected_run_reads_as_one_in_its_note(stack: Stack, noted_runs: dict[str, dict[str, Any]]) -> None:
    run = noted_runs["stack-note-rejected"]
    # a rejection is the gate doing its job: the run succeeds, its note says what happened
    assert run["state"] == "success", stack.task_states(RETRAIN, "stack-note-rejected")
    assert stack.task_states(RETRAIN, "stack-note-rejected")["record_rejection"] == "success"
    note = stack.run(RETRAIN, "stack-note-rejected")["note"]
    gate = stack.xcom(RETRAIN, "stack-note-rejected", "gate")
    assert note.startswith("REJECTED by the gate: "), note
    assert "save_hit_at_3_floor" in note and "(threshold 1)" in note, note
    assert f"save HIT@3 {gate['candidate']['save_hit_at_3']:.3f}" in note, note
    assert note.endswith(f"overrides gate.min_save_hit_at_3=1 - reason: {REASON}"), note
    assert gate["config"]["min_save_hit_at_3"] == 1.0  # the override reached the gate


def test_a_dry_run_says_what_it_would_have_done(stack: Stack, noted_runs: dict[str, dict[str, Any]]) -> None:
    run = noted_runs["stack-note-dry"]
    assert run["state"] == "success", stack.task_states(RETRAIN, "stack-note-dry")
    note = stack.run(RETRAIN, "stack-note-dry")["note"]
    decision = stack.xcom(RETRAIN, "stack-note-dry", "decide")["decision"]
    verb = "promote" if decision == "pass" else "reject"
    assert note.startswith(f"DRY RUN: would {verb} "), note
    assert note.endswith("champion kept"), note


def test_an_override_without_a_reason_is_refused_when_the_run_is_created(stack: Stack) -> None:
    resp = stack.trigger(RETRAIN, "stack-note-no-reason", {"overrides": {"gate.allow_unfair": True}})
    assert resp.status_code == 400, (resp.status_code, resp.text)
    assert "Invalid input for param overrides" in resp.json()["detail"], resp.text
    assert stack.request("GET", f"/dags/{RETRAIN}/dagRuns/stack-note-no-reason").status_code == 404
