"""The DAG files as Airflow's DAG processor sees them: no import errors, the task graph, schedules,
retries, timeouts, the training pool, callbacks, the champion Asset — and they stay light to parse."""

from __future__ import annotations

import itertools
import json
import os
import statistics
import subprocess
import sys
from datetime import timedelta

import pytest
from airflow.dag_processing.dagbag import BundleDagBag
from airflow.providers.standard.operators.python import BranchPythonOperator
from dag_test_paths import DAGS

TRANSIENT = {
    "check_freshness",
    "build_window",
    "promote",
    "record_rejection",
    "materialize_online",
    "publish_metrics",
    "track",
    "collect_garbage",
}
NO_RETRY = {"plan", "validate_window", "gate", "decide", "decide_branch"}


@pytest.fixture(scope="module")
def dagbag() -> BundleDagBag:
    return BundleDagBag(dag_folder=str(DAGS), bundle_path=DAGS, bundle_name="dags-folder")


def test_dagbag_has_both_dags_and_no_import_errors(dagbag: BundleDagBag) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dag_ids) == {
        "ranker_retrain",
        "ranker_rollback",
        "ranker_pretrain",
        "ranker_recipe_review",
    }


def test_retrain_task_graph(dagbag: BundleDagBag) -> None:
    dag = dagbag.dags["ranker_retrain"]
    edges = {(t.task_id, d) for t in dag.tasks for d in t.downstream_task_ids}
    chain = [
        "plan",
        "check_freshness",
        "build_window",
        "validate_window",
        "train",
        "gate",
        "decide",
        "decide_branch",
    ]
    assert {(a, b) for a, b in itertools.pairwise(chain)} <= edges
    branches = {
        ("decide_branch", "promote"),
        ("decide_branch", "record_rejection"),
        ("decide_branch", "keep_champion"),
    }
    assert branches <= edges
    for outcome in ("promote", "record_rejection", "keep_champion"):
        assert (outcome, "materialize_online") in edges
    assert ("materialize_online", "publish_metrics") in edges
    # gc last, whatever happened (a failed run's checkpoints are kept by the retention itself)
    assert ("publish_metrics", "collect_garbage") in edges
    assert dag.get_task("collect_garbage").trigger_rule == "all_done"
    assert not dag.get_task("collect_garbage").on_failure_callback  # a gc failure is not the retrain's
    # the grid row of each outcome says what happened (a rejected run's one green outcome row)
    shown = {o: dag.get_task(o).task_display_name for o in ("promote", "record_rejection", "keep_champion")}
    assert shown == {
        "promote": "outcome: promoted",
        "record_rejection": "outcome: REJECTED by the gate",
        "keep_champion": "outcome: champion kept",
    }
    assert isinstance(dag.get_task("decide_branch"), BranchPythonOperator)  # a branch (the public class)
    assert not isinstance(dag.get_task("decide"), BranchPythonOperator)  # the decision is its return value
    assert dag.get_task("materialize_online").trigger_rule == "none_failed_min_one_success"
    assert dag.get_task("publish_metrics").trigger_rule == "all_done"
    # publish_metrics succeeds after failures: the watcher leaf makes the DagRun fail when any step did
    watcher = dag.get_task("fail_run_if_a_step_failed")
    assert watcher.trigger_rule == "one_failed"
    assert watcher.upstream_task_ids == {t.task_id for t in dag.tasks} - {watcher.task_id}
    assert not watcher.downstream_task_ids


def test_the_dag_is_the_declared_graph(dagbag: BundleDagBag) -> None:
    """One task per step of ranking/pipeline/graph.py's export, each waiting for exactly the steps
    it takes and waits for (and the plan, the branch task of a decision): no edge of its own."""
    from ranker_dags.decisions import PLAN, branch_task_id
    from ranker_dags.retrain_graph import RETRAIN

    dag = dagbag.dags["ranker_retrain"]
    watcher = "fail_run_if_a_step_failed"
    branch_tasks = {branch_task_id(s) for s in RETRAIN.steps if s.branches}
    assert {t.task_id for t in dag.tasks} == {PLAN, watcher, *branch_tasks, *(s.name for s in RETRAIN.steps)}
    for step in RETRAIN.steps:
        chooser = RETRAIN.branch_of(step.name)
        expected = {
            *step.upstream,
            *([branch_task_id(chooser)] if chooser else []),
            *([] if step.noop or step.runs == "all_done" else [PLAN]),
        }
        task = dag.get_task(step.name)
        assert task.upstream_task_ids == expected, step.name
        assert task.trigger_rule == step.runs and task.doc_md == step.doc, step.name
    for step in RETRAIN.steps:
        if step.branches:
            assert dag.get_task(branch_task_id(step)).downstream_task_ids - {watcher} == set(step.branches)


