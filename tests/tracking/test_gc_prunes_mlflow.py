"""`ranker gc` prunes MLflow with what it removes (issue 35): a registered version's run folder past
[retention] run_days goes, and so do the MLflow runs that trained it (the pipeline run that
registered it, `ranker train`'s record of the folder); the model version stays, as it stays in the
project's registry; a folder gc keeps keeps its run. MLflow down: gc still succeeds, the deletion
is queued."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow_server import MlflowServer
from registry_fixtures import RunFactory

from ranking.cli.main import main
from ranking.config.model import TrackingSection
from ranking.registry import Registry
from ranking.registry.retention import EXPIRED_RUN, REGISTERED_FILE
from ranking.tracking.outbox import track
from ranking.tracking.queue import queued_files
from ranking.tracking.records import TrackingRecord
from ranking.tracking.settings import tracking_settings

DAY = 86400.0


def _registered_run(home: Path, make_run: RunFactory, name: str, age_days: float) -> str:
    reg = Registry(str(home / "registry"))
    run = make_run().rename(home / "runs" / name)
    version = reg.register(run, name)
    (run / REGISTERED_FILE).write_text(json.dumps({"version": version}))
    then = time.time() - age_days * DAY
    for sub in [run, *run.rglob("*")]:
        os.utime(sub, (then, then), follow_symlinks=False)
    return version


def _trained(settings: object, version: str, run_id: str) -> str | None:
    ref = track(
        TrackingRecord(
            record_id=f"retrain:{run_id}",
            experiment="ranker-retrain",
            run_name=run_id,
            tags={"ranker.kind": "retrain", "ranker.version": version},
        ),
        settings,  # type: ignore[arg-type]
    )
    return ref.run_id


def test_gc_deletes_the_mlflow_runs_of_the_run_folders_it_removes(
    running_mlflow: MlflowServer,
    tmp_path: Path,
    make_run: RunFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    old = _registered_run(home, make_run, "old", 40)
    fresh = _registered_run(home, make_run, "fresh", 0.1)
    (home / "ranker.toml").write_text(
        '[retention]\nkeep_runs = 0\nrun_days = 30\n[tracking]\nmodel_name = "ranker-gc"\n'
    )
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", running_mlflow.url)
    settings = tracking_settings(home, TrackingSection(uri=running_mlflow.url, model_name="ranker-gc"))
    old_runs = [
        _trained(settings, old, "old"),
        track(
            TrackingRecord(record_id="train:old", experiment="ranker-train", run_name="old"), settings
        ).run_id,
    ]
    fresh_run = _trained(settings, fresh, "fresh")
    # another workspace on the same server has its own v0001 (versions repeat across registries),
    # and a backtest day carries the version too: neither is the removed folder's training, both kept
    day = track(
        TrackingRecord(
            record_id="backtest:b:day:2026-01-01:naive",
            experiment="ranker-backtest",
            run_name="day",
            tags={"ranker.kind": "day", "ranker.version": old},
        ),
        settings,
    ).run_id
    elsewhere = _trained(settings, old, "another-workspaces-run")

    assert main(["gc", "--home", str(home), "--json"]) == 0
    removed = json.loads(capsys.readouterr().out)["removed"]
    assert [(r["kind"], Path(r["where"]).name) for r in removed if r["kind"] == EXPIRED_RUN] == [
        (EXPIRED_RUN, "old")
    ]
    client = MlflowClient(running_mlflow.url)
    assert [client.get_run(r).info.lifecycle_stage for r in old_runs] == ["deleted", "deleted"]  # type: ignore[arg-type]
    assert client.get_run(fresh_run).info.lifecycle_stage == "active"  # type: ignore[arg-type]
    assert client.get_run(day).info.lifecycle_stage == "active"  # type: ignore[arg-type]
    assert client.get_run(elsewhere).info.lifecycle_stage == "active"  # type: ignore[arg-type]


def test_gc_with_mlflow_down_succeeds_and_queues_the_deletion(
    running_mlflow: MlflowServer,
    tmp_path: Path,
    make_run: RunFactory,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    home = tmp_path / "home"
    (home / "runs").mkdir(parents=True)
    old = _registered_run(home, make_run, "old", 40)
    (home / "ranker.toml").write_text("[retention]\nkeep_runs = 0\nrun_days = 30\n")
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", running_mlflow.url)
    settings = tracking_settings(home, TrackingSection(uri=running_mlflow.url))
    _trained(settings, old, "old")
    running_mlflow.stop()
    assert main(["gc", "--home", str(home)]) == 0
    out = capsys.readouterr().out
    assert "MLflow: " in out and "queued" in out, out
    assert not (home / "runs" / "old").exists()
    assert len(queued_files(settings)) == 1
