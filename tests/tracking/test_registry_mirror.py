"""The champion mirrored in MLflow's model registry: `ranker promote` -> `ranker promote` ->
`ranker rollback` (the commands an operator and the rollback DAG run) move the alias ``champion``; a queued alias event replays to
what the project registry says then; gc's deletions; `ranker tracking sync`."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
from mlflow import MlflowClient
from mlflow_server import REPO, MlflowServer
from registry_fixtures import RunFactory, bless

from ranking.cli.main import main
from ranking.config.model import TrackingSection
from ranking.registry import Registry
from ranking.registry.operations import PromoteRequest, promote
from ranking.tracking.outbox import prune, replay, track
from ranking.tracking.queue import queued_files
from ranking.tracking.records import TrackingRecord
from ranking.tracking.registry import CHAMPION_ALIAS, VERSION_TAG
from ranking.tracking.settings import tracking_settings


def _ranker(home: Path, url: str, *argv: str) -> None:
    """A `ranker` command in this process, as the rollback DAG runs it, on the registry at ``url``
    (MLflow: $RANKER_MLFLOW_TRACKING_URI; the workspace's config names the model)."""
    assert main([*argv, "--home", str(home), "--registry", url]) == 0


def _champion(client: MlflowClient, name: str = "ranker") -> str:
    return str(client.get_model_version_by_alias(name, CHAMPION_ALIAS).tags[VERSION_TAG])


def _versions(reg: Registry, make_run: RunFactory, n: int) -> list[str]:
    out = []
    for _ in range(n):
        version = reg.register(make_run())
        bless(reg, version)
        out.append(version)
    return out


def test_the_alias_follows_promote_promote_rollback(
    running_mlflow: MlflowServer, tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tracking_settings(tmp_path, TrackingSection(uri=running_mlflow.url))
    url = str(tmp_path / "registry")
    reg = Registry(url)
    v1, v2 = _versions(reg, make_run, 2)
    # v1's training run was tracked: its model version points at that run
    run_dir = Path(reg.record(v1).source_run_dir).name
    trained = track(
        TrackingRecord(record_id=f"train:{run_dir}", experiment="ranker-train", run_name=run_dir), settings
    )
    client = MlflowClient(running_mlflow.url)
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", running_mlflow.url)
    _ranker(tmp_path, url, "promote", v1, "--reason", "first", "--force")
    assert _champion(client) == v1
    assert client.get_model_version_by_alias("ranker", CHAMPION_ALIAS).run_id == trained.run_id
    _ranker(tmp_path, url, "promote", v2, "--reason", "better", "--force")
    assert _champion(client) == v2
    _ranker(tmp_path, url, "rollback", "--reason", "v2 broke serving")
    assert _champion(client) == v1
    tagged = client.search_model_versions("name = 'ranker'")
    assert sorted(v.tags[VERSION_TAG] for v in tagged) == [v1, v2]  # registered once each
    assert all(v.tags["ranker.source"].endswith(f"/versions/{v.tags[VERSION_TAG]}") for v in tagged)


def test_a_queued_alias_event_replays_to_the_registry_now(
    running_mlflow: MlflowServer, tmp_path: Path, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    settings = tracking_settings(tmp_path, TrackingSection(uri=running_mlflow.url, model_name="ranker-q"))
    url = str(tmp_path / "registry")
    reg = Registry(url)
    v1, v2 = _versions(reg, make_run, 2)
    (tmp_path / "ranker.toml").write_text('[tracking]\nmodel_name = "ranker-q"\n')
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", running_mlflow.url)
    _ranker(tmp_path, url, "promote", v1, "--reason", "first", "--force")
    running_mlflow.stop()
    _ranker(tmp_path, url, "promote", v2, "--reason", "second", "--force")  # queued
    _ranker(tmp_path, url, "rollback", "--reason", "back")  # queued behind it
    assert len(queued_files(settings)) == 2
    running_mlflow.start()
    result = replay(settings)
    assert (len(result.sent), result.left) == (2, 0)
    client = MlflowClient(running_mlflow.url)
    assert _champion(client, "ranker-q") == v1 == reg.champion()


def test_sync_and_gc(running_mlflow: MlflowServer, tmp_path: Path, make_run: RunFactory) -> None:
    settings = tracking_settings(tmp_path, TrackingSection(uri=running_mlflow.url, model_name="ranker-s"))
    url = str(tmp_path / "registry")
    reg = Registry(url)
    v1, v2 = _versions(reg, make_run, 2)
    promote(PromoteRequest(url, v1, "first", force=True))  # not tracked: sync catches up
    promote(PromoteRequest(url, v2, "second", force=True))
    env = {"RANKER_MLFLOW_TRACKING_URI": running_mlflow.url, "PATH": "/usr/bin:/bin"}
    (tmp_path / "ranker.toml").write_text('[tracking]\nmodel_name = "ranker-s"\n')
    sync = [str(REPO / ".venv/bin/ranker"), "tracking", "sync", "--home", str(tmp_path), "--registry", url]
    done = subprocess.run(sync, capture_output=True, text=True, env=env, timeout=120)
    assert done.returncode == 0, done.stderr
    client = MlflowClient(running_mlflow.url)
    assert _champion(client, "ranker-s") == v2
    assert len(client.search_model_versions("name = 'ranker-s'")) == 2
    # gc removed v1 and a training run folder: their MLflow version and run go (soft delete)
    ref = track(
        TrackingRecord(record_id="train:run-gone", experiment="ranker-train", run_name="gone"), settings
    )
    note = prune(["train:run-gone"], [v1], settings)
    assert note == "deleted 1 MLflow run(s), 1 model version(s)"
    assert client.get_run(ref.run_id).info.lifecycle_stage == "deleted"  # type: ignore[arg-type]
    assert [v.tags[VERSION_TAG] for v in client.search_model_versions("name = 'ranker-s'")] == [v2]
    running_mlflow.stop()
    queued = prune(["train:other"], [], settings)
    assert "queued" in queued and len(queued_files(settings)) == 1


def test_a_bad_uri_is_one_line_and_exit_2(tmp_path: Path) -> None:
    for uri in ("ftp://host/x", "http://user:secret@host:5000"):
        done = subprocess.run(
            [str(REPO / ".venv/bin/ranker"), "tracking", "status", "--home", str(tmp_path)],
            capture_output=True,
            text=True,
            env={"RANKER_MLFLOW_TRACKING_URI": uri, "PATH": "/usr/bin:/bin"},
            timeout=120,
        )
        assert done.returncode == 2, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert "tracking.uri" in done.stderr and "secret" not in done.stderr
