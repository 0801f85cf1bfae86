"""infra/demo.sh refuses bad sizes, dates and folders in one line, exit 2, before it removes the
previous demo (it starts by deleting var/demo, var/airflow and var/demo-logs)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest
from dag_test_paths import REPO

BAD = [
    ({"DEMO_DAYS": "41"}, "DEMO_DAYS must be >= 42"),
    ({"DEMO_USERS": "0"}, "sizes must be positive integers, got '0'"),
    ({"DEMO_EPOCHS": "two"}, "sizes must be positive integers, got 'two'"),
    ({"DEMO_START": "2026-13-40"}, "DEMO_START must be a date YYYY-MM-DD, got '2026-13-40'"),
    ({"DEMO_START": "yesterday"}, "DEMO_START must be a date YYYY-MM-DD"),
    ({"DEMO_DIR": "relative/dir"}, "DEMO_DIR must be an absolute path, got 'relative/dir'"),
]


@pytest.mark.parametrize(("settings", "message"), BAD)
def test_bad_input_is_one_line_and_the_previous_demo_stays(
    tmp_path: Path, settings: dict[str, str], message: str
) -> None:
    previous = tmp_path / "demo" / "kept.txt"
    previous.parent.mkdir()
    previous.write_text("the last demo")
    env = {k: v for k, v in os.environ.items() if not k.startswith(("DEMO_", "RANKER_", "AIRFLOW"))}
    env.update({"DEMO_DIR": str(tmp_path), **settings})
    proc = subprocess.run(
        ["bash", str(REPO / "infra" / "demo.sh")],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert proc.returncode == 2, (proc.stdout, proc.stderr)
    assert proc.stderr.splitlines() == [proc.stderr.strip()] and message in proc.stderr, proc.stderr
    assert previous.read_text() == "the last demo"
    assert sorted(p.name for p in tmp_path.iterdir()) == ["demo"]
