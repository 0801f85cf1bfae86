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
    # the promoted version is mirrored as the model registry's champion, linked to the run that made it
    champion = client.get_model_version_by_alias("ranker", "champion")
    assert champion.tags["ranker.version"] == tags["ranker.version"]
    assert champion.run_id == first.info.run_id
    assert "champion" in _track(home, "day-1")["message"]

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


def _fixtures(test_file: str) -> Any:
    """Another test module's scripted replayer and helpers (loaded by path: the test folders are
    not packages): tests/backtest/test_engine.py's tiny backtest, tests/review/test_review_run.py's."""
    import importlib.util

    path = Path(__file__).resolve().parents[1] / test_file
    spec = importlib.util.spec_from_file_location(f"fixtures_{path.stem}", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _tiny_backtest(tmp_path: Path) -> tuple[Any, Any, dict[str, str]]:
    from ranking.backtest.compare import compare_to_baseline
    from ranking.backtest.report import build_report, write_report

    engine = _fixtures("backtest/test_engine.py")
    bt = engine._backtest(tmp_path, engine.ScriptedReplayer(rejects={("default", engine.START)}), days=3)
    records = bt.run()
    report = build_report(bt.spec, records, compare_to_baseline(bt, records), 1.0)
    return bt, report, write_report(report, bt.folder / "report")


def test_a_backtest_is_a_parent_run_with_a_child_per_recipe_and_day(tmp_path: Path) -> None:
    from ranking.backtest.tracking import track_backtest

    bt, report, paths = _tiny_backtest(tmp_path)
    # the recipe homes track nothing of their own: their days are the backtest's children
    assert "[tracking]\nenabled = false" in (bt.folder / "default" / "home" / "ranker.toml").read_text()
    ref = track_backtest(bt.ws, None, report, bt.spec.id, paths, started=1e9, code_version="code-1")
    assert ref is not None and not ref.queued and ref.run_id
    client = _client(bt.ws.root)
    runs = _runs(client, "ranker-backtest")
    [parent] = [r for r in runs if r.info.run_id == ref.run_id]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(runs) == 1 + 2 * 3 and len(children) == 2 * 3
    assert parent.data.tags["ranker.record_id"] == f"backtest:{bt.spec.id}"
    assert parent.data.tags["ranker.window"] == "2026-03-01..2026-03-03"
    assert parent.data.params["baseline"] == "naive" and parent.data.params["days"] == "3"
    c = report.vs_baseline["default"]
    assert c is not None
    lift = parent.data.metrics["default.vs_baseline.save_hit_at_3"]
    assert lift == pytest.approx(c.relative_change["save_hit_at_3"])
    assert parent.data.metrics["default.vs_baseline.save_hit_at_3.ci_low"] == pytest.approx(
        c.ci["save_hit_at_3"][0]
    )  # type: ignore[index]
    series = client.get_metric_history(parent.info.run_id, "candidate_save_hit_at_3.default")
    assert [m.step for m in sorted(series, key=lambda m: m.step)] == [0, 1, 2]
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} == {
        "backtest.md",
        "backtest.png",
        "backtest.json",
    }
    by_id = {r.data.tags["ranker.record_id"]: r for r in children}
    first = by_id[f"backtest:{bt.spec.id}:day:2026-03-01:default"]
    assert first.data.tags["ranker.decision"] == "reject" and first.data.tags["ranker.recipe"] == "default"
    assert first.data.metrics["promoted"] == 0.0
    day = report.days["default"][1]
    second = by_id[f"backtest:{bt.spec.id}:day:2026-03-02:default"]
    assert second.data.metrics["candidate_save_hit_at_3"] == pytest.approx(
        day.metric("candidate", "save_hit_at_3")
    )
    assert second.data.tags["ranker.champion"] == (day.champion_after or "(none)")
    # the same backtest tracked again (a rerun): the same runs, updated, none added
    again = track_backtest(bt.ws, None, report, bt.spec.id, paths, started=1e9)
    assert again is not None and again.run_id == ref.run_id
    assert len(_runs(client, "ranker-backtest")) == 7


