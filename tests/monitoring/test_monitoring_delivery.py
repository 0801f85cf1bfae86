"""Delivery: Pushgateway URLs, retries with backoff, fallback to the textfile, the textfile target."""

from __future__ import annotations

import http.server
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import ClassVar

import pytest
from monitoring_fixtures import DAY, NOW, free_port, publish, write_contract_run

from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.monitoring.delivery import PushConfig, push_with_retries, textfile_path, validate_pushgateway_url
from ranking.monitoring.exposition import parse_exposition
from ranking.monitoring.publish import publish as publish_run
from ranking.monitoring.samples import Sample
from ranking.monitoring.state import state_path


@pytest.mark.parametrize(
    "url",
    [
        "ftp://pg:9091",
        "pushgateway:9091",
        "http://",
        "http://u:p@pg:9091",
        "http://pg:9091/?x=1",
        "http://pg:99999",
        "http://pg:9091/a b",
    ],
)
def test_bad_pushgateway_urls_are_rejected(url: str) -> None:
    with pytest.raises(RankerError, match="invalid Pushgateway URL"):
        validate_pushgateway_url(url)


def test_unreachable_pushgateway_falls_back_to_textfile_and_counts(ws: Workspace) -> None:
    write_contract_run(ws, "d1")
    waits: list[float] = []
    config = PushConfig(
        url=f"http://127.0.0.1:{free_port()}", attempts=3, backoff_seconds=0.5, timeout_seconds=2
    )
    result = publish_run(ws, "d1", now=NOW, push=config, sleep=waits.append)
    assert result.delivery == "textfile"
    assert result.push is not None and not result.push.ok and result.push.attempts == 3
    assert "Connection refused" in (result.push.error or "")
    assert waits == [0.5, 1.0]  # exponential backoff between the 3 attempts
    on_disk = parse_exposition(textfile_path(ws).read_text())
    assert on_disk["ranker_metrics_push_failures_total"] == 1
    # the count persists: the next publish carries it too
    write_contract_run(ws, "d2")
    assert publish(ws, "d2", now=NOW + DAY)["ranker_metrics_push_failures_total"] == 1


class _Status500(http.server.BaseHTTPRequestHandler):
    requests: ClassVar[list[str]] = []

    def do_PUT(self) -> None:
        _Status500.requests.append(self.path)
        self.rfile.read(int(self.headers.get("Content-Length", 0)))
        self.send_response(500)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def failing_gateway() -> Iterator[str]:
    _Status500.requests = []
    server = http.server.HTTPServer(("127.0.0.1", 0), _Status500)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_port}"
    server.shutdown()
    server.server_close()


def test_pushgateway_errors_are_retried_then_fall_back(ws: Workspace, failing_gateway: str) -> None:
    write_contract_run(ws, "d1")
    config = PushConfig(url=failing_gateway, attempts=2, backoff_seconds=0)
    result = publish_run(ws, "d1", now=NOW, push=config, sleep=lambda _: None)
    assert _Status500.requests == ["/metrics/job/ranker_retrain"] * 2  # grouped by job only
    assert result.delivery == "textfile" and "500" in (result.push.error or "")


def test_custom_textfile_path(ws: Workspace, tmp_path: Path) -> None:
    write_contract_run(ws, "d1")
    target = tmp_path / "node-exporter" / "ranker.prom"
    result = publish_run(ws, "d1", now=NOW, textfile=target)
    assert result.target == str(target) and target.exists()


def test_unwritable_textfile_is_a_clear_error_and_leaves_the_state_untouched(
    ws: Workspace, tmp_path: Path
) -> None:
    write_contract_run(ws, "d1")
    blocker = tmp_path / "not-a-dir"
    blocker.write_text("a file where the folder should be")
    with pytest.raises(RankerError, match="cannot write the metrics textfile"):
        publish_run(ws, "d1", now=NOW, textfile=blocker / "ranker.prom")
    assert not state_path(ws).exists()  # not counted: a retry counts the run once


def test_default_backoff_is_one_then_two_seconds_and_every_attempt_is_logged(
    caplog: pytest.LogCaptureFixture,
) -> None:
    waits: list[float] = []
    config = PushConfig(url=f"http://127.0.0.1:{free_port()}", timeout_seconds=2)
    with caplog.at_level("WARNING", logger="ranking.monitoring.delivery"):
        result = push_with_retries([Sample("ranker_rejections_total", 1.0)], config, sleep=waits.append)
    assert (result.ok, result.attempts) == (False, 3)
    assert waits == [1.0, 2.0]
    assert [r.getMessage().split(" failed ")[1][:14] for r in caplog.records] == [
        "(attempt 1/3):",
        "(attempt 2/3):",
        "(attempt 3/3):",
    ]
