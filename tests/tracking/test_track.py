"""track(): a record lands in MLflow (the real server, and the workspace's SQLite store) once,
with its params, metrics by step, tags and artifacts; a parent before its child; a down server
queues it fast, and `ranker tracking replay` delivers it."""

from __future__ import annotations

import json
import os
import subprocess
import time
from pathlib import Path

from mlflow import MlflowClient
from mlflow_server import REPO, MlflowServer

from ranking.config.model import TrackingSection
from ranking.tracking.client import CHANGED_PARAM_TAG
from ranking.tracking.outbox import track
from ranking.tracking.queue import queued_files
from ranking.tracking.records import RECORD_ID_TAG, MetricPoint, TrackingRecord
from ranking.tracking.settings import TrackingSettings, tracking_settings


def _settings(home: Path, server: MlflowServer | None) -> TrackingSettings:
    return tracking_settings(home, TrackingSection(uri=server.url) if server else None)


def _record(home: Path, record_id: str = "train:run-1", **update: object) -> TrackingRecord:
    report = home / "report.md"
    report.write_text("# the run's report\n")
    record = TrackingRecord(
        record_id=record_id,
        experiment="ranker-train",
        run_name=record_id.split(":")[-1],
        params={"recipe.epochs": "2", "recipe.epochs.source": "default"},
        metrics=[
            *(MetricPoint(key="train.loss", value=1.0 / (step + 1), step=step) for step in range(1500)),
            MetricPoint(key="eval.save_hit_at_3", value=0.42),
        ],
        tags={"ranker.version": "v-1", "ranker.window": "2026-11-01..2026-11-20"},
        artifacts=[str(report)],
        start_ms=1_790_000_000_000,
        end_ms=1_790_000_060_000,
    )
    return record.model_copy(update=update)


def _runs(client: MlflowClient, experiment: str, record_id: str) -> list:  # type: ignore[type-arg]
    exp = client.get_experiment_by_name(experiment)
    assert exp is not None
    return client.search_runs([exp.experiment_id], filter_string=f"tags.`{RECORD_ID_TAG}` = '{record_id}'")


def _check_landed(client: MlflowClient, run_id: str) -> None:
    run = client.get_run(run_id)
    assert run.data.params == {"recipe.epochs": "2", "recipe.epochs.source": "default"}
    assert run.data.tags["ranker.version"] == "v-1"
    assert run.data.tags["mlflow.runName"] == "run-1"
    assert run.info.status == "FINISHED"
    assert (run.info.start_time, run.info.end_time) == (1_790_000_000_000, 1_790_000_060_000)
    history = client.get_metric_history(run_id, "train.loss")
    assert len(history) == 1500  # more than one log_batch's 1000
    assert {m.step: m.value for m in history}[9] == 0.1
    assert run.data.metrics["eval.save_hit_at_3"] == 0.42
    assert [f.path for f in client.list_artifacts(run_id)] == ["report.md"]


def test_a_record_lands_on_the_server_once(running_mlflow: MlflowServer, tmp_path: Path) -> None:
    settings = _settings(tmp_path, running_mlflow)
    ref = track(_record(tmp_path), settings)
    assert not ref.queued and ref.run_id, ref.message
    assert ref.url == f"{running_mlflow.url}/#/experiments/{ref.experiment_id}/runs/{ref.run_id}"
    client = MlflowClient(running_mlflow.url)
    _check_landed(client, ref.run_id)
    # the same record again (a rerun, a replay): the same run, no metric logged twice; a param
    # with another value cannot change (MLflow params are immutable): it is kept as a tag
    again = track(_record(tmp_path, params={"recipe.epochs": "3"}), settings)
    assert again.run_id == ref.run_id and not again.queued
    assert len(_runs(client, "ranker-train", "train:run-1")) == 1
    run = client.get_run(ref.run_id)
    assert run.data.params["recipe.epochs"] == "2"
    assert run.data.tags[f"{CHANGED_PARAM_TAG}recipe.epochs"] == "3"
    assert "ranker.param_changed" in again.message
    assert len(client.get_metric_history(ref.run_id, "train.loss")) == 1500


