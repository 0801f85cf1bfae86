"""Pure decisions of the retrain DAG, taken on the steps' JSON summaries (no I/O, no Airflow)."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

# task ids the gate branch chooses between
PROMOTE, RECORD_REJECTION, KEEP_CHAMPION = "promote", "record_rejection", "keep_champion"
# the retrain's outcome (the publish_metrics task's XCom); `ranker metrics publish --status` knows
# only success|failed: a rejection or a kept champion is a successful run that did not promote
OUTCOME_PROMOTED, OUTCOME_REJECTED, OUTCOME_KEPT, OUTCOME_FAILED = "promoted", "rejected", "kept", "failed"
# task id -> the step label `ranker metrics publish --failed-step` counts failures by
STEP_OF_TASK = {
    "plan": "other",
    "check_freshness": "freshness",
    "build_window": "window",
    "validate_window": "validate",
    "train": "train",
    "gate": "gate",
    "decide": "gate",
    PROMOTE: "promote",
    RECORD_REJECTION: "reject",
    "materialize_online": "materialize",
    "publish_metrics": "metrics",
}
PIPELINE_ORDER = tuple(STEP_OF_TASK)


def freshness_problem(summary: Mapping[str, Any], window_end: str) -> str | None:
    """Why the source data cannot serve a window ending at ``window_end`` yet (None when it can):
    the eval day itself must be in the source."""
    latest = summary.get("latest_source_date")
    if not latest:
        return "the source has no data at all (latest_source_date is empty)"
    if dt.date.fromisoformat(str(latest)[:10]) < dt.date.fromisoformat(window_end):
        return f"source data ends at {latest}; the window's eval day {window_end} has not landed yet"
    return None


def window_problems(summary: Mapping[str, Any], plan: Mapping[str, Any]) -> list[str]:
    """Checks of a built window against the plan: every row and day accounted for."""
    problems = []
    if str(summary.get("end")) != plan["window_end"]:
        problems.append(f"window end {summary.get('end')} != planned {plan['window_end']}")
    planned = plan.get("window_days")  # None: the pipeline config's, whatever the step reports
    if planned is not None and int(summary.get("days", -1)) != int(planned):
        problems.append(f"window days {summary.get('days')} != planned {planned}")
    for key in ("rows_train", "rows_eval"):
        if int(summary.get(key) or 0) <= 0:
            problems.append(f"{key} is {summary.get(key)}: the window is empty")
    built, reused = summary.get("days_built"), summary.get("days_reused")
    if built is not None and reused is not None:
        # present training days + the eval day, each either built now or reused from an earlier
        # window (the builder tolerates a few missing days up to its coverage threshold)
        missing = len(summary.get("missing_days") or [])
        accounted = int(built) + int(reused)
        expected = int(summary.get("days") or 0) - missing + 1
        if accounted != expected:
            problems.append(
                f"{built} days built + {reused} reused != {expected} (train days - {missing} missing + eval day)"
            )
    rate = summary.get("label_rate")
    if rate is not None and not 0.0 < float(rate) < 1.0:
        problems.append(f"label rate {rate} is degenerate (no positives or no negatives)")
    return problems


def champion_trained_for(models: Mapping[str, Any]) -> str | None:
    """The window end (= eval day) the current champion was trained for, from `ranker models list`."""
    champion = models.get("champion")
    for row in models.get("versions") or []:
        if row.get("version") == champion:
            return (row.get("train") or {}).get("train_end")
    return None


def gate_branch(gate: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    """Which task follows the gate: promote, record the rejection, or keep the champion.

    The champion is kept on a dry run, and on a rerun of a date that already promoted a model (the
    champion was trained for this very window end): one promotion per date, unless forced."""
    if plan["dry_run"]:
        return KEEP_CHAMPION
    if plan["force_promote"]:
        return PROMOTE
    if gate.get("decision") != "pass":
        return RECORD_REJECTION
    if gate.get("champion_trained_for") == plan["window_end"]:
        return KEEP_CHAMPION
    return PROMOTE


def promotion_reason(gate: Mapping[str, Any], plan: Mapping[str, Any]) -> tuple[str, bool]:
    """(reason recorded in the registry history, whether to force past the gate)."""
    passed = gate.get("decision") == "pass"
    if passed:
        base = f"gate passed for window ending {plan['window_end']} (run {plan['run_id']})"
        return (f"{base}; {plan['reason']}" if plan["reason"] else base), False
    failed = ", ".join(gate.get("failed_checks") or []) or "unknown checks"
    return f"forced past failed gate checks [{failed}]: {plan['reason']}", True


def rejection_reason(gate: Mapping[str, Any], plan: Mapping[str, Any]) -> str:
    failed = ", ".join(gate.get("failed_checks") or []) or "unknown checks"
    return f"gate rejected for window ending {plan['window_end']} (run {plan['run_id']}): {failed}"


def run_outcome(task_states: Mapping[str, str | None]) -> str:
    """The retrain's outcome from its task states (publish_metrics runs whatever happened before).

    Any failed step makes the run ``failed`` even after a promotion: stale online features or
    missing metrics are an incident too; the failed step is reported alongside."""
    if root_failure(task_states):
        return OUTCOME_FAILED
    if task_states.get(PROMOTE) == "success":
        return OUTCOME_PROMOTED
    if task_states.get(RECORD_REJECTION) == "success":
        return OUTCOME_REJECTED
    if task_states.get(KEEP_CHAMPION) == "success":
        return OUTCOME_KEPT
    return OUTCOME_FAILED


def root_failure(task_states: Mapping[str, str | None]) -> str | None:
    """The first task (in pipeline order) that failed itself, not merely because of an upstream."""
    failed = [t for t, s in task_states.items() if s == "failed"]
    if not failed:
        return None
    order = {task_id: i for i, task_id in enumerate(PIPELINE_ORDER)}
    return min(failed, key=lambda t: (order.get(t, len(order)), t))


def publish_args(task_states: Mapping[str, str | None]) -> list[str]:
    """``ranker metrics publish`` arguments for the run's final state."""
    failed = root_failure(task_states)
    if run_outcome(task_states) != OUTCOME_FAILED:
        return ["metrics", "publish", "--status", "success"]
    return [
        "metrics",
        "publish",
        "--status",
        "failed",
        "--failed-step",
        STEP_OF_TASK.get(failed or "", "other"),
    ]
