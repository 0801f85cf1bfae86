"""Pure functions of the retrain DAG on the steps' JSON summaries and Airflow task states (no I/O,
no Airflow): the branch a decision chose, the gate's log lines, the failure labels and the run's
outcome. Whether to promote is not decided here (the graph's ``decide`` step says); what each step
does is the ``ranker step`` it runs."""

from __future__ import annotations

from collections.abc import Mapping

from ranker_dags.json_values import Json, Summary, as_list, as_object
from ranker_dags.retrain_graph import RETRAIN, GraphStep

PLAN = "plan"  # the DAG's first task: the run's request from its Params (not a step of the graph)


def branch_task_id(step: GraphStep) -> str:
    """The task that follows ``step``'s decision (its result's ``branch``) to one of its branches."""
    return f"{step.name}_branch"


# the retrain's outcome (the publish_metrics task's XCom); `ranker metrics publish --status` knows
# only success|failed: a rejection or a kept champion is a successful run that did not promote
OUTCOME_PROMOTED, OUTCOME_REJECTED, OUTCOME_KEPT, OUTCOME_FAILED = "promoted", "rejected", "kept", "failed"
# the branch step whose success is each outcome
OUTCOME_OF_BRANCH = {
    "promote": OUTCOME_PROMOTED,
    "record_rejection": OUTCOME_REJECTED,
    "keep_champion": OUTCOME_KEPT,
}


def _step_of_task() -> dict[str, str]:
    """Task id -> the step label a failure is counted by, in pipeline order."""
    labels = {PLAN: "other"}
    for step in RETRAIN.steps:
        if step.label is not None:
            labels[step.name] = step.label
        if step.branches:
            labels[branch_task_id(step)] = step.label or "other"
    return labels


STEP_OF_TASK = _step_of_task()
PIPELINE_ORDER = (
    PLAN,
    *(
        name
        for step in RETRAIN.steps
        for name in (step.name, *([branch_task_id(step)] if step.branches else []))
    ),
)


def not_landed(summary: Summary) -> str:
    """The line a step gives while the data it waits for has not landed (exit 1 of a not_yet step)."""
    latest = summary.get("latest_source_date") or "(none)"
    return f"the eval day has not landed yet (latest source day {latest})"


def gate_check_lines(report: Summary) -> list[str]:
    """One task-log line per gate check (value, threshold, pass/FAIL, the gate's own sentence), then
    the verdict: what an operator reads in the gate task's log to see why a candidate was rejected."""
    lines = []
    for check in map(as_object, as_list(report.get("checks"))):
        verdict = "pass" if check.get("passed") else "FAIL"
        lines.append(
            f"gate check {check.get('name')}: {verdict}  value={number(check.get('value'))}"
            f"  threshold={number(check.get('threshold'))}  ({check.get('detail', '')})"
        )
    failed = [str(name) for name in as_list(report.get("failed_checks"))]
    candidate = as_object(report.get("candidate")).get("version")
    champion = as_object(report.get("champion")).get("version") or "none (first run: absolute checks only)"
    verdict = f"gate {report.get('decision')}: candidate {candidate} vs champion {champion}"
    lines.append(verdict + (f"; failed: {', '.join(failed)}" if failed else "; every check passed"))
    return lines


def number(value: Json) -> str:
    if value is None:
        return "-"
    if isinstance(value, list):
        return "[" + ", ".join(number(v) for v in value) + "]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return str(value)
    return f"{value:.4g}"


def chosen_branch(step: GraphStep, decision: Summary) -> str:
    """The step ``step``'s decision chose; anything else is a broken contract, not a branch."""
    branch = decision.get("branch")
    if branch not in step.branches:
        raise ValueError(
            f"{step.name} answered branch {branch!r}; expected one of {', '.join(step.branches)}"
        )
    return str(branch)


def run_outcome(task_states: Mapping[str, str | None]) -> str:
    """The retrain's outcome from its task states (publish_metrics runs whatever happened before).

    Any failed step makes the run ``failed`` even after a promotion: stale online features or
    missing metrics are an incident too; the failed step is reported alongside."""
    if root_failure(task_states):
        return OUTCOME_FAILED
    for branch, outcome in OUTCOME_OF_BRANCH.items():
        if task_states.get(branch) == "success":
            return outcome
    return OUTCOME_FAILED


def root_failure(task_states: Mapping[str, str | None]) -> str | None:
    """The first task (in pipeline order) that failed itself, not merely because of an upstream."""
    failed = [t for t, s in task_states.items() if s == "failed"]
    if not failed:
        return None
    order = {task_id: i for i, task_id in enumerate(PIPELINE_ORDER)}
    return min(failed, key=lambda t: (order.get(t, len(order)), t))


def run_so_far(task_states: Mapping[str, str | None]) -> dict[str, str | None]:
    """The run's outcome as the publish step takes it (``RunOutcome``): success, or the failed
    step's label."""
    if run_outcome(task_states) != OUTCOME_FAILED:
        return {"status": "success", "failed_step": None}
    return {"status": "failed", "failed_step": STEP_OF_TASK.get(root_failure(task_states) or "", "other")}
