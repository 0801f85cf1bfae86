"""What each task of ``ranker_retrain`` does: the bodies the DAG file's ``@task`` functions call.

Every step is one ``ranker`` CLI call (``RetrainSteps.ranker``) whose JSON summary is the task's
XCom; the checks on the summaries and the command lines of the post-gate steps are
``ranker_dags/decisions.py``'s. The task ids, retries and timeouts are the DAG file's.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from airflow.sdk import DAG, BaseOperator, XComArg, get_current_context, task
from airflow.sdk.exceptions import AirflowException, AirflowFailException

from ranker_dags import decisions
from ranker_dags.assets import CHAMPION
from ranker_dags.launchers import container_train_operator, params_arg, summary_from_xcom, train_step_args
from ranker_dags.params import make_plan, ranker_run_id
from ranker_dags.ranker_cli import EXIT_NEGATIVE, EXIT_OK, StepResult, ranker_argv, run_ranker
from ranker_dags.run_context import failing_on_plan_errors, run_type, triggering_user
from ranker_dags.settings import OrchestrationSettings

log = logging.getLogger(__name__)

WATCHER = "fail_run_if_a_step_failed"
DECISION_KEY = "decision"  # XCom key of `ranker decide`'s answer, pushed by the decide task

Plan = dict[str, Any]  # RetrainPlan.to_dict(), the plan task's XCom


class SourceNotReady(AirflowException):
    """The eval day's source data has not landed yet: retried with backoff."""


@dataclass(frozen=True)
class RetrainSteps:
    """The task bodies, bound to the deployment settings (where ``ranker`` is, the workspace)."""

    settings: OrchestrationSettings

    def ranker(
        self, plan: Plan, args: list[str], allowed: tuple[int, ...] = (EXIT_OK,), record: bool = True
    ) -> StepResult:
        """Run one step as the run's actor; ``record=False`` leaves no step summary in the run."""
        run_id = plan["run_id"] if record else None
        argv = ranker_argv(self.settings.ranker_bin, args, home=self.settings.home, run_id=run_id)
        return run_ranker(argv, allowed_exit_codes=allowed, extra_env={"RANKER_ACTOR": plan["actor"]})

    def plan(self) -> dict[str, Any]:
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

    def check_freshness(self, plan: Plan) -> dict[str, Any]:
        summary = self.ranker(plan, ["features", "freshness"]).summary
        problem = decisions.freshness_problem(summary, plan["window_end"])
        if problem:
            raise SourceNotReady(problem)
        return summary

    def build_window(self, plan: Plan) -> dict[str, Any]:
        args = ["features", "window", "--end", plan["window_end"], "--params", params_arg(plan)]
        return self.ranker(plan, args).summary

    def validate_window(self, plan: Plan) -> dict[str, Any]:
        """The data validation step (``ranker features validate``): a failing anomaly fails the
        task (exit 2, its line in the log); its summary lists every anomaly."""
        args = ["features", "validate", "--end", plan["window_end"], "--params", params_arg(plan)]
        return self.ranker(plan, args).summary

    def train(self, plan: Plan) -> dict[str, Any]:
        return self.ranker(plan, train_step_args(plan, self.settings.train_nproc)).summary

    def gate(self, plan: Plan, train_result: object) -> dict[str, Any]:
        candidate = summary_from_xcom(train_result)["version"]
        args = ["gate", "--candidate", str(candidate), "--end", plan["window_end"]]
        args += ["--params", params_arg(plan)]
        result = self.ranker(plan, args, allowed=(EXIT_OK, EXIT_NEGATIVE))
        report = {**result.summary, "candidate_version": candidate}
        for line in decisions.gate_check_lines(report):
            log.info("%s", line)
        self._write_run_report(plan)
        return report

    def _write_run_report(self, plan: Plan) -> None:
        """report.md + a labelled curve.png beside the model: for people, never fails the gate."""
        try:
            written = self.ranker(plan, ["report", "--run", plan["run_id"]], record=False).summary
            log.info("run report: %s (curve: %s)", written.get("report"), written.get("curve"))
        except AirflowException as exc:
            log.warning("no run report: %s", exc)

    def decide(self, plan: Plan, report: Mapping[str, Any]) -> str:
        """The branch to follow: the promotion policy is ``ranker decide``'s; the branch tasks read
        its answer from XCom (``DECISION_KEY``)."""
        decision = self.ranker(plan, decisions.decide_args(plan, report["candidate_version"])).summary
        get_current_context()["ti"].xcom_push(key=DECISION_KEY, value=decision)
        branch_task = decisions.branch_task(decision)
        log.info("decision: %s %s (%s)", branch_task, decision.get("version"), decision.get("reason"))
        return branch_task

    def promote(self, plan: Plan) -> dict[str, Any]:
        summary = self.ranker(plan, decisions.promote_args(_decision())).summary
        get_current_context()["outlet_events"][CHAMPION].extra = {
            "version": summary.get("version"),
            "previous": summary.get("previous"),
            "window_end": plan["window_end"],
            "run_id": plan["run_id"],
        }
        return summary

    def record_rejection(self, plan: Plan) -> dict[str, Any]:
        return self.ranker(plan, decisions.reject_args(_decision())).summary

    def materialize_online(self, plan: Plan) -> dict[str, Any]:
        return self.ranker(plan, ["features", "materialize", "--end", plan["window_end"]]).summary

    def publish_metrics(self) -> dict[str, Any]:
        """Runs even when plan failed, so the run id comes from the Airflow run, not the plan."""
        context = get_current_context()
        ti = context["ti"]
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id])[ti.run_id]
        states = {task_id: state for task_id, state in states.items() if task_id != ti.task_id}
        outcome = decisions.run_outcome(states)
        run = {"run_id": ranker_run_id(context["dag_run"].run_id), "actor": "airflow"}
        return {**self.ranker(run, decisions.publish_args(states)).summary, "outcome": outcome}

    def collect_garbage(self) -> dict[str, Any]:
        """``ranker gc`` on the workspace (not a step of the run: no step summary); the XCom is
        its counts and the disk, each removal is in the task log."""
        summary = self.ranker({"actor": "airflow"}, ["gc"], record=False).summary
        for row in summary.get("removed", []):
            log.info("gc removed %s %s (%s bytes)", row.get("kind"), row.get("where"), row.get("bytes"))
        for row in summary.get("failed", []):
            log.warning("gc could not remove %s %s: %s", row.get("kind"), row.get("where"), row.get("why"))
        counts = {key: len(summary.get(key, [])) for key in ("removed", "kept", "failed")}
        return {**counts, "bytes_freed": summary.get("bytes_freed"), "disk": summary.get("disk")}


