"""Pure functions of the retrain DAG on the steps' JSON summaries and Airflow task states (no I/O,
no Airflow): the freshness check, the command lines of the post-gate steps, and the run's outcome
(the window's data is checked by the validation step, ``ranker features validate``). Whether to promote is not decided here: `ranker decide` says."""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Any

# task ids the gate branch chooses between: the branches `ranker decide` answers with
PROMOTE, RECORD_REJECTION, KEEP_CHAMPION = "promote", "record_rejection", "keep_champion"
BRANCH_TASKS = (PROMOTE, RECORD_REJECTION, KEEP_CHAMPION)
# what the grid shows for them: the one green row of a finished run names its outcome
DISPLAY_NAMES = {
    PROMOTE: "outcome: promoted",
    RECORD_REJECTION: "outcome: REJECTED by the gate",
    KEEP_CHAMPION: "outcome: champion kept",
}
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


def gate_check_lines(report: Mapping[str, Any]) -> list[str]:
    """One task-log line per gate check (value, threshold, pass/FAIL, the gate's own sentence), then
    the verdict: what an operator reads in the gate task's log to see why a candidate was rejected."""
    lines = []
    for check in report.get("checks") or []:
        verdict = "pass" if check.get("passed") else "FAIL"
        lines.append(
            f"gate check {check.get('name')}: {verdict}  value={_number(check.get('value'))}"
            f"  threshold={_number(check.get('threshold'))}  ({check.get('detail', '')})"
        )
    failed = list(report.get("failed_checks") or [])
    candidate = (report.get("candidate") or {}).get("version") or report.get("candidate_version")
    champion = (report.get("champion") or {}).get("version") or "none (first run: absolute checks only)"
    verdict = f"gate {report.get('decision')}: candidate {candidate} vs champion {champion}"
    lines.append(verdict + (f"; failed: {', '.join(failed)}" if failed else "; every check passed"))
    return lines


def _number(value: Any) -> str:
    if value is None:
        return "-"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}"


def decide_args(plan: Mapping[str, Any], candidate: str) -> list[str]:
    """``ranker decide`` arguments: the promotion policy lives in the project (ranking/pipeline/
    policy.py); the DAG only hands it the run's flags and follows the branch it names."""
    args = ["decide", "--candidate", candidate, "--end", plan["window_end"]]
    if plan["dry_run"]:
        args.append("--dry-run")
    if plan["force_promote"]:
        args.append("--force-promote")
    if plan["reason"]:
        args += ["--reason", plan["reason"]]
    return args


def branch_task(decision: Mapping[str, Any]) -> str:
    """The task id ``ranker decide`` chose; anything else is a broken contract, not a branch."""
    branch = decision.get("branch")
    if branch not in BRANCH_TASKS:
        raise ValueError(
            f"ranker decide answered branch {branch!r}; expected one of {', '.join(BRANCH_TASKS)}"
        )
    return str(branch)


def promote_args(decision: Mapping[str, Any]) -> list[str]:
    """``ranker promote`` arguments for the decided candidate (with ``--force`` when decided so)."""
    args = ["promote", str(decision["version"]), "--reason", str(decision["reason"])]
    return [*args, "--force"] if decision.get("force") else args


def reject_args(decision: Mapping[str, Any]) -> list[str]:
    return ["reject", str(decision["version"]), "--reason", str(decision["reason"])]


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
