"""The one entry of ``ranker metrics publish|show``: typed requests, resolved and served."""

from __future__ import annotations

import argparse
import dataclasses
from pathlib import Path

import pytest
from monitoring_fixtures import free_port, values, write_contract_run

from ranking.cli.main import main
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.monitoring import publish as publish_module
from ranking.monitoring.delivery import PUSHGATEWAY_ENV, textfile_path
from ranking.monitoring.publish import PublishRequest, ShowRequest, publish_request, show


def test_the_cli_hands_the_package_one_typed_request(
    ws: Workspace, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PUSHGATEWAY_ENV, raising=False)
    write_contract_run(ws, "d1")
    seen: list[PublishRequest] = []
    real = publish_module.publish_request

    def spy(request: PublishRequest) -> publish_module.PublishResult:
        seen.append(request)
        return real(request)

    monkeypatch.setattr(publish_module, "publish_request", spy)
    target = tmp_path / "out" / "x.prom"
    argv = ["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--status", "success"]
    assert main([*argv, "--job", "nightly", "--push-attempts", "2", "--textfile", str(target), "--json"]) == 0
    assert seen == [
        PublishRequest(
            workspace=ws,
            run_id="d1",
            status="success",
            failed_step=None,
            pushgateway=None,
            job="nightly",
            push_attempts=2,
            textfile=target.resolve(),
        )
    ]
    assert not any(isinstance(v, argparse.Namespace) for v in dataclasses.asdict(seen[0]).values())
    assert target.exists()


def test_publish_request_takes_the_environments_pushgateway_unless_told_none(
    ws: Workspace, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PUSHGATEWAY_ENV, f"http://127.0.0.1:{free_port()}")
    write_contract_run(ws, "d1")
    pushed = publish_request(PublishRequest(workspace=ws, run_id="d1", push_attempts=1))
    assert pushed.push is not None and not pushed.push.ok and pushed.push.attempts == 1
    assert pushed.delivery == "textfile"
    unconfigured = publish_request(PublishRequest(workspace=ws, run_id="d1", pushgateway=""))
    assert unconfigured.push is None and unconfigured.delivery == "textfile"
    # a job is checked even without a Pushgateway to push it to
    with pytest.raises(RankerError, match="invalid job name"):
        publish_request(PublishRequest(workspace=ws, run_id="d1", pushgateway="", job="bad job"))


def test_show_serves_the_last_publish_as_delivered(ws: Workspace, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(PUSHGATEWAY_ENV, raising=False)
    with pytest.raises(RankerError, match="no metrics published yet"):
        show(ShowRequest(workspace=ws))
    write_contract_run(ws, "d1")
    result = publish_request(PublishRequest(workspace=ws, run_id="d1"))
    last = show(ShowRequest(workspace=ws))
    assert last.exposition == textfile_path(ws).read_text()
    assert last.summary.run_id == "d1" and last.summary.delivery == "textfile"
    assert last.summary.series == pytest.approx(values(result))
