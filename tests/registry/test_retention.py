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
    report = collect_garbage(home, reg, retention=RetentionPolicy())
    removed = {(r["kind"], Path(r["where"]).relative_to(home).as_posix()) for r in report.removed}
    assert removed == {
        (EXPIRED_RUN, "runs/old-registered"),
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
    assert collect_garbage(home, reg, retention=RetentionPolicy()).removed == []


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
    assert kinds == [EXPIRED_CHECKPOINTS] * 5 + [EXPIRED_WINDOW_DAY] * 2  # runs and backtests: 100 days
    assert runs["old-registered"].is_dir() and not (runs["old-registered"] / "checkpoints").exists()


def test_window_days_are_kept_as_far_back_as_the_runs_read_plus_the_extra(tmp_path: Path) -> None:
    from ranking.config.requests import retention_policy

    config = load(tmp_path).config  # window 20, base 20, review 14: 54 days read, 30 more kept
    assert retention_policy(config).window_days == 54 + 30
    (tmp_path / "ranker.toml").write_text("[window]\ndays = 60\n[retention]\nwindow_extra_days = 0\n")
    assert retention_policy(load(tmp_path).config).window_days == 60 + 60 + 14
    (tmp_path / "ranker.toml").write_text("[retention]\ncheckpoint_days = -1\n")
    with pytest.raises(ConfigFileError, match=r"retention\.checkpoint_days: must be >= 0"):
        load(tmp_path)
