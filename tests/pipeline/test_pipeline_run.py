"""`ranker run`: plan validation, failure recording; the two-day end-to-end run (slow)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.core.errors import RankerError
from ranking.pipeline.run import RunPlan


def test_force_promote_needs_a_reason_and_excludes_dry_run() -> None:
    with pytest.raises(RankerError, match="--force-promote needs --reason"):
        RunPlan(end=dt.date(2026, 1, 21), force_promote=True)
    with pytest.raises(RankerError, match="contradict"):
        RunPlan(end=dt.date(2026, 1, 21), force_promote=True, reason="x", dry_run=True)


def test_a_failing_step_stops_the_run_and_is_recorded(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An empty workspace: the window step fails (no source data / no command), nothing trains."""
    home = tmp_path / "home"
    code = main(["run", "--end", "2026-01-21", "--home", str(home), "--run-id", "empty-1", "--json"])
    assert code == 2
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert summary["step"] == "run" and summary["exit_code"] == 2
    assert "window" in summary["failed_step"] and "window" in summary["error"]
    # and the one error line on stderr every command's failure gets (issue 32)
    errors = [line for line in captured.err.splitlines() if line.startswith("ranker run: error:")]
    assert errors == [f"ranker run: error: {summary['error']}"]
    assert summary["version"] is None and summary["promoted"] is False and summary["champion"] is None
    assert "train" not in [s["step"] for s in summary["steps"]]
    recorded = json.loads((home / "pipeline" / "empty-1" / "run.json").read_text())
    assert recorded["error"] == summary["error"]
    assert not (home / "registry" / "versions").exists()


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(list(argv))
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_two_consecutive_days_then_rollback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """A fresh tiny workspace retrains on two consecutive days; the second has a champion to beat.

    Day 1 is the bootstrap: the from-scratch model of a few steps is not calibrated yet, so it is
    promoted with --force-promote and a reason. Day 2 warm-starts from it and is gated against it on
    day 2's eval day with loosened thresholds (the tiny data makes the metrics noise; the decision
    logic itself is tested on constructed score sets in tests/gate/test_gate_checks.py).
    """
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, build=False)
    feast_repo.apply(Workspace.resolve(home))
    # the champion warm start this test is about (the default recipe starts from the base model)
    (home / "ranker.toml").write_text('[recipe]\nwarm_start = "champion"\nepochs = 3\n')
    common = ["--days", "4", "--epochs", "2", "--home", str(home), "--json"]

    code, day1 = _run(
        capsys,
        "run",
        "--end",
        "2026-01-06",
        *common,
        "--run-id",
        "day-1",
        "--force-promote",
        "--reason",
        "bootstrap",
    )
    assert code == 0, day1
    assert (day1["version"], day1["promoted"], day1["champion"]) == ("v0001", True, "v0001")
    assert day1["forced"] == (day1["decision"] == "reject")
    steps = [s["step"] for s in day1["steps"]]
    assert steps[:6] == ["window", "validate", "train", "gate", "decide", "promote"]
    for step in ("window", "train", "gate", "promote", "run"):
        assert (home / "pipeline" / "day-1" / f"{step}.json").is_file(), step
    gate1 = json.loads((home / "pipeline" / "day-1" / "gate.json").read_text())
    assert gate1["champion"] is None and gate1["relative_change"] is None  # first run: absolute checks

    loose = [
        "--tolerance",
        "0.99",
        "--anchor-tolerance",
        "0.99",
        "--reference-tolerance",
        "0.99",
        "--trend-tolerance",
        "0.99",
        "--max-auc-drop",
        "1",
        "--max-ne-rise",
        "100",
        "--calibration-high",
        "100",
    ]
    code, day2 = _run(
        capsys,
        "run",
        "--end",
        "2026-01-07",
        *common,
        "--run-id",
        "day-2",
        *loose,
        "--min-lift-over-random",
        "0",
    )
    assert code == 0, day2
    assert (day2["version"], day2["decision"], day2["promoted"], day2["forced"]) == (
        "v0002",
        "pass",
        True,
        False,
    )
    train2 = json.loads((home / "pipeline" / "day-2" / "train.json").read_text())
    assert "champion" in str(train2["warm_start"]["source"]) and train2["warm_start"]["path"]
    gate2 = json.loads((home / "pipeline" / "day-2" / "gate.json").read_text())
    assert gate2["champion"]["version"] == "v0001" and gate2["eval_date"] == "2026-01-07"
    assert next(c for c in gate2["checks"] if c["name"] == "fair_comparison")["passed"]
    assert gate2["relative_change"] is not None and len(gate2["ci"]) == 2

    code, listing = _run(capsys, "models", "list", "--home", str(home), "--json")
    assert listing["champion"] == "v0002"
    statuses = {v["version"]: v["status"] for v in listing["versions"]}
    # v0001 was the champion until v0002 was promoted over it, whatever its own gate said
    assert statuses == {"v0001": "former-champion", "v0002": "champion"}
    assert [(e["from"], e["to"], e["run_id"]) for e in listing["history"]] == [
        (None, "v0001", "day-1"),
        ("v0001", "v0002", "day-2"),
    ]

    # rerunning the day: a new candidate that passes, but one promotion per window end (as the DAG)
    code, again = _run(capsys, "run", "--end", "2026-01-07", *common, "--run-id", "day-2-again", *loose)
    assert code == 0 and (again["version"], again["decision"], again["kept_champion"]) == (
        "v0003",
        "pass",
        True,
    )
    assert again["promoted"] is False and again["champion"] == "v0002"
    assert "promote" not in [s["step"] for s in again["steps"]]

    # rerunning it with an unreachable floor: another candidate, rejected and recorded
    code, rerun = _run(
        capsys, "run", "--end", "2026-01-07", *common, "--run-id", "day-2-rerun", "--min-hit", "0.99"
    )
    assert code == 1 and (rerun["version"], rerun["decision"], rerun["promoted"]) == (
        "v0004",
        "reject",
        False,
    )
    assert "save_hit_at_3_floor" in rerun["failed_checks"] and rerun["champion"] == "v0002"
    reject = json.loads((home / "pipeline" / "day-2-rerun" / "reject.json").read_text())
    assert reject["version"] == "v0004" and "save_hit_at_3_floor" in reject["failed_checks"]

    code, rollback = _run(
        capsys, "rollback", "--reason", "saves dropped online", "--home", str(home), "--json"
    )
    assert code == 0 and (rollback["version"], rollback["previous"]) == ("v0001", "v0002")
    code, listing = _run(capsys, "models", "list", "--home", str(home), "--json")
    assert listing["champion"] == "v0001"
    assert [e["action"] for e in listing["history"]] == ["promote", "promote", "rollback"]
    statuses = {v["version"]: v["status"] for v in listing["versions"]}
    # v0003 passed against v0002, not the champion now (issue 14); the rollback left v0002
    assert (statuses["v0002"], statuses["v0003"], statuses["v0004"]) == (
        "rolled-back-from",
        "needs-regate",
        "rejected-by-gate",
    )

    # gating on another day scores the candidate there; v0002 was trained on 2026-01-06: unfair
    code, unfair = _run(
        capsys, "gate", "--candidate", "v0002", "--end", "2026-01-06", "--home", str(home), "--json"
    )
    assert code == 1 and "fair_comparison" in unfair["failed_checks"]
    fairness = next(c for c in unfair["checks"] if c["name"] == "fair_comparison")
    assert "candidate was trained on the eval day 2026-01-06" in fairness["detail"]
    assert unfair["candidate"]["rows"] == unfair["champion"]["rows"] > 0