def test_a_backtest_with_mlflow_down_is_queued_parent_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A server nobody listens on: the parent is queued once it fails, its days are queued
    behind it at once (not one timeout each), and nothing raises."""
    import time

    from ranking.backtest import tracking as hooks
    from ranking.config.model import TrackingSection
    from ranking.tracking.queue import queued_files, read_entry
    from ranking.tracking.settings import tracking_settings

    bt, report, paths = _tiny_backtest(tmp_path)
    settings = tracking_settings(bt.ws.root, TrackingSection(uri="http://127.0.0.1:9", timeout_seconds=1))
    monkeypatch.setattr(hooks, "settings_for", lambda home, effective: settings)
    began = time.monotonic()
    ref = hooks.track_backtest(bt.ws, None, report, bt.spec.id, paths, started=1e9)
    assert time.monotonic() - began < 30
    assert ref is not None and ref.queued and "ranker tracking replay" in ref.message
    files = sorted(queued_files(settings), key=lambda f: f.seq)
    ids = [read_entry(f.path).item.record.record_id for f in files]  # type: ignore[union-attr]
    assert ids[0] == f"backtest:{bt.spec.id}" and len(ids) == 1 + 2 * 3
    assert all(i.startswith(f"backtest:{bt.spec.id}:day:") for i in ids[1:])


def test_a_review_is_a_parent_run_with_its_recipes_days_as_children(tmp_path: Path) -> None:
    """ranker review's run_review (the ranker_recipe_review DAG runs the same): one ranker-review
    run with the verdict and each recipe's lift, a child per recipe and day."""
    review_run = _fixtures("review/test_review_run.py")
    home = tmp_path / "home"
    replayer = review_run.Replayer({"naive": 1.5, "default": 0.2}, review_run.SECONDS)
    review = review_run._review(home, replayer, run_id="review__scheduled__2026-01-12")
    assert review["status"] == "ok" and review["recommended"] == "default"
    client = _client(home)
    runs = _runs(client, "ranker-review")
    [parent] = [r for r in runs if r.data.tags["ranker.kind"] == "review"]
    children = [r for r in runs if r.data.tags.get("mlflow.parentRunId") == parent.info.run_id]
    assert len(children) == 2 * 6 and len(runs) == 1 + 2 * 6
    tags = parent.data.tags
    assert tags["ranker.record_id"] == f"review:{review['review_id']}"
    assert tags["ranker.run_id"] == "review__scheduled__2026-01-12"  # the DAG's task links by it
    assert (tags["ranker.decision"], tags["ranker.recipe"]) == ("ok", "default")
    assert tags["ranker.switch"] == "switched to default"
    served = review["recipes"]["default"]["served"]
    assert parent.data.metrics["default.served.lift"] == pytest.approx(served["lift"])
    assert parent.data.metrics["default.served.ci_low"] == pytest.approx(served["ci"][0])
    assert {a.path for a in client.list_artifacts(parent.info.run_id)} >= {"review.md", "review.json"}
    assert not _runs(client, "ranker-backtest")  # the review's replay is not a backtest of its own


@pytest.mark.slow
def test_pretrain_and_a_train_of_its_own_are_runs_of_their_own_experiments(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=13, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text('[window]\ndays = 4\n[recipe]\nwarm_start = "base"\n')
    common = ["--home", str(home), "--json"]
    assert main(["pretrain", "--end", "2026-01-10", "--days", "3", "--run-id", "base-1", *common]) == 0
    base = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert main(["features", "window", "--end", "2026-01-10", *common]) == 0
    assert main(["train", "--end", "2026-01-10", "--epochs", "2", "--run-id", "solo", *common]) == 0
    trained = json.loads(capsys.readouterr().out.strip().splitlines()[-1])

    client = _client(home)
    [pretrain] = _runs(client, "ranker-pretrain")
    assert pretrain.info.run_name == "base-1" and pretrain.data.tags["ranker.record_id"] == "pretrain:base-1"
    assert pretrain.data.tags["ranker.version"] == base["version"]
    assert pretrain.data.tags["ranker.decision"] == "base-moved"
    assert pretrain.data.tags["ranker.base_range"] == "2026-01-03..2026-01-06"
    [solo] = _runs(client, "ranker-train")
    assert solo.data.tags["ranker.record_id"] == "train:solo"
    assert solo.data.tags["ranker.version"] == trained["version"]
    assert solo.data.tags["ranker.base"] == base["version"]  # warm-started from the base just made
    assert solo.data.params["recipe.warm_start"] == "base"
    assert len(client.get_metric_history(solo.info.run_id, "train_loss")) > 2
    assert "effective_config.json" in {a.path for a in client.list_artifacts(solo.info.run_id)}
    assert not _runs(client, "ranker-retrain")  # neither is a pipeline run
