"""`[retention]`: `ranker gc` (and the start of every `ranker run`) prunes what a finished retrain
no longer needs, by age; never what the registry does not hold, what a live job holds, or the
window partitions the next runs read (issue 32: the disk filled by design)."""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

import pytest
from filelock import FileLock
from registry_fixtures import RunFactory

from ranking.cli.main import main
from ranking.config.loader import ConfigFileError, load
from ranking.registry import Registry
from ranking.registry.janitor import collect_garbage
from ranking.registry.retention import (
    EXPIRED_BACKTEST,
    EXPIRED_CHECKPOINTS,
    EXPIRED_RUN,
    EXPIRED_WINDOW_DAY,
    REGISTERED_FILE,
    RetentionPolicy,
)

DAY = 86400.0


def _age(path: Path, days: float) -> None:
    then = time.time() - days * DAY
    for sub in [path, *path.rglob("*")] if path.is_dir() else [path]:
        os.utime(sub, (then, then), follow_symlinks=False)


def _finished(run: Path) -> None:
    (run / "model.pt.sha256").write_text("0" * 64 + "  model.pt\n")


def _workspace(home: Path, make_run: RunFactory) -> dict[str, Path]:
    """Runs of every kind, backtests and window days, each as old as its name says."""
    reg = Registry(str(home / "registry"))
    runs = home / "runs"
    runs.mkdir(parents=True)
    made: dict[str, Path] = {}
    for name, registered, finished, age in [
        ("old-registered", True, True, 40),  # past run_days, in the registry: the folder goes
        ("old-unregistered", False, True, 40),  # never registered: only its checkpoints go
        ("recent-finished", True, True, 3),  # checkpoints past checkpoint_days: they go
        ("fresh-finished", True, True, 0.1),  # checkpoints within a day: kept
        ("old-unfinished", False, False, 40),  # no export: its checkpoints are what resumes it
    ]:
        run = make_run()
        run = run.rename(runs / name)
        if finished:
            _finished(run)
        if registered:
            version = reg.register(run, name)
            (run / REGISTERED_FILE).write_text(json.dumps({"version": version}))
        _age(run, age)
        made[name] = run
    for name, age in [("old-suite", 20), ("recent-review", 2)]:
        folder = home / "backtests" / name / "naive" / "days"
        folder.mkdir(parents=True)
        (folder / "2026-01-01.json").write_text("{}")
        replayed = home / "backtests" / name / "naive" / "home" / "runs" / "day-1"  # a replayed day's run
        (replayed / "checkpoints").mkdir(parents=True)
        (replayed / "checkpoints" / "epoch-1.pt").write_bytes(b"c" * 1000)
        _finished(replayed)
        _age(home / "backtests" / name, age)
        _age(replayed / "checkpoints", age + 1)
    for day in ("2025-09-01", "2026-01-01"):
        (home / "source" / "impressions" / f"date={day}").mkdir(parents=True)
        part = home / "windows" / "days" / day / "key"
        part.mkdir(parents=True)
        (part / "examples.parquet").write_bytes(b"x" * 100)
        (home / "windows" / f"{day}_20d").mkdir()
        _age(home / "windows" / "days" / day, 1)
        _age(home / "windows" / f"{day}_20d", 1)
    return made


