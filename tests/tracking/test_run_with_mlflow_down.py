"""MLflow being down never fails a run (issue 35): a `ranker run` against a stopped tracking server
promotes as usual, its `track` step says the record was queued and how to send it, and after the
server is back `ranker tracking replay` delivers the run and the champion alias it would have set."""

from __future__ import annotations

import datetime as dt
import json
import os
import subprocess
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow_server import REPO, MlflowServer

from ranking.cli.main import main

pytestmark = pytest.mark.slow


def test_a_run_with_mlflow_stopped_succeeds_and_its_record_arrives_after_the_replay(
    running_mlflow: MlflowServer,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text(
        '[recipe]\nwarm_start = "champion"\n[tracking]\nmodel_name = "ranker-down"\n'
    )
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", running_mlflow.url)
    running_mlflow.stop()

    argv = ["run", "--end", "2026-01-06", "--days", "4", "--epochs", "1", "--home", str(home)]
    argv += ["--run-id", "down-1", "--force-promote", "--reason", "first", "--json"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["promoted"] is True
    track = json.loads((home / "pipeline" / "down-1" / "track.json").read_text())
    assert track["exit_code"] == 0 and track["queued"] is True and track["mlflow_run_id"] is None
    assert "ranker tracking replay" in track["message"]
    step = next(s for s in summary["steps"] if s["step"] == "track")
    assert step["duration_seconds"] < 60  # one bounded try per call, not MLflow's minutes of retries
    queue = sorted((home / "mlflow" / "queue").glob("*.json"))
    assert len(queue) == 2  # the run, then the champion alias behind it

    running_mlflow.start()
    env = {**os.environ, "RANKER_MLFLOW_TRACKING_URI": running_mlflow.url, "OMP_NUM_THREADS": "1"}
    replay = [str(REPO / ".venv/bin/ranker"), "tracking", "replay", "--home", str(home)]
    done = subprocess.run(replay, capture_output=True, text=True, env=env, timeout=300)
    assert done.returncode == 0, done.stdout + done.stderr
    assert not list((home / "mlflow" / "queue").glob("*.json"))

    client = MlflowClient(running_mlflow.url)
    experiment = client.get_experiment_by_name("ranker-retrain")
    assert experiment is not None
    [run] = client.search_runs([experiment.experiment_id], "tags.`ranker.run_id` = 'down-1'")
    assert run.data.tags["ranker.decision"] in ("promoted", "promoted-forced")
    assert run.data.metrics["gate_passed"] in (0.0, 1.0) and "train_loss" in run.data.metrics
    champion = client.get_model_version_by_alias("ranker-down", "champion")
    assert champion.tags["ranker.version"] == summary["version"]
    assert champion.run_id == run.info.run_id