def test_the_workspace_store_with_no_server(tmp_path: Path) -> None:
    settings = _settings(tmp_path, None)
    assert settings.uri == f"sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db"
    ref = track(_record(tmp_path), settings)
    assert not ref.queued and ref.run_id, ref.message
    client = MlflowClient(settings.uri)
    _check_landed(client, ref.run_id)
    artifact_uri = client.get_run(ref.run_id).info.artifact_uri
    assert artifact_uri.startswith((tmp_path.resolve() / "mlflow" / "artifacts").as_uri())
    assert track(_record(tmp_path), settings).run_id == ref.run_id


def test_a_child_names_its_parent(running_mlflow: MlflowServer, tmp_path: Path) -> None:
    settings = _settings(tmp_path, running_mlflow)
    parent = track(_record(tmp_path, "backtest:b-1", experiment="ranker-backtest"), settings)
    child = track(
        _record(
            tmp_path,
            "backtest:b-1:day:2026-11-21",
            experiment="ranker-backtest",
            parent_record_id="backtest:b-1",
        ),
        settings,
    )
    run = MlflowClient(running_mlflow.url).get_run(child.run_id)  # type: ignore[arg-type]
    assert run.data.tags["mlflow.parentRunId"] == parent.run_id
    assert run.data.tags["ranker.parent_record_id"] == "backtest:b-1"


def test_a_down_server_queues_fast_and_replay_delivers(running_mlflow: MlflowServer, tmp_path: Path) -> None:
    settings = _settings(tmp_path, running_mlflow)
    running_mlflow.stop()
    started = time.monotonic()
    parent = track(_record(tmp_path, "review:r-1", experiment="ranker-review"), settings)
    child = track(
        _record(
            tmp_path, "review:r-1:day:2026-11-21", experiment="ranker-review", parent_record_id="review:r-1"
        ),
        settings,
    )
    elapsed = time.monotonic() - started
    assert parent.queued and child.queued and parent.run_id is None
    assert elapsed < 30, f"two tracks on a down server took {elapsed:.1f} s"
    assert "ranker tracking replay" in parent.message and "\n" not in parent.message
    assert [f.path.name for f in queued_files(settings)] == [
        "000000001-review_r-1.json",
        "000000002-review_r-1_day_2026-11-21.json",
    ]
    replay = [str(REPO / ".venv/bin/ranker"), "tracking", "replay", "--home", str(tmp_path), "--json"]
    env = {**os.environ, "RANKER_MLFLOW_TRACKING_URI": running_mlflow.url}
    down = subprocess.run(replay, capture_output=True, text=True, env=env, timeout=120)
    assert down.returncode == 1, (down.stdout, down.stderr)
    assert json.loads(down.stdout.splitlines()[-1])["left"] == 2, down.stdout[:800]
    assert len(down.stderr.strip().splitlines()) == 1, down.stderr
    running_mlflow.start()
    up = subprocess.run(replay, capture_output=True, text=True, env=env, timeout=120)
    assert up.returncode == 0, up.stderr
    assert up.stdout.startswith("{"), (up.stdout[:1500], up.stderr[-1500:])
    summary = json.loads(up.stdout)
    assert (len(summary["sent"]), summary["left"]) == (2, 0)
    assert queued_files(settings) == []
    client = MlflowClient(running_mlflow.url)
    [parent_run] = _runs(client, "ranker-review", "review:r-1")
    [child_run] = _runs(client, "ranker-review", "review:r-1:day:2026-11-21")
    assert child_run.data.tags["mlflow.parentRunId"] == parent_run.info.run_id
    assert len(client.get_metric_history(child_run.info.run_id, "train.loss")) == 1500
