"""`ranker metrics publish|show` through the CLI: summaries, the environment's Pushgateway, bad
arguments exit 2."""

from __future__ import annotations

import json

import pytest
from monitoring_fixtures import free_port, write_contract_run

from ranking.cli.main import main
from ranking.core.workspace import Workspace
from ranking.monitoring.delivery import PUSHGATEWAY_ENV, textfile_path


def test_cli_publish_and_show(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv(PUSHGATEWAY_ENV, raising=False)
    write_contract_run(ws, "d1")
    assert main(["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json"]) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["delivery"] == "textfile" and summary["status"] == "success"
    assert summary["step"] == "metrics"
    # the publish records its own summary, which is not a stage of the run
    assert ws.step_summary_path("d1", "metrics").exists()
    assert main(["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json"]) == 0
    capsys.readouterr()
    text = textfile_path(ws).read_text()
    assert 'stage="metrics"' not in text

    assert main(["metrics", "show", "--home", str(ws.root)]) == 0
    assert "ranker_last_run_timestamp_seconds" in capsys.readouterr().out
    assert main(["metrics", "show", "--home", str(ws.root), "--json"]) == 0
    shown = json.loads(capsys.readouterr().out)
    assert shown["run_id"] == "d1" and shown["series"]["ranker_train_epochs"] == 3


def test_cli_uses_the_env_pushgateway_and_survives_its_failure(
    ws: Workspace, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv(PUSHGATEWAY_ENV, f"http://127.0.0.1:{free_port()}")
    write_contract_run(ws, "d1")
    argv = ["metrics", "publish", "--home", str(ws.root), "--run-id", "d1", "--json", "--push-attempts", "1"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out)
    assert summary["push_ok"] is False and summary["delivery"] == "textfile"
    # an explicit empty --pushgateway means "none configured"
    assert main([*argv, "--pushgateway", ""]) == 0
    assert json.loads(capsys.readouterr().out)["push_ok"] is None


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        ([], "needs --run-id"),
        (
            ["--run-id", "d1", "--status", "success", "--failed-step", "train"],
            "only goes with --status failed",
        ),
        (["--run-id", "d1", "--pushgateway", "pushgateway:9091"], "invalid Pushgateway URL"),
        (["--run-id", "d1", "--job", "bad job"], "invalid job name"),
        (["--run-id", "d1", "--textfile", "/tmp/x.txt"], "must be a path ending in .prom"),
    ],
)
def test_cli_bad_arguments_exit_2(
    ws: Workspace, capsys: pytest.CaptureFixture[str], extra: list[str], message: str
) -> None:
    write_contract_run(ws, "d1")
    assert main(["metrics", "publish", "--home", str(ws.root), *extra]) == 2
    assert message in capsys.readouterr().err


def test_cli_show_before_any_publish(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["metrics", "show", "--home", str(ws.root)]) == 2
    assert "no metrics published yet" in capsys.readouterr().err
