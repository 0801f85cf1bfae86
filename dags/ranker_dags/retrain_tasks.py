"""The tasks of ``ranker_retrain``, built from the declared graph (``retrain_graph.py``): one task
per step, each running ``ranker step NAME`` with the run's request (the plan task's value) and, on
stdin, the return values of the steps it takes; its XCom is the step's summary. A step that
chooses between branches is followed by a branch task that follows its answer. No edge is written
here: each comes from a step's ``inputs`` and ``after``.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import TypedDict

from airflow.providers.standard.operators.empty import EmptyOperator
from airflow.sdk import DAG, Asset, BaseOperator, XComArg, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ranker_dags import decisions, notes
from ranker_dags.assets import OUTLETS, outlet_extra
from ranker_dags.json_values import Json, Summary
from ranker_dags.launchers import container_train_operator, params_arg
from ranker_dags.params import PlanXCom, make_plan, ranker_run_id
from ranker_dags.ranker_cli import EXIT_NEGATIVE, EXIT_OK, StepResult, parse_summary, ranker_argv, run_ranker
from ranker_dags.retrain_graph import RETRAIN, RUN, GraphStep
from ranker_dags.run_context import failing_on_plan_errors, run_type, triggering_user
from ranker_dags.settings import OrchestrationSettings

log = logging.getLogger(__name__)

WATCHER = "fail_run_if_a_step_failed"
# a DAG run started before the graph (commit "The daily retrain declared once"): its decide task
# answered with the branch's task id and pushed the decision under this key
LEGACY_DECISION_KEY = "decision"


class TaskOptions(TypedDict, total=False):
    """The operator arguments a step's task gets from the graph (and the deployment's pool)."""

    task_id: str
    trigger_rule: str
    doc_md: str
    outlets: list[Asset]
    task_display_name: str
    on_failure_callback: None
    execution_timeout: timedelta
    retries: int
    pool: str


class SourceNotReady(AirflowException):
    """The data a step waits for has not landed yet: retried with backoff."""


@dataclass(frozen=True)
class RetrainSteps:
    """The task bodies, bound to the deployment settings (where ``ranker`` is, the workspace)."""

    settings: OrchestrationSettings

    def plan(self) -> PlanXCom:
        context = get_current_context()
        dag_run = context["dag_run"]
        with failing_on_plan_errors():
            run_plan = make_plan(
                context["params"],
                airflow_run_id=dag_run.run_id,
                run_type=run_type(dag_run),
                data_interval_end=dag_run.data_interval_end,
                logical_date=dag_run.logical_date,
                run_after=dag_run.run_after,
                actor=triggering_user(dag_run),
            )
        return run_plan.to_dict()

    def run_step(self, step: GraphStep, plan: PlanXCom | None, inputs: Mapping[str, Json]) -> Summary:
        """``ranker step NAME`` as the run's actor: its summary, the task's XCom. Without a plan
        (it failed; only a step that runs whatever happened runs then) the run id is the Airflow
        run's, the actor Airflow, and the request names no eval day."""
        given: dict[str, Json] = {name: _upstream_value(name, value) for name, value in inputs.items()}
        if RUN in step.inputs:
            given[RUN] = dict(decisions.run_so_far(_other_task_states()))
        request = json.dumps(dict(plan) if plan is not None else {})
        args = ["step", step.name, "--request", request, "--params", params_arg(plan) if plan else "{}"]
        if step.trainer and self.settings.train_nproc > 1:
            args += ["--nproc", str(self.settings.train_nproc)]
        allowed = (EXIT_OK, EXIT_NEGATIVE) if step.on_exit_1 != "fails" else (EXIT_OK,)
        run_id = (plan["run_id"] if plan else _airflow_run_id()) if step.summary is not None else None
        argv = ranker_argv(self.settings.ranker_bin, args, home=self.settings.home, run_id=run_id)
        try:
            result = run_ranker(
                argv,
                allowed_exit_codes=allowed,
                extra_env={"RANKER_ACTOR": plan["actor"] if plan else "airflow"},
                stdin=json.dumps(given) if step.inputs else None,
            )
        finally:
            if RUN in step.inputs:  # the step that sees the whole run (publish_metrics) notes it
                self._note_the_run(plan)
        if result.exit_code == EXIT_NEGATIVE and step.on_exit_1 == "not_yet":
            raise SourceNotReady(f"{step.name}: {decisions.not_landed(result.summary)}")
        if plan is not None:
            self._after(step, plan, result)
        if RUN in step.inputs:
            return {**result.summary, "outcome": decisions.run_outcome(_other_task_states())}
        return result.summary

    def _after(self, step: GraphStep, plan: PlanXCom, result: StepResult) -> None:
        """What a person reads beside the step: the gate's checks in its log and the run report
        beside the model; the asset a promotion updates."""
        if step.name == "gate":
            for line in decisions.gate_check_lines(result.summary):
                log.info("%s", line)
            self._write_run_report(plan)
        if step.outlet is not None:
            event = get_current_context()["outlet_events"][OUTLETS[step.outlet]]
            event.extra = outlet_extra(step.outlet, result.summary, plan)

    def _note_the_run(self, plan: PlanXCom | None) -> None:
        """The run's note (``notes.py``): its decision in Airflow's runs list. Never raises."""
        try:
            context = get_current_context()
            ti, dag_run = context["ti"], context["dag_run"]
            summaries = {name: _pulled(ti.xcom_pull(task_ids=name)) for name in ("gate", "decide", "promote")}
            states = _other_task_states()
            run_id = plan["run_id"] if plan else _airflow_run_id()
            facts = notes.RunFacts(
                states=states,
                plan=plan,
                validation=notes.recorded_validation(self.settings.home, run_id, states),
                **summaries,
            )
            notes.set_note(ti.dag_id, dag_run.run_id, notes.run_note(facts))
        except Exception as exc:  # a note is for people: the run's outcome never depends on it
            log.warning("no run note: %s: %s", type(exc).__name__, exc)

    def _write_run_report(self, plan: PlanXCom) -> None:
        """report.md + a labelled curve.png beside the model: for people, never fails the gate."""
        argv = ranker_argv(
            self.settings.ranker_bin,
            ["report", "--run", plan["run_id"]],
            home=self.settings.home,
            run_id=None,
        )
        try:
            written = run_ranker(argv, extra_env={"RANKER_ACTOR": plan["actor"]}).summary
            log.info("run report: %s (curve: %s)", written.get("report"), written.get("curve"))
        except AirflowException as exc:
            log.warning("no run report: %s", exc)

    def follow(self, step: GraphStep, decision: Json) -> str:
        """The branch task to follow: the one ``step``'s decision names."""
        answer = _upstream_value(step.name, decision)
        branch = decisions.chosen_branch(step, answer)
        log.info("decision: %s %s (%s)", branch, answer.get("version"), answer.get("reason"))
        return branch