def fail_run_if_a_step_failed() -> None:
    """publish_metrics (all_done) is a leaf that succeeds after failures; the watcher leaf makes the
    DagRun itself failed when any step failed (and is skipped when none did)."""
    raise AirflowFailException("a step of this retrain failed: see the failed task(s)")


def _decision() -> dict[str, Any]:
    answer: dict[str, Any] = get_current_context()["ti"].xcom_pull(task_ids="decide", key=DECISION_KEY)
    return answer


def train(steps: RetrainSteps, plan: XComArg, window: XComArg) -> XComArg:
    """The ``train`` task, run where ``RANKER_LAUNCHER`` says: a ``ranker train`` process of the
    worker (local) or a trainer container (kubernetes, docker); its XCom is the train summary."""
    settings = steps.settings
    retries = min(settings.task_retries, 1)
    pool, timeout = settings.training_pool, timedelta(hours=8)
    if settings.launcher != "local":
        operator: BaseOperator = container_train_operator(
            settings, task_id="train", pool=pool, execution_timeout=timeout, retries=retries
        )
        window >> operator
        return operator.output

    @task(task_id="train", pool=pool, execution_timeout=timeout, retries=retries)
    def local_train(plan: dict[str, Any], window: dict[str, Any]) -> dict[str, Any]:
        return steps.train(plan)

    # the call takes the upstreams' XComArgs for the values (airflow.sdk types it with the function's
    # own parameters: apache/airflow#39514)
    return local_train(plan, window)  # type: ignore[arg-type]


def watch_every_task(dag: DAG) -> None:
    """Make the watcher leaf downstream of every other task."""
    watcher = dag.get_task(WATCHER)
    for step in dag.tasks:
        if step is not watcher:
            step >> watcher
