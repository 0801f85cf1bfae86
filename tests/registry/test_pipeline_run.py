"""`ranker run`: plan validation, failure recording; the two-day end-to-end run (slow)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli import main
from ranking.errors import RankerError
from ranking.pipeline_run import RunPlan, StepRunner


def test_force_promote_needs_a_reason_and_excludes_dry_run() -> None:
    with pytest.raises(RankerError, match="--force-promote needs --reason"):
        RunPlan(end=dt.date(2026, 1, 21), force_promote=True)
    with pytest.raises(RankerError, match="contradict"):
        RunPlan(end=dt.date(2026, 1, 21), force_promote=True, reason="x", dry_run=True)


def test_step_runner_knows_which_commands_exist(tmp_path: Path) -> None:
    runner = StepRunner(str(tmp_path), "r1")
    assert runner.has_command("gate") and runner.has_command("models", "list")
    assert not runner.has_command("models", "nope") and not runner.has_command("nope")


def test_a_failing_step_stops_the_run_and_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty workspace: the window step fails (no source data / no command), nothing trains."""
    home = tmp_path / "home"
    code = main(["run", "--end", "2026-01-21", "--home", str(home), "--run-id", "empty-1", "--json"])
    assert code == 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["step"] == "run" and summary["exit_code"] == 2
    assert "window" in summary["failed_step"] and "window" in summary["error"]
    assert summary["version"] is None and summary["promoted"] is False and summary["champion"] is None
    assert "train" not in [s["step"] for s in summary["steps"]]
    recorded = json.loads((home / "pipeline" / "empty-1" / "run.json").read_text())
    assert recorded["error"] == summary["error"]
    assert not (home / "registry" / "versions").exists()