@pytest.mark.slow
def test_remote_registry_and_dry_run(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """The registry on another filesystem (fsspec memory://, as s3:// in production): the trainer
    registers there, warm-starts from a champion downloaded into the local cache, and the gate
    scores that copy; a dry run gates but never moves the champion."""
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace
    from ranking.registry import Registry

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=5, build=False)
    feast_repo.apply(Workspace.resolve(home))
    # the champion warm start this test is about (the default recipe starts from the base model)
    (home / "ranker.toml").write_text('[recipe]\nwarm_start = "champion"\n')
    url = f"memory://ranker-registry-{tmp_path.name}"
    common = ["--days", "3", "--epochs", "1", "--home", str(home), "--registry", url, "--json"]

    code, day1 = _run(
        capsys, "run", "--end", "2026-01-04", *common, "--force-promote", "--reason", "bootstrap"
    )
    assert code == 0 and day1["champion"] == "v0001"
    code, day2 = _run(capsys, "run", "--end", "2026-01-05", *common, "--run-id", "dry", "--dry-run")
    assert code == day2["exit_code"] and code in (0, 1)
    assert day2["version"] == "v0002" and day2["promoted"] is False and day2["champion"] == "v0001"
    assert [s["step"] for s in day2["steps"]][:4] == ["window", "validate", "train", "gate"]
    assert not {"promote", "reject"} & {s["step"] for s in day2["steps"]}

    train = json.loads((home / "pipeline" / "dry" / "train.json").read_text())
    cached = home / "cache" / "registry" / "v0001" / "model.pt"
    assert train["warm_start"]["path"] == str(cached) and cached.is_file()
    gate = json.loads((home / "pipeline" / "dry" / "gate.json").read_text())
    assert gate["champion"]["version"] == "v0001"
    assert not (home / "registry").exists()  # nothing went to the workspace's default registry
    assert Registry(url).version_ids() == ["v0001", "v0002"] and len(Registry(url).history()) == 1
