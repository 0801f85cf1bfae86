"""`ranker metrics show` in a workspace without metrics says where it looked and what to set."""

from __future__ import annotations

from pathlib import Path

import pytest

from ranking.cli.main import main


def test_no_metrics_names_the_state_file_and_how_the_workspace_was_chosen(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RANKER_HOME", raising=False)
    monkeypatch.chdir(tmp_path)
    assert main(["metrics", "show"]) == 2
    err = capsys.readouterr().err.strip()
    assert len(err.splitlines()) == 1, err
    assert f"looked for {tmp_path / 'var' / 'metrics' / 'state.json'}" in err
    assert "neither --home nor $RANKER_HOME is set" in err
    assert "set --home or $RANKER_HOME" in err and "source var/stack/env.sh" in err

    stack_home = tmp_path / "stack-workspace"
    stack_home.mkdir()
    monkeypatch.setenv("RANKER_HOME", str(stack_home))
    assert main(["metrics", "show"]) == 2
    err = capsys.readouterr().err
    assert f"$RANKER_HOME={stack_home}" in err and str(stack_home / "metrics" / "state.json") in err
