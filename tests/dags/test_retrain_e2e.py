"""End to end: the real DAGs run with dag.test() on a SQLite Airflow DB, every task calling the real
`ranker` CLI (.venv/bin/ranker) on a tiny synthetic workspace. One workspace, one story:

1. first run for day 1: no champion, absolute gate checks → promoted (v1)
2. rerun of day 1: window partitions reused, a new candidate registered, no second promotion
3. day 2 with an unreachable HIT@3 floor → rejected and recorded; the champion stays
4. day 2 forced past the gate with a reason → promoted, the history says forced and why
5. ranker_rollback → the champion goes back to the previous one, recorded with who and why
6. a dry run → trained and gated, the champion and its history untouched
plus a run whose Params contradict each other: it fails in `plan`, trains nothing, still
publishes its metrics.

Each stage is a module fixture depending on the previous one, so they run once, in order.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from dag_test_paths import RANKER_BIN

pytestmark = [pytest.mark.slow, pytest.mark.airflow]

START, DAYS, WINDOW_DAYS = "2026-01-01", 10, 5
DAY1, DAY2 = "2026-01-08", "2026-01-09"
FAST_TRAIN = {"window_days": WINDOW_DAYS, "epochs": 2, "schedule": "F,J", "pipeline": "sync"}


def ranker(home: Path, *args: str) -> dict[str, Any]:
    proc = subprocess.run(
        [str(RANKER_BIN), *args, "--json", "--home", str(home)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"ranker {' '.join(args)} failed:\n{proc.stderr[-3000:]}"
    return dict(json.loads(proc.stdout.strip().splitlines()[-1]))


@dataclass
class RunResult:
    state: str
    tasks: dict[str, str]
    run_id: str  # the ranker run id (step summaries live in <home>/pipeline/<run_id>/)
    models: dict[str, Any]  # `ranker models list` right after the run

    def summary(self, home: Path, step: str) -> dict[str, Any]:
        return dict(json.loads((home / "pipeline" / self.run_id / f"{step}.json").read_text()))


def run_dag(make_dag: Any, home: Path, conf: dict[str, Any]) -> RunResult:
    from ranker_dags.params import ranker_run_id

    dag_run = make_dag().test(run_conf=conf)
    tasks = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances()}
    return RunResult(str(dag_run.state), tasks, ranker_run_id(dag_run.run_id), ranker(home, "models", "list"))


@pytest.fixture(scope="module")
def home(airflow_db: Path) -> Iterator[Path]:
    if not RANKER_BIN.exists():
        pytest.skip(f"{RANKER_BIN} is missing: run `make setup`")
    # a folder of our own, not pytest's basetemp: concurrent pytest sessions on a shared machine
    # prune old basetemps, and this story runs for minutes
    home = Path(tempfile.mkdtemp(prefix="ranker-dag-e2e-"))
    try:
        synth = ["data", "synth", "--start", START, "--days", str(DAYS), "--seed", "11"]
        ranker(home, *synth, "--users", "300", "--pins", "600", "--requests-per-day", "200")
        ranker(home, "features", "apply")
        # the workspace's pipeline config: the DAG's steps read it, its Params go above it
        (home / "ranker.toml").write_text("[window]\nmin_coverage = 0.8\n[recipe]\nbatch_size = 256\n")
        yield home
    finally:
        shutil.rmtree(home, ignore_errors=True)


@pytest.fixture(scope="module")
def dags(home: Path) -> dict[str, Any]:
    """DAG factories: a fresh DAG object per run, as each real run parses the file anew (in-process
    dag.test() runs would otherwise share Param objects, and one run's conf would leak into the next)."""
    from ranker_dags.settings import OrchestrationSettings
    from ranker_retrain import build_retrain_dag
    from ranker_rollback import build_rollback_dag

    settings = OrchestrationSettings(ranker_bin=str(RANKER_BIN), home=str(home), task_retries=0)
    return {"retrain": lambda: build_retrain_dag(settings), "rollback": lambda: build_rollback_dag(settings)}


@pytest.fixture(scope="module")
def first_run(dags: dict[str, Any], home: Path) -> RunResult:
    return run_dag(dags["retrain"], home, {"window_end": DAY1, **FAST_TRAIN})


@pytest.fixture(scope="module")
def rerun(first_run: RunResult, dags: dict[str, Any], home: Path) -> RunResult:
    # a lenient HIT@3 change threshold (the guardrails still apply)
    return run_dag(dags["retrain"], home, {"window_end": DAY1, "tolerance": 0.9, **FAST_TRAIN})


@pytest.fixture(scope="module")
def rejected_run(rerun: RunResult, dags: dict[str, Any], home: Path) -> RunResult:
    return run_dag(dags["retrain"], home, {"window_end": DAY2, "min_hit": 1.0, **FAST_TRAIN})


@pytest.fixture(scope="module")
def forced_run(rejected_run: RunResult, dags: dict[str, Any], home: Path) -> RunResult:
    conf = {
        "window_end": DAY2,
        "min_hit": 1.0,
        "force_promote": True,
        "reason": "e2e: incident drill",
        **FAST_TRAIN,
    }
    return run_dag(dags["retrain"], home, conf)


@pytest.fixture(scope="module")
def rollback_run(forced_run: RunResult, dags: dict[str, Any], home: Path) -> RunResult:
    return run_dag(dags["rollback"], home, {"reason": "e2e: forced model misbehaves"})


@pytest.fixture(scope="module")
def dry_run(rollback_run: RunResult, dags: dict[str, Any], home: Path) -> RunResult:
    return run_dag(
        dags["retrain"], home, {"window_end": DAY2, "dry_run": True, "tolerance": 0.9, **FAST_TRAIN}
    )


def versions(models: dict[str, Any]) -> list[str]:
    return [row["version"] for row in models["versions"]]


def test_the_steps_take_the_config_file_and_the_params_above_it(first_run: RunResult, home: Path) -> None:
    window = first_run.summary(home, "window")
    assert json.loads(Path(window["manifest"]).read_text())["checks"]["min_coverage"] == 0.8
    validated = first_run.summary(home, "validate")  # the data validation step, as `ranker run` runs it
    assert validated["verdict"] in ("pass", "warn") and validated["window_id"] == window["window_id"]
    train = first_run.summary(home, "train")
    recorded = json.loads(Path(train["effective_config"]).read_text())
    assert recorded["config"]["recipe"]["batch_size"] == 256
    assert recorded["sources"]["recipe.batch_size"] == f"file:{home / 'ranker.toml'}"
    for key in ("window.days", "recipe.epochs", "recipe.schedule", "recipe.pipeline"):
        assert recorded["sources"][key] == "param", key
    assert recorded["sources"]["recipe.warm_start"] == "default"  # an empty Param: not passed


def test_first_run_promotes_without_a_champion(first_run: RunResult, home: Path) -> None:
    assert first_run.state == "success", first_run.tasks
    assert first_run.tasks["promote"] == "success"
    assert first_run.tasks["record_rejection"] == "skipped"
    assert first_run.tasks["keep_champion"] == "skipped"
    assert first_run.tasks["materialize_online"] == "success"
    assert first_run.tasks["publish_metrics"] == "success"
    assert first_run.tasks["track"] == "success"
    tracked = first_run.summary(home, "track")  # the run as one MLflow run, in the workspace's store
    assert tracked["record_id"] == f"retrain:{first_run.run_id}" and tracked["mlflow_run_id"]
    assert tracked["decision"] in ("promoted", "promoted-forced") and not tracked["queued"]
    assert first_run.tasks["collect_garbage"] == "success"  # `ranker gc`: nothing old enough yet
    assert first_run.tasks["fail_run_if_a_step_failed"] == "skipped"
    assert (home / "runs" / first_run.run_id / "checkpoints").is_dir()
    gate = first_run.summary(home, "gate")
    assert gate["decision"] == "pass" and gate["champion"] is None
    decided = first_run.summary(home, "decide")  # the branch is `ranker decide`'s answer
    assert (decided["branch"], decided["force"], decided["version"]) == (
        "promote",
        False,
        versions(first_run.models)[0],
    )
    [v1] = versions(first_run.models)
    assert first_run.models["champion"] == v1
    [event] = first_run.models["history"]
    assert (event["to"], event["action"], event["forced"]) == (v1, "promote", False)
    assert event["run_id"] == first_run.run_id
    window = first_run.summary(home, "window")
    assert (window["end"], window["days"]) == (DAY1, WINDOW_DAYS)
    metrics = (home / "metrics" / "ranker.prom").read_text()
    assert 'ranker_runs_total{status="success"} 1.0' in metrics


def test_rerun_of_a_date_reuses_the_window_and_never_promotes_twice(
    first_run: RunResult, rerun: RunResult, home: Path
) -> None:
    assert rerun.state == "success", rerun.tasks
    window = rerun.summary(home, "window")
    assert window["days_built"] == 0 and window["days_reused"] == WINDOW_DAYS + 1
    v1, v2 = versions(rerun.models)
    assert rerun.summary(home, "train")["version"] == v2
    assert rerun.tasks["promote"] == "skipped"
    # whatever the gate said: a pass keeps the champion (one promotion per date), a reject records it
    expected_branch = (
        "keep_champion" if rerun.summary(home, "gate")["decision"] == "pass" else "record_rejection"
    )
    assert rerun.tasks[expected_branch] == "success"
    assert rerun.summary(home, "decide")["branch"] == expected_branch
    assert rerun.models["champion"] == v1
    assert len(rerun.models["history"]) == 1


def test_rejection_is_recorded_and_the_champion_stays(
    rerun: RunResult, rejected_run: RunResult, home: Path
) -> None:
    assert rejected_run.state == "success", rejected_run.tasks
    assert rejected_run.tasks["record_rejection"] == "success"
    assert rejected_run.tasks["promote"] == "skipped"
    assert rejected_run.summary(home, "decide")["branch"] == "record_rejection"
    gate = rejected_run.summary(home, "gate")
    assert gate["decision"] == "reject"
    assert any("hit" in check for check in gate["failed_checks"]), gate["failed_checks"]
    assert rejected_run.models["champion"] == rerun.models["champion"]
    candidate = rejected_run.summary(home, "train")["version"]
    row = next(r for r in rejected_run.models["versions"] if r["version"] == candidate)
    assert row["status"] == "rejected-by-gate"
    metrics = (home / "metrics" / "ranker.prom").read_text()
    rejections = len(list((home / "pipeline").glob("*/reject.json")))
    assert f"ranker_rejections_total {float(rejections)}" in metrics
    assert "ranker_gate_passed 0.0" in metrics


def test_forced_promotion_records_the_reason(
    rejected_run: RunResult, forced_run: RunResult, home: Path
) -> None:
    assert forced_run.state == "success", forced_run.tasks
    assert forced_run.summary(home, "gate")["decision"] == "reject"
    assert forced_run.tasks["promote"] == "success"
    candidate = forced_run.summary(home, "train")["version"]
    assert forced_run.models["champion"] == candidate
    event = forced_run.models["history"][-1]
    assert event["forced"] is True
    assert "e2e: incident drill" in event["reason"]
    decided = forced_run.summary(home, "decide")
    assert (decided["branch"], decided["force"], decided["reason"]) == ("promote", True, event["reason"])
    assert event["from"] == rejected_run.models["champion"]


def test_rollback_restores_the_previous_champion_and_records_who_and_why(
    forced_run: RunResult, rollback_run: RunResult
) -> None:
    assert rollback_run.state == "success", rollback_run.tasks
    previous = forced_run.models["history"][-1]["from"]
    assert rollback_run.models["champion"] == previous
    event = rollback_run.models["history"][-1]
    assert (event["action"], event["from"], event["to"]) == (
        "rollback",
        forced_run.models["champion"],
        previous,
    )
    assert event["reason"] == "e2e: forced model misbehaves"
    assert event["who"] == "dag_test"  # dag.test()'s triggering user; the UI/API user in production


def champion_asset_events() -> list[dict[str, Any]]:
    """Events on the champion Asset, oldest first, from the Airflow metadata DB."""
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    with create_session() as session:
        rows = session.execute(
            select(AssetEvent.source_dag_id, AssetEvent.source_task_id, AssetEvent.extra)
            .join(AssetModel, AssetModel.id == AssetEvent.asset_id)
            .where(AssetModel.name == "ranker_champion")
            .order_by(AssetEvent.id)
        ).all()
    return [{"dag": dag, "task": task, **extra} for dag, task, extra in rows]


def test_dry_run_trains_and_gates_but_never_promotes(
    rollback_run: RunResult, dry_run: RunResult, home: Path
) -> None:
    assert dry_run.state == "success", dry_run.tasks
    assert dry_run.summary(home, "gate")["decision"] in ("pass", "reject")
    assert dry_run.tasks["keep_champion"] == "success"
    assert dry_run.summary(home, "decide")["branch"] == "keep_champion"
    assert dry_run.tasks["promote"] == dry_run.tasks["record_rejection"] == "skipped"
    assert len(versions(dry_run.models)) == len(versions(rollback_run.models)) + 1
    assert dry_run.models["champion"] == rollback_run.models["champion"]
    assert dry_run.models["history"] == rollback_run.models["history"]


def test_every_champion_move_is_an_asset_event(dry_run: RunResult) -> None:
    """Downstream (serving) DAGs scheduled on the champion Asset see each promotion and rollback,
    and nothing else (a rejected, kept or dry run emits no event)."""
    events = champion_asset_events()
    moves = dry_run.models["history"]
    assert [(e["task"], e["version"]) for e in events] == [
        ("promote" if m["action"] == "promote" else "rollback", m["to"]) for m in moves
    ]
    assert events[-1]["dag"] == "ranker_rollback" and events[-1]["who"] == "dag_test"


def test_contradicting_params_fail_in_plan_and_train_nothing(
    dry_run: RunResult, dags: dict[str, Any], home: Path
) -> None:
    result = run_dag(dags["retrain"], home, {"window_end": DAY2, "force_promote": True, **FAST_TRAIN})
    assert result.state == "failed"  # the watcher leaf fails the run although publish_metrics succeeded
    assert result.tasks["fail_run_if_a_step_failed"] == "failed"
    assert result.tasks["plan"] == "failed"
    assert result.tasks["train"] == "upstream_failed"
    assert result.tasks["publish_metrics"] == "success"
    assert result.tasks["track"] == "success"  # all_done: a failed run is a FAILED MLflow run
    assert result.tasks["collect_garbage"] == "success"  # all_done: the disk is measured anyway
    assert versions(result.models) == versions(dry_run.models)
    assert result.models["champion"] == dry_run.models["champion"]
    published = result.summary(home, "metrics")
    assert published.get("status") == "failed", published


def test_schema_invalid_params_never_create_a_run(airflow_db: Path) -> None:
    from airflow.sdk.exceptions import ParamValidationError
    from ranker_retrain import ranker_retrain

    for conf in ({"window_days": 0}, {"window_end": "2026-13-40"}, {"schedule": "sometimes"}):
        with pytest.raises(ParamValidationError):
            ranker_retrain.test(run_conf=conf)
        assert ranker_retrain.params["window_days"] is None  # the refused conf left no trace


LATE_SNAPSHOTS = """
import datetime as dt, sys
import pyarrow as pa, pyarrow.compute as pc
from features import sources
from features.schema import SNAPSHOT_TIME
from ranking.core.workspace import Workspace
ws, day = Workspace.resolve(sys.argv[1]), dt.date.fromisoformat(sys.argv[2])
table = sources.read_day(ws, sources.PINS, day)
i = table.schema.get_field_index(SNAPSHOT_TIME)
late = pc.add(table.column(i), pa.scalar(dt.timedelta(hours=12), pa.duration("us"))).cast(table.schema.field(i).type)
sources.write_day(ws, sources.PINS, day, table.set_column(i, SNAPSHOT_TIME, late))
"""


def test_a_window_that_fails_its_data_validation_stops_the_dag_before_training(
    dry_run: RunResult, dags: dict[str, Any], home: Path
) -> None:
    """The same validation step as `ranker run`'s: a snapshot dated after its impressions (a
    leak read from the data) fails `validate_window` in one line; nothing trains, the run fails."""
    python = RANKER_BIN.with_name("python")
    subprocess.run([str(python), "-c", LATE_SNAPSHOTS, str(home), "2026-01-08"], check=True, timeout=300)
    result = run_dag(dags["retrain"], home, {"window_end": "2026-01-10", **FAST_TRAIN})
    assert result.state == "failed"
    assert result.tasks["build_window"] == "success" and result.tasks["validate_window"] == "failed"
    assert result.tasks["train"] == "upstream_failed"
    validated = result.summary(home, "validate")
    assert validated["verdict"] == "fail" and validated["exit_code"] == 2
    assert "leakage_snapshot_date" in validated["error"]
    assert versions(result.models) == versions(dry_run.models)
    assert result.summary(home, "metrics")["failed_step"] == "validate"
