"""`make stack` on an empty workspace: the exact commands of the small one and its size (no stack
needed; the stack suite builds its workspace with `up --small-workspace`, which runs the same)."""

from __future__ import annotations

import datetime as dt
import shlex
from pathlib import Path

import pytest
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


FAKE_RANKER = """#!/bin/bash
# writes part of a workspace, like a synth that dies half-way; `features apply` fails when FAIL_APPLY is set
home=""; args="$*"
while [ $# -gt 0 ]; do [ "$1" = --home ] && home="$2"; shift; done
if [[ "$args" == "data synth"* ]]; then
  mkdir -p "$home/source/impressions" && echo rows > "$home/source/impressions/day.parquet"
  [ -n "$FAIL_SYNTH" ] && exit 1
else
  mkdir -p "$home/feast" && echo registry > "$home/feast/registry.db"
  [ -n "$FAIL_APPLY" ] && exit 1
fi
exit 0
"""


@pytest.mark.parametrize("failing", ["FAIL_SYNTH", "FAIL_APPLY"])
@pytest.mark.parametrize("source_existed", [False, True])
def test_a_failed_build_leaves_no_half_built_workspace(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, failing: str, source_existed: bool
) -> None:
    stack = stack_module()
    ranker_bin = tmp_path / "ranker"
    ranker_bin.write_text(FAKE_RANKER)
    ranker_bin.chmod(0o755)
    home = tmp_path / "workspace"
    home.mkdir()
    (home / "notes.txt").write_text("the user's")  # what was there stays
    if source_existed:
        (home / "source").mkdir()  # empty: has_data is False
    monkeypatch.setenv(failing, "1")
    with pytest.raises(stack.StackError, match="failed \\(exit 1\\)"):
        stack.build_small_workspace(str(ranker_bin), home, dt.date(2026, 12, 4), tmp_path / "logs" / "ws.log")
    assert not stack.has_data(home)  # a later `up` offers the build again
    expected = {"notes.txt", "source"} if source_existed else {"notes.txt"}
    assert {p.name for p in home.iterdir()} == expected
    assert (home / "notes.txt").read_text() == "the user's"


def test_a_build_that_succeeds_writes_the_pipeline_config(tmp_path: Path) -> None:
    stack = stack_module()
    ranker_bin = tmp_path / "ranker"
    ranker_bin.write_text(FAKE_RANKER)
    ranker_bin.chmod(0o755)
    home = tmp_path / "workspace"
    home.mkdir()
    stack.build_small_workspace(str(ranker_bin), home, dt.date(2026, 12, 4), tmp_path / "ws.log")
    assert stack.has_data(home)
    assert (home / "ranker.toml").read_text() == stack.SMALL_PIPELINE_CONFIG


@pytest.mark.parametrize("has_data", [False, True])
def test_small_workspace_on_a_running_stack_builds_or_says_why_not(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str], has_data: bool
) -> None:
    """Issue 35: `make stack STACK_ARGS=--small-workspace` on a running stack used to stop at
    "already running" with the workspace left empty. The DAG runs read the workspace, not the
    servers, so an empty one is built there and then; one with data is left, and says so."""
    stack_py = stack_module()
    home = tmp_path / "workspace"
    if has_data:
        (home / "source" / "impressions").mkdir(parents=True)
    stack = stack_py.Stack(tmp_path / "stack")
    stack.state = {"config": {"ranker_home": str(home)}, "pids": {"scheduler": 1}}
    monkeypatch.setattr(stack, "running", lambda: {"scheduler": True})
    monkeypatch.setattr(stack, "health", lambda: {"scheduler": "healthy"})
    monkeypatch.setattr(stack, "print_access", lambda: None)
    built: list[tuple[Path, bool]] = []
    monkeypatch.setattr(stack, "prepare_workspace", lambda h, build: built.append((h, build)))
    stack.up({"small_workspace": True})
    out = capsys.readouterr().out
    assert "already running" in out
    if has_data:
        assert built == [] and "already holds data" in out
    else:
        assert built == [(home, True)]
    # without the flag an empty workspace gets the commands (prepare_workspace with build=False)
    built.clear()
    stack.up({})
    assert built == ([] if has_data else [(home, False)])