def test_retention_prunes_each_kind_by_age_and_keeps_the_rest(tmp_path: Path, make_run: RunFactory) -> None:
    home = tmp_path / "home"
    runs = _workspace(home, make_run)
    reg = Registry(str(home / "registry"))
    policy = RetentionPolicy(keep_runs=0)  # no role keeps a folder here (test_roles_keep_... below)
    report = collect_garbage(home, reg, retention=policy)
    removed = {(r["kind"], Path(r["where"]).relative_to(home).as_posix()) for r in report.removed}
    assert removed == {
        (EXPIRED_RUN, "runs/old-registered"),
        # exported but not registered: a re-run resumes from them to register, for run_days
        (EXPIRED_CHECKPOINTS, "runs/old-unregistered/checkpoints"),
        (EXPIRED_CHECKPOINTS, "runs/recent-finished/checkpoints"),
        (EXPIRED_BACKTEST, "backtests/old-suite"),
        # a replayed day's checkpoints go with a daily run's, the replay itself after backtest_days
        (EXPIRED_CHECKPOINTS, "backtests/recent-review/naive/home/runs/day-1/checkpoints"),
        (EXPIRED_WINDOW_DAY, "windows/days/2025-09-01"),
        (EXPIRED_WINDOW_DAY, "windows/2025-09-01_20d"),
    }
    assert not runs["old-registered"].exists() and (runs["old-unregistered"] / "model.pt").is_file()
    assert (runs["fresh-finished"] / "checkpoints").is_dir() and (
        runs["old-unfinished"] / "checkpoints"
    ).is_dir()
    assert (home / "backtests" / "recent-review").is_dir() and (
        home / "windows" / "days" / "2026-01-01"
    ).is_dir()
    # the registry still holds every registered model, and verifies
    for version in reg.version_ids():
        reg.verify(version)
    # a second pass finds nothing more
    assert collect_garbage(home, reg, retention=policy).removed == []


def test_unset_ages_keep_everything_and_a_held_run_is_kept(tmp_path: Path, make_run: RunFactory) -> None:
    home = tmp_path / "home"
    runs = _workspace(home, make_run)
    reg = Registry(str(home / "registry"))
    keep_all = RetentionPolicy(checkpoint_days=None, run_days=None, backtest_days=None, window_days=None)
    assert collect_garbage(home, reg, retention=keep_all).removed == []
    with FileLock(home / "runs" / ".recent-finished.train.lock"):  # a job trains into it
        report = collect_garbage(home, reg, retention=RetentionPolicy(), dry_run=True)
    kept = {Path(r["where"]).name: r["why"] for r in report.kept}
    assert kept["checkpoints"] == "held by a live process"
    assert (runs["recent-finished"] / "checkpoints").is_dir()  # and a dry run removes nothing
    assert runs["old-registered"].is_dir()


