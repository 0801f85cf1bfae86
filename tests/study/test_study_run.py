"""`ranker study` end to end: real `ranker train` runs on a tiny workspace, then reused."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest


@pytest.mark.slow
def test_study_end_to_end_on_a_tiny_workspace_then_reused(tmp_path: Path) -> None:
    from features.testing import make_tiny_workspace

    info = make_tiny_workspace(tmp_path / "ws", days=6, requests_per_day=60, window_days=2)
    ranker = [sys.executable, "-m", "ranking.cli"]
    cmd = [
        *ranker, "study", "--home", info["home"], "--end", info["end"], "--windows", "2",
        "--epochs", "1,2", "--schedules", "joint,delayed", "--seeds", "1", "--parallel", "2", "--json",
    ]  # fmt: skip
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout)
    assert summary["runs"] == 1 + 4 and summary["reused"] == 0  # warm base + 2 inits x 2 schedules
    report = json.loads(Path(summary["report"]["json"]).read_text())
    rows = {(r["init"], r["schedule"], r["epochs"]): r for r in report["rows"]}
    assert rows[("scratch", "joint", 1)]["save_hit_at_3"]["rel_pct_mean"] == 0.0  # the baseline itself
    assert rows[("warm", "delayed", 2)]["letters"] == "F,J"
    warm = report["results"]["warm-w2-delayed-s0"]
    assert warm["warm_from"].endswith("base-w2-joint-s0/model.pt")
    assert Path(summary["report"]["plot"]).stat().st_size > 10_000
    # the second run trains nothing and reports the same numbers
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout)
    assert second["reused"] == second["runs"] == 5
    assert json.loads(Path(second["report"]["json"]).read_text())["rows"] == report["rows"]
