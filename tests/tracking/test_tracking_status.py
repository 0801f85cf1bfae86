"""`ranker tracking status`: where the runs go, how to open them, whether the store answers and
what waits in the queue — for the workspace's own store and for a server that is down."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranking.cli.main import main


def test_status_of_the_workspace_store_names_the_ui_command(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("RANKER_MLFLOW_TRACKING_URI", raising=False)
    assert main(["tracking", "status", "--home", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    store = f"sqlite:///{tmp_path.resolve()}/mlflow/mlflow.db"
    assert f"store: {store}" in out
    assert f"ui: .venv-mlflow/bin/mlflow ui --backend-store-uri {store}" in out
    assert "reachable: yes" in out and "queue: 0 item(s)" in out


def test_status_of_a_server_that_is_down_says_so(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    import socket

    with socket.socket() as s:  # a port nothing listens on
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    monkeypatch.setenv("RANKER_MLFLOW_TRACKING_URI", f"http://127.0.0.1:{port}")
    main(["tracking", "status", "--home", str(tmp_path), "--json"])
    status = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert status["reachable"] is False and status["ui_url"] == f"http://127.0.0.1:{port}"
