"""What the runs log to MLflow, read back with MlflowClient from the workspace's local store
(sqlite under <home>/mlflow): a `ranker run` is one run of ranker-retrain with its config,
per-step curve, gate checks, decision and artifacts; its first base is one run of ranker-pretrain;
a failed run is FAILED with the failing step named; a second day is a second run."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import Any

import pytest

from ranking.cli.main import main


def _client(home: Path) -> Any:
    from mlflow.tracking import MlflowClient

    return MlflowClient(tracking_uri=f"sqlite:///{home.resolve() / 'mlflow' / 'mlflow.db'}")


def _runs(client: Any, experiment: str) -> list[Any]:
    found = client.get_experiment_by_name(experiment)
    return [] if found is None else client.search_runs([found.experiment_id])


def _track(home: Path, run_id: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((home / "pipeline" / run_id / "track.json").read_text())
    return data


def test_a_failed_run_is_a_failed_mlflow_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """An empty workspace: the window step fails; the run is tracked all the same, FAILED, the
    failing step and its error on it, and the step's text says where the run is."""
    home = tmp_path / "home"
    code = main(["run", "--end", "2026-01-21", "--home", str(home), "--run-id", "empty-1", "--json"])
    assert code == 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert [s["step"] for s in summary["steps"]][-2:] == ["metrics", "track"]
    track = _track(home, "empty-1")
    assert track["exit_code"] == 0 and track["queued"] is False
    assert track["record_id"] == "retrain:empty-1" and track["decision"] == "failed"
    assert "local store sqlite:///" in track["message"] and "mlflow ui" in track["message"]
    [run] = _runs(_client(home), "ranker-retrain")
    assert run.info.run_id == track["mlflow_run_id"] and run.info.run_name == "empty-1"
    assert run.info.status == "FAILED"
    tags = run.data.tags
    assert (tags["ranker.decision"], tags["ranker.failed_step"], tags["ranker.run_id"]) == (
        "failed",
        "window",
        "empty-1",
    )
    assert tags["ranker.reason"].startswith("step window failed: ")


@pytest.mark.slow
def test_ranker_run_logs_one_run_per_pipeline_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text('[recipe]\nwarm_start = "champion"\n')
    common = ["--days", "4", "--epochs", "2", "--home", str(home), "--json"]
    day1 = [
        "run",
        "--end",
        "2026-01-06",
        *common,
        "--run-id",
        "day-1",
        "--force-promote",
        "--reason",
        "first",
    ]
    assert main(day1) == 0
    assert main(["run", "--end", "2026-01-07", *common, "--run-id", "day-2", "--min-hit", "0.99"]) == 1
    capsys.readouterr()

    client = _client(home)
    runs = {r.info.run_name: r for r in _runs(client, "ranker-retrain")}
    assert sorted(runs) == ["day-1", "day-2"]
    first, second = runs["day-1"], runs["day-2"]
    assert first.info.run_id == _track(home, "day-1")["mlflow_run_id"]
    assert first.info.status == second.info.status == "FINISHED"

    tags = first.data.tags
    decided = json.loads((home / "pipeline" / "day-1" / "decide.json").read_text())
    assert tags["ranker.decision"] == ("promoted-forced" if decided["force"] else "promoted")
    assert tags["ranker.reason"] == decided["reason"]
    assert (tags["ranker.champion_before"], tags["ranker.champion"]) == ("(none)", tags["ranker.version"])
    assert tags["ranker.window"] == "2026-01-02..2026-01-06"
    assert len(tags["ranker.partitions_sha"]) == 64 and tags["ranker.code_version"]
    assert second.data.tags["ranker.decision"] == "rejected"
    assert (
        second.data.tags["ranker.champion"]
        == second.data.tags["ranker.champion_before"]
        == tags["ranker.version"]
    )
    assert second.data.tags["ranker.failed_checks"]

    params = first.data.params
    assert params["recipe.epochs"] == "2" and params["window.days"] == "4"
    assert params["recipe.warm_start"] == "champion"
    assert params["recipe.warm_start.source"].startswith("file:")
    assert params["recipe.epochs.source"] != "default"

    losses = client.get_metric_history(first.info.run_id, "train_loss")
    epochs = client.get_metric_history(first.info.run_id, "train_loss_epoch")
    assert len(epochs) == 2
    assert len(losses) > len(epochs)  # the per-step curve (training_curve.json), not one point per epoch
    steps = [m.step for m in sorted(losses, key=lambda m: m.step)]
    assert steps == sorted(set(steps)) and steps[0] >= 1
    metrics = second.data.metrics
    gate = json.loads((home / "pipeline" / "day-2" / "gate.json").read_text())
    assert gate["checks"]
    for check in gate["checks"]:
        name = check["name"]
        assert metrics[f"gate.{name}.passed"] == float(check["passed"]), name
        if check["value"] is not None:
            assert metrics[f"gate.{name}.value"] == pytest.approx(check["value"]), name
        if isinstance(check["threshold"], list):
            assert metrics[f"gate.{name}.threshold_low"] == pytest.approx(check["threshold"][0]), name
        elif check["threshold"] is not None:
            assert metrics[f"gate.{name}.threshold"] == pytest.approx(check["threshold"]), name
    assert metrics["gate_passed"] == 0.0 and metrics["wall_seconds"] > 0
    assert 0 <= metrics["lookup_share.joint"] <= 1

    artifacts = {a.path for a in client.list_artifacts(first.info.run_id)}
    assert {
        "effective_config.json",
        "train.json",
        "gate.json",
        "decide.json",
        "report.md",
        "curve.png",
    } <= artifacts