def _upstream_value(name: str, value: Json | bytes) -> Summary:
    """An upstream step's XCom as its ``ranker step`` result: a dict, or the JSON line a container
    printed; a value a run started before the graph left is read as it was written then."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str) and value in RETRAIN[name].branches:  # the old decide: a branch id
        value = get_current_context()["ti"].xcom_pull(task_ids=name, key=LEGACY_DECISION_KEY)
    elif isinstance(value, str):
        value = parse_summary(value)
    if not isinstance(value, dict):
        raise AirflowFailException(f"{name} returned no summary (got {type(value).__name__}: {value!r:.200})")
    if name == "gate":  # the old gate task copied the candidate into its report
        value = {k: v for k, v in value.items() if k != "candidate_version"}
    return value


def _pulled(value: Json | bytes) -> Summary | None:
    """An XCom read for the note: the summary, or None (a step that did not run or pushed none)."""
    if isinstance(value, bytes):
        value = value.decode("utf-8", errors="replace")
    if isinstance(value, str):
        try:
            value = parse_summary(value)
        except AirflowException:
            return None
    return value if isinstance(value, dict) else None


def _plan_if_any() -> PlanXCom | None:
    """The plan task's value; None when the plan failed (a step that runs whatever happened)."""
    plan: PlanXCom | None = get_current_context()["ti"].xcom_pull(task_ids=decisions.PLAN)
    return plan


def _airflow_run_id() -> str:
    """The ranker run id of this Airflow run (what the plan names it, when there is a plan)."""
    return ranker_run_id(get_current_context()["dag_run"].run_id)


