"""`ranker backtest` on bad input and failed days (issue 25.10): days beyond the workspace's data
are refused in one line before anything is written (was: no bound, an ETA of 49 days and 687 MB
written for --days 100000); a backtest whose replayed days failed exits 2 naming them (was 0),
with the report still written for the days that ran."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from ranking.cli.main import main
from ranking.core.atomic import atomic_write_json
from ranking.core.workspace import Workspace

FIRST = dt.date(2026, 1, 1)
DATA_DAYS = 6


@pytest.fixture
def home(tmp_path: Path) -> Path:
    """Impressions for 6 days (folders are what the day check reads), 2-day windows."""
    home = tmp_path / "home"
    for i in range(DATA_DAYS):
        (home / "source" / "impressions" / f"date={FIRST + dt.timedelta(days=i)}").mkdir(parents=True)
    (home / "ranker.toml").write_text("[window]\ndays = 2\n")
    return home


@pytest.fixture
def recipe(tmp_path: Path) -> Path:
    path = tmp_path / "plain.toml"
    path.write_text('[recipe]\nepochs = 1\nwarm_start = "none"\n')
    return path


def _backtest(home: Path, recipe: Path, start: dt.date, days: int) -> int:
    return main(["backtest", "--home", str(home), "--start", start.isoformat(), "--days", str(days),
                 "--recipe", f"plain={recipe}", "--bootstrap-samples", "50", "--json"])  # fmt: skip


def _one_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.strip() and " INFO " not in line]
    assert len(lines) == 1 and "Traceback" not in err, err
    return lines[0]


@pytest.mark.parametrize(
    ("start", "days", "says"),
    [
        (FIRST + dt.timedelta(days=2), 100_000, "--days 100000 is more than the 6 days of data"),
        (FIRST + dt.timedelta(days=1), 2, "need data from 2025-12-31"),  # no room for the window
        (FIRST + dt.timedelta(days=5), 2, "the workspace has 2026-01-01 .. 2026-01-06"),  # past the data
    ],
)
def test_days_the_data_cannot_serve_are_one_line_and_write_nothing(
    start: dt.date, days: int, says: str, home: Path, recipe: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _backtest(home, recipe, start, days) == 2
    captured = capsys.readouterr()
    assert says in _one_line(captured.err)
    assert json.loads(captured.out)["exit_code"] == 2
    assert not (home / "backtests").exists()


class FailingDays:
    """`ranker run` per day as the engine calls it: the first day's gate rejects (exit 1, a decision),
    every later day fails (exit 2)."""

    def run_day(self, home: Path, day: dt.date, run_id: str, log_path: Path) -> tuple[int, dict[str, Any]]:
        if day == FIRST + dt.timedelta(days=2):
            return 1, {"decision": "reject"}
        return 2, {"error": "step train failed: injected"}

    def run_pretrain(self, *args: object) -> tuple[int, dict[str, Any]]:
        raise AssertionError("the recipe does not use a base model")

    def score(self, checkpoint: Path, eval_parquet: Path) -> Any:
        raise AssertionError("no champion, nothing served")


def _fake_window_builder(settings: object) -> Any:
    def build(ws: Workspace, day: dt.date, days: int, checks: Any) -> Mapping[str, Any]:
        manifest = {"window_id": f"w-{day}-{days}", "eval": {"path": "unused"}}
        atomic_write_json(ws.window_manifest(day, days), manifest)
        return manifest

    return build


def test_a_backtest_whose_days_failed_exits_2_naming_them(
    home: Path, recipe: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import ranking.backtest.engine as engine
    import ranking.backtest.replay as replay

    monkeypatch.setattr(replay, "CliReplayer", FailingDays)
    monkeypatch.setattr(engine, "window_builder_for", _fake_window_builder)
    assert _backtest(home, recipe, FIRST + dt.timedelta(days=2), 3) == 2
    captured = capsys.readouterr()
    errors = [line for line in captured.err.splitlines() if line.startswith("ranker backtest: error: ")]
    assert errors == [line for line in captured.err.splitlines() if "error" in line], captured.err
    assert len(errors) == 1 and "Traceback" not in captured.err
    assert errors[0].startswith(
        "ranker backtest: error: 2 replayed day(s) failed (plain: 2026-01-04, 2026-01-05)"
    )
    summary = json.loads(captured.out)
    assert summary["exit_code"] == 2 and summary["failed_days"] == {"plain": ["2026-01-04", "2026-01-05"]}
    assert Path(summary["report"]["markdown"]).is_file()  # the days that ran are still reported


def test_an_empty_inject_is_one_line_not_a_plain_backtest(
    home: Path, recipe: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["backtest", "--home", str(home), "--start", (FIRST + dt.timedelta(days=2)).isoformat(), "--days", "3",
            "--recipe", f"plain={recipe}", "--inject", "", "--json"]  # fmt: skip
    assert main(argv) == 2
    assert "--inject needs at least one KIND@DAY" in _one_line(capsys.readouterr().err)
    assert not list((home / "backtests").glob("*/plain/days/*.json"))  # nothing replayed


def test_a_day_whose_process_cannot_start_fails_that_day_in_one_line(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A fork that fails for want of threads (another job exhausted them, issue 32) is retried,
    then that day fails with one line instead of the whole replay with a traceback."""
    import errno
    import subprocess

    from ranking.backtest import replay

    monkeypatch.setattr(replay, "_START_BACKOFF_SECONDS", 0.0)
    calls = []

    def fork_fails(*args: object, **kwargs: object) -> object:
        calls.append(1)
        if len(calls) <= 2:
            raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")
        return subprocess.CompletedProcess(args, 0, stdout='{"version": "v0001"}\n')

    monkeypatch.setattr(replay.subprocess, "run", fork_fails)
    replayer = replay.CliReplayer()
    code, summary = replayer.run_day(tmp_path, dt.date(2026, 1, 5), "r1", tmp_path / "log")
    assert (code, summary, len(calls)) == (0, {"version": "v0001"}, 3)  # retried, then it started

    def never(*args: object, **kwargs: object) -> object:
        raise BlockingIOError(errno.EAGAIN, "Resource temporarily unavailable")

    monkeypatch.setattr(replay.subprocess, "run", never)
    code, summary = replayer.run_day(tmp_path, dt.date(2026, 1, 5), "r2", tmp_path / "log")
    assert code == 2 and "could not start the day's `ranker run`" in summary["error"]