def test_ranker_gc_prunes_by_the_config_and_leftovers_only_does_not(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    runs = _workspace(home, make_run)
    assert main(["gc", "--home", str(home), "--leftovers-only", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["removed"] == [] and runs["old-registered"].is_dir()
    (home / "ranker.toml").write_text("[retention]\nrun_days = 100\nbacktest_days = 100\n")
    assert main(["gc", "--home", str(home), "--json"]) == 0
    kinds = sorted(r["kind"] for r in json.loads(capsys.readouterr().out)["removed"])
    # runs and backtests: 100 days, and so the checkpoints of old-unregistered (not registered)
    assert kinds == [EXPIRED_CHECKPOINTS] * 4 + [EXPIRED_WINDOW_DAY] * 2
    assert runs["old-registered"].is_dir() and not (runs["old-registered"] / "checkpoints").exists()
    assert (runs["old-unregistered"] / "checkpoints").is_dir()


def test_window_days_are_kept_as_far_back_as_the_runs_read_plus_the_extra(tmp_path: Path) -> None:
    from ranking.config.requests import retention_policy

    config = load(tmp_path).config  # window 20, base 20, review 14: 54 days read, 30 more kept
    assert retention_policy(config).window_days == 54 + 30
    (tmp_path / "ranker.toml").write_text("[window]\ndays = 60\n[retention]\nwindow_extra_days = 0\n")
    assert retention_policy(load(tmp_path).config).window_days == 60 + 60 + 14
    (tmp_path / "ranker.toml").write_text("[retention]\ncheckpoint_days = -1\n")
    with pytest.raises(ConfigFileError, match=r"retention\.checkpoint_days: must be >= 0"):
        load(tmp_path)


def _registered_runs(home: Path, make_run: RunFactory, count: int, train: dict[int, dict]) -> Registry:
    """Runs r01..r<count> registered as v0001.. (``train[i]``: more training-manifest fields of
    run i), each with its report and checkpoints, 40 days old."""
    reg = Registry(str(home / "registry"))
    (home / "runs").mkdir(parents=True)
    for i in range(1, count + 1):
        run = make_run().rename(home / "runs" / f"r{i:02d}")
        manifest = json.loads((run / "train_manifest.json").read_text())
        (run / "train_manifest.json").write_text(json.dumps({**manifest, **train.get(i, {})}))
        _finished(run)
        (run / "report.md").write_text(f"# run r{i:02d}\n")
        version = reg.register(run, run.name)
        (run / REGISTERED_FILE).write_text(json.dumps({"version": version}))
        _age(run, 40)
    return reg


def test_roles_keep_run_folders_and_their_checkpoints_still_go(tmp_path: Path, make_run: RunFactory) -> None:
    home = tmp_path / "home"
    # v0005 was warm-started from the champion v0002 (beyond the rollbacks kept: kept as its source)
    reg = _registered_runs(home, make_run, 10, {5: {"warm_start": {"source": "champion v0002"}}})
    reg.set_base("v0001", reason="pretrained")
    for version in ("v0002", "v0003", "v0004", "v0005", "v0006"):
        reg.promote(version, reason="test", force=True)
    reg.rollback(reason="v0006 was bad")  # champion v0005; rollbacks in a row: v0004, v0003, v0002
    policy = RetentionPolicy(keep_runs=2, keep_rollbacks=2, keep_paths=(str(home / "runs/r07/model.pt"),))
    report = collect_garbage(home, reg, retention=policy)
    removed = {(r["kind"], Path(r["where"]).relative_to(home).as_posix()) for r in report.removed}
    kept = {Path(r["where"]).name: r["why"] for r in report.kept if r["kind"] == EXPIRED_RUN}
    assert kept == {
        "r01": "kept by [retention]: the base (v0001)",
        "r02": "kept by [retention]: what v0005 was warm-started from (v0002)",
        "r03": "kept by [retention]: the champion's rollback 2 (v0003)",
        "r04": "kept by [retention]: the champion's rollback 1 (v0004)",
        "r05": "kept by [retention]: the champion (v0005)",
        "r07": f"kept by [retention]: the config's warm start {home / 'runs/r07/model.pt'}",
        "r09": "kept by [retention]: one of the newest 2 versions (v0009)",
        "r10": "kept by [retention]: one of the newest 2 versions (v0010)",
    }
    # v0006 was rolled back from, v0008 has no role: their folders go; every kept one's
    # checkpoints go (a rollback and a warm start read the registry's model.pt, never them)
    assert removed == {(EXPIRED_RUN, "runs/r06"), (EXPIRED_RUN, "runs/r08")} | {
        (EXPIRED_CHECKPOINTS, f"runs/{name}/checkpoints") for name in kept
    }
    assert all((home / "runs" / name / "report.md").is_file() for name in kept)
    # a rollback (and another) still works from what is left, and lands on a kept folder
    assert reg.rollback(reason="after gc").to_version == "v0004"
    assert reg.rollback(reason="again").to_version == "v0003"
    assert reg.verify("v0003").run_id == "r03" and (home / "runs/r03/report.md").is_file()


def test_a_damaged_history_prunes_no_run_folder(tmp_path: Path, make_run: RunFactory) -> None:
    home = tmp_path / "home"
    reg = _registered_runs(home, make_run, 3, {})
    for version in ("v0001", "v0002", "v0003"):
        reg.promote(version, reason="test", force=True)
    (home / "registry" / "aliases" / "champion" / "00000002.json").unlink()  # what it protects is unknown
    report = collect_garbage(home, reg, retention=RetentionPolicy(keep_runs=0))
    assert sorted(Path(r["where"]).relative_to(home).as_posix() for r in report.removed) == [
        f"runs/r0{i}/checkpoints" for i in (1, 2, 3)
    ]


def test_an_expired_replay_keeps_its_reports(tmp_path: Path) -> None:
    home = tmp_path / "home"
    replay = home / "backtests" / "suite-1"
    files = {
        "spec.json": "{}",
        "report/backtest.md": "# report",
        "report/backtest.png": "png",
        "naive/recipe.toml": "",
        "naive/days/2026-01-01.json": "{}",
        "naive/home/runs/d1/model.pt": "m" * 5000,
        "naive/suite/report/suite.md": "# suite",
        "naive/suite/candidates/2026-01-01/model.pt": "m" * 5000,
    }
    for name, text in files.items():
        (replay / name).parent.mkdir(parents=True, exist_ok=True)
        (replay / name).write_text(text)
    (home / "reviews" / "2026-01-14").mkdir(parents=True)  # a review's report: never under backtests/
    (home / "reviews" / "2026-01-14" / "review.md").write_text("# review")
    review = home / "backtests" / "review-2026-01-14" / "naive" / "home" / "runs" / "d1"
    review.mkdir(parents=True)
    (review / "model.pt").write_text("m" * 5000)
    for folder in (replay, review.parents[3], home / "reviews"):
        _age(folder, 20)
    report = collect_garbage(home, None, retention=RetentionPolicy())
    removed = sorted(Path(r["where"]).relative_to(home).as_posix() for r in report.removed)
    assert removed == [
        "backtests/review-2026-01-14",  # no report of its own: the whole replay
        "backtests/suite-1/naive/days",
        "backtests/suite-1/naive/home",
        "backtests/suite-1/naive/recipe.toml",
        "backtests/suite-1/naive/suite/candidates",
    ]
    left = sorted(p.relative_to(replay).as_posix() for p in replay.rglob("*") if p.is_file())
    assert left == ["naive/suite/report/suite.md", "report/backtest.md", "report/backtest.png", "spec.json"]
    assert (home / "reviews" / "2026-01-14" / "review.md").is_file()
    assert collect_garbage(home, None, retention=RetentionPolicy()).removed == []


def test_keep_counts_are_bounded_in_the_config(tmp_path: Path) -> None:
    from ranking.config.requests import retention_policy

    (tmp_path / "ranker.toml").write_text(
        '[retention]\nkeep_runs = 2\nkeep_rollbacks = 0\n[recipe]\nwarm_start = "runs/r1"\n'
    )
    policy = retention_policy(load(tmp_path).config)
    assert (policy.keep_runs, policy.keep_rollbacks) == (2, 0)
    assert policy.keep_paths == (str(tmp_path / "runs/r1"),)  # relative to the config file
    for bad in ("keep_runs = -1", "keep_runs = 1001", "keep_rollbacks = 101", "run_days = 1e9"):
        (tmp_path / "ranker.toml").write_text(f"[retention]\n{bad}\n")
        with pytest.raises(ConfigFileError, match=r"retention\."):
            load(tmp_path)


def test_ranker_gc_measures_the_disk_and_a_dry_run_pushes_nothing(
    tmp_path: Path, make_run: RunFactory, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("RANKER_PUSHGATEWAY_URL", raising=False)
    home = tmp_path / "home"
    runs = _workspace(home, make_run)
    prom = home / "metrics" / "gc.prom"
    assert main(["gc", "--home", str(home), "--dry-run", "--json"]) == 0
    dry = json.loads(capsys.readouterr().out)
    assert not prom.exists() and "metrics" not in dry
    assert (runs["recent-finished"] / "checkpoints").is_dir()  # listed, not removed
    assert any(r["where"].endswith("recent-finished/checkpoints") for r in dry["removed"])
    assert main(["gc", "--home", str(home), "--json"]) == 0
    done = json.loads(capsys.readouterr().out)
    assert done["metrics"] == {"delivery": "textfile", "target": str(prom)}
    left = sum(f.stat().st_size for f in (home / "runs").glob("*/checkpoints/**/*") if f.is_file())
    assert done["disk"]["bytes"]["checkpoints"] == left > 0  # the unfinished and the fresh run's
    assert dry["disk"]["bytes"]["checkpoints"] > left
    assert f'ranker_disk_usage_bytes{{kind="checkpoints"}} {float(left)}' in prom.read_text()
    assert f"ranker_gc_freed_bytes {float(done['bytes_freed'])}" in prom.read_text()
