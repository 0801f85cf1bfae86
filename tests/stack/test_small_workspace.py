"""`make stack` on an empty workspace: the exact commands of the small one and its size (no stack
needed; the stack suite builds its workspace with `up --small-workspace`, which runs the same)."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

from stack_client import stack_module


def test_an_empty_workspace_gets_the_exact_commands_and_the_size() -> None:
    stack = stack_module()
    home, today = Path("/srv/ranker stack/workspace"), dt.date(2026, 12, 4)
    text = stack.small_workspace_text("/repo/.venv/bin/ranker", home, today)
    printed = [
        shlex.split(line) for line in text.splitlines() if line.strip().startswith("/repo/.venv/bin/ranker")
    ]
    assert printed == stack.small_workspace_commands("/repo/.venv/bin/ranker", home, today)
    synth = printed[0]
    assert synth[synth.index("--start") + 1] == "2026-11-24"  # 10 days ending yesterday
    assert synth[synth.index("--home") + 1] == str(home)  # a path with a space survives the quoting
    assert "150,000 impressions" in text and "under 1 MB" in text
    assert "make stack STACK_ARGS=--small-workspace" in text
    config_lines = [line.strip() for line in stack.SMALL_PIPELINE_CONFIG.splitlines()]
    assert all(line in [t.strip() for t in text.splitlines()] for line in config_lines)


def test_a_workspace_with_data_is_left_alone(tmp_path: Path) -> None:
    stack = stack_module()
    assert not stack.has_data(tmp_path)
    (tmp_path / "source").mkdir()
    assert not stack.has_data(tmp_path)
    (tmp_path / "source" / "impressions").mkdir()
    assert stack.has_data(tmp_path)