def test_retrain_schedule_and_run_limits(dagbag: BundleDagBag) -> None:
    dag = dagbag.dags["ranker_retrain"]
    # daily or on a new base model: scheduled runs keep a real data interval
    assert type(dag.timetable).__name__ == "AssetOrTimeSchedule"
    daily = dag.timetable.timetable
    assert type(daily).__name__ == "CronDataIntervalTimetable"
    assert daily.expression == "0 3 * * *" and str(daily.timezone) == "UTC"
    assert [a.name for a in dag.timetable.asset_condition.objects] == ["ranker_base"]
    assert dag.catchup is False
    assert dag.max_active_runs == 1


def test_retries_timeouts_pool_and_callbacks(dagbag: BundleDagBag) -> None:
    # conftest sets RANKER_TASK_RETRIES=0 for the e2e tests: check the production default on a fresh parse
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import ranker_retrain as m;"
        "print(json.dumps({t.task_id: [t.retries, t.retry_exponential_backoff, t.pool,"
        " t.execution_timeout.total_seconds() if t.execution_timeout else None,"
        " bool(t.on_failure_callback)] for t in m.ranker_retrain.tasks}))"
    )
    env = {k: v for k, v in os.environ.items() if k != "RANKER_TASK_RETRIES"}
    proc = subprocess.run(
        [sys.executable, "-c", code, str(DAGS)], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    tasks = json.loads(proc.stdout.strip().splitlines()[-1])
    for task_id in TRANSIENT:
        retries, backoff, _, _, _ = tasks[task_id]
        assert retries == 2 and backoff == 2.0, task_id
    for task_id in NO_RETRY:
        assert tasks[task_id][0] == 0, task_id
    assert tasks["train"][0] == 1
    assert tasks["train"][2] == "training"
    for task_id, (_, _, _, timeout, callback) in tasks.items():
        if task_id not in ("keep_champion", "fail_run_if_a_step_failed"):
            assert timeout and timeout <= timedelta(hours=8).total_seconds(), task_id
            assert callback or task_id in ("collect_garbage", "track"), task_id


def test_champion_asset_is_updated_by_promotion_and_rollback(dagbag: BundleDagBag) -> None:
    retrain, rollback = dagbag.dags["ranker_retrain"], dagbag.dags["ranker_rollback"]
    [asset] = retrain.get_task("promote").outlets
    assert (asset.name, asset.uri) == ("ranker_champion", "ranker://champion/")  # Airflow normalises the URI
    assert rollback.get_task("rollback").outlets == [asset]
    assert all(not t.outlets for t in retrain.tasks if t.task_id != "promote")


def test_pretrain_dag_is_weekly_and_publishes_the_base_asset(dagbag: BundleDagBag) -> None:
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.serialization.serialized_objects import DagSerialization

    dag = dagbag.dags["ranker_pretrain"]
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression == "0 1 * * 0"  # Sundays, before that day's retrain
    assert dag.max_active_runs == 1 and dag.catchup is False
    [task] = dag.tasks
    assert [(a.name, a.uri) for a in task.outlets] == [("ranker_base", "ranker://base/")]
    assert task.pool == "training"
    params = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    assert params.deep_merge({"window_end": "2026-03-01"}).validate()["window_end"] == "2026-03-01"
    with pytest.raises(ParamValidationError):
        params.deep_merge({"window_end": "yesterday"}).validate()


def test_pretrain_args() -> None:
    from ranker_dags.one_step_tasks import pretrain_args

    assert pretrain_args("2026-03-01", None) == ["pretrain", "--end", "2026-03-01"]
    assert pretrain_args("2026-03-01", " new data ") == [
        "pretrain",
        "--end",
        "2026-03-01",
        "--reason",
        "new data",
    ]


def test_rollback_dag_is_manual_with_validated_params(dagbag: BundleDagBag) -> None:
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.serialization.serialized_objects import DagSerialization

    dag = dagbag.dags["ranker_rollback"]
    assert type(dag.timetable).__name__ == "NullTimetable"  # manual only
    assert dag.max_active_runs == 1
    params = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    assert params.deep_merge({"reason": "bad model"}).validate() == {
        "to_version": None,
        "reason": "bad model",
    }
    for conf in (
        {},
        {"reason": ""},
        {"reason": "x", "to_version": "v1/../../etc"},
        {"reason": "x", "to_version": "3"},
    ):
        with pytest.raises(ParamValidationError):
            params.deep_merge(conf).validate()


HEAVY = ("torch", "feast", "ranking", "features", "pandas", "pyarrow", "kubernetes", "docker")
PARSE_SCRIPT = """
import importlib.util, json, sys, time
import airflow.sdk, airflow.providers.standard.operators.empty  # Airflow's own cost, shared by all files
sys.path.insert(0, sys.argv[1])
before = set(sys.modules)
start = time.perf_counter()
spec = importlib.util.spec_from_file_location("dag_under_test", sys.argv[2])
module = importlib.util.module_from_spec(spec)
spec.loader.exec_module(module)
seconds = time.perf_counter() - start
new = sorted({m.split(".")[0] for m in set(sys.modules) - before})
print(json.dumps({"seconds": seconds, "new_top_level_modules": new}))
"""


@pytest.mark.slow
@pytest.mark.parametrize(
    "dag_file", ["ranker_retrain.py", "ranker_rollback.py", "ranker_pretrain.py", "ranker_recipe_review.py"]
)
def test_dag_file_parses_fast_without_heavy_imports(dag_file: str) -> None:
    """Each file is parsed in a fresh interpreter (as the DAG processor does), 5 times; the median
    must stay under 0.5 s and nothing heavy may be imported at parse time."""
    runs = []
    for _ in range(5):
        proc = subprocess.run(
            [sys.executable, "-c", PARSE_SCRIPT, str(DAGS), str(DAGS / dag_file)],
            capture_output=True,
            text=True,
            timeout=120,
        )
        assert proc.returncode == 0, proc.stderr[-2000:]
        runs.append(json.loads(proc.stdout.strip().splitlines()[-1]))
    heavy = [m for m in runs[0]["new_top_level_modules"] if m in HEAVY]
    assert heavy == [], f"{dag_file} imports {heavy} at parse time"
    median = statistics.median(r["seconds"] for r in runs)
    print(f"{dag_file}: median parse {median:.3f} s over {len(runs)} runs")
    assert median < 0.5, f"{dag_file} takes {median:.3f} s to parse"


def test_recipe_review_dag_is_weekly_and_runs_ranker_review(dagbag: BundleDagBag) -> None:
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.serialization.serialized_objects import DagSerialization
    from ranker_dags.one_step_tasks import review_args

    dag = dagbag.dags["ranker_recipe_review"]
    assert type(dag.timetable).__name__ == "CronDataIntervalTimetable"
    assert dag.timetable.expression == "0 5 * * 6"
    assert dag.max_active_runs == 1 and dag.catchup is False
    [task] = dag.tasks
    assert task.pool == "training" and task.retries == 0  # a review that failed keeps the recipe
    # a failed review exports its own outcome; it is not a failed retrain step (issue 32)
    assert not task.on_failure_callback
    params = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    assert params.deep_merge({"end": "2026-03-01", "days": 7}).validate()["days"] == 7
    for bad in ({"end": "yesterday"}, {"days": 0}):
        with pytest.raises(ParamValidationError):
            params.deep_merge(bad).validate()
    assert review_args("2026-03-01", None, False) == ["review", "--end", "2026-03-01"]
    assert review_args("2026-03-01", 14, True) == [
        "review",
        "--end",
        "2026-03-01",
        "--days",
        "14",
        "--candidate-only",
    ]