def _other_task_states() -> dict[str, str | None]:
    """This run's task states but the running task's (a publish runs whatever happened before)."""
    ti = get_current_context()["ti"]
    states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])[ti.run_id]
    return {task_id: state for task_id, state in states.items() if task_id != ti.task_id}


def fail_run_if_a_step_failed() -> None:
    """publish_metrics (all_done) is a leaf that succeeds after failures; the watcher leaf makes the
    DagRun itself failed when any step failed (and is skipped when none did)."""
    raise AirflowFailException("a step of this retrain failed: see the failed task(s)")


def build_tasks(steps: RetrainSteps) -> None:
    """The plan task, then one task per step of the graph in its order (a branch task after a step
    that decides), each wired to the steps it takes and waits for; the watcher leaf last."""

    @task(task_id=decisions.PLAN, execution_timeout=timedelta(minutes=2), retries=0)
    def plan() -> PlanXCom:
        return steps.plan()

    run_plan = plan()
    made: dict[str, BaseOperator | XComArg] = {}
    follows: dict[str, BaseOperator | XComArg] = {}
    for step in RETRAIN.steps:
        made[step.name] = _task_of(step, steps, run_plan, made)
        chooser = RETRAIN.branch_of(step.name)
        # a branch waits for the task that follows the decision, which skips the branches not taken
        waits_for = [*(made[name] for name in step.upstream), *([follows[chooser.name]] if chooser else [])]
        for before in waits_for:
            before >> made[step.name]
        if step.branches:
            follows[step.name] = _branch_task(step, steps, made[step.name])
    _watch_every_task()


def _retries(step: GraphStep, settings: OrchestrationSettings) -> int:
    return {"none": 0, "transient": settings.task_retries, "once": min(settings.task_retries, 1)}[
        step.retries
    ]


def _task_of(
    step: GraphStep, steps: RetrainSteps, run_plan: XComArg, made: Mapping[str, BaseOperator | XComArg]
) -> BaseOperator | XComArg:
    settings = steps.settings
    options = TaskOptions(
        task_id=step.name,
        trigger_rule=step.runs,
        doc_md=step.doc,
        outlets=[OUTLETS[step.outlet]] if step.outlet is not None else [],
    )
    if step.display:
        options["task_display_name"] = step.display
    if step.label is None:  # its failure is not the retrain's: no failure publish
        options["on_failure_callback"] = None
    if step.noop:
        return EmptyOperator(**options)
    options["execution_timeout"] = timedelta(seconds=step.timeout_seconds)
    options["retries"] = _retries(step, settings)
    if step.trainer:
        options["pool"] = settings.training_pool
        if settings.launcher != "local":
            return container_train_operator(settings, **options)

    inputs = {name: made[name] for name in step.inputs if name != RUN}
    if step.runs == "all_done":  # runs whatever happened, the plan too: reads it if there is one

        @task(**options)
        def run_step_anyway(inputs: dict[str, Json]) -> Summary:
            return steps.run_step(step, _plan_if_any(), inputs)

        return run_step_anyway(inputs)  # type: ignore[arg-type]

    @task(**options)
    def run_step(plan: PlanXCom, inputs: dict[str, Json]) -> Summary:
        return steps.run_step(step, plan, inputs)

    # the call takes the upstreams' XComArgs for the values (airflow.sdk types it with the
    # function's own parameters: apache/airflow#39514)
    return run_step(run_plan, inputs)  # type: ignore[arg-type]


def _branch_task(step: GraphStep, steps: RetrainSteps, decision: BaseOperator | XComArg) -> XComArg:
    @task.branch(task_id=decisions.branch_task_id(step), execution_timeout=timedelta(minutes=2), retries=0)
    def follow(decision: Json) -> str:
        return steps.follow(step, decision)

    return follow(decision)  # type: ignore[arg-type,no-any-return]  # an XComArg: see _task_of


def _watch_every_task() -> None:
    """The watcher leaf, downstream of every other task."""

    @task(task_id=WATCHER, trigger_rule="one_failed", on_failure_callback=None, retries=0)
    def fail_run_if_a_step_failed_task() -> None:
        fail_run_if_a_step_failed()

    fail_run_if_a_step_failed_task()


def watch_every_task(dag: DAG) -> None:
    """Make the watcher leaf downstream of every other task."""
    watcher = dag.get_task(WATCHER)
    for step in dag.tasks:
        if step is not watcher:
            step >> watcher
