"""`ranker run` leaves the run's report.md and labelled curve.png (with the per-step curve) in the
training run folder after its gate step, as the DAG's gate task does; a report that cannot be
written never fails the run."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path

import pytest

from ranking.cli.main import main


@pytest.fixture(scope="module")
def home(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path_factory.mktemp("report") / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=6, build=False)
    feast_repo.apply(Workspace.resolve(home))
    # from scratch (the default recipe first pretrains a base model: not this test's subject)
    (home / "ranker.toml").write_text('[recipe]\nwarm_start = "champion"\n')
    return home


def _run(capsys: pytest.CaptureFixture[str], home: Path, run_id: str, *extra: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    argv = ["run", "--end", "2026-01-06", "--days", "4", "--epochs", "2", "--home", str(home), "--json"]
    code = main([*argv, "--run-id", run_id, "--dry-run", *extra])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.slow
def test_ranker_run_writes_the_report_beside_the_model(
    home: Path, capsys: pytest.CaptureFixture[str], caplog: pytest.LogCaptureFixture
) -> None:
    from ranking.trainer.reports.curve_data import read_training_curve

    code, summary = _run(capsys, home, "report-1")
    assert code in (0, 1), summary  # a dry run: the gate's answer, nothing promoted
    assert summary["decision"] in ("pass", "reject") and not summary.get("error")
    train = json.loads((home / "pipeline" / "report-1" / "train.json").read_text())
    folder = Path(train["run_dir"])
    report = (folder / "report.md").read_text()
    assert report.startswith("# Run report-1: ")
    assert "## Gate: " + summary["decision"] in report
    assert (folder / "curve.png").stat().st_size > 0
    curve = read_training_curve(folder)
    assert curve is not None and len(curve.points) > len(train["epochs"])


@pytest.mark.slow
def test_a_report_that_fails_is_a_warning_not_the_runs_failure(
    home: Path,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    from ranking.trainer.reports import run_report

    def broken(*args: object, **kwargs: object) -> None:
        raise OSError("disk full")

    monkeypatch.setattr(run_report, "write_run_report", broken)
    with caplog.at_level(logging.WARNING, logger="ranking.pipeline.run"):
        code, summary = _run(capsys, home, "report-2")
    assert code in (0, 1) and not summary.get("error"), summary
    assert "ranker run: no run report: disk full" in caplog.messages
    train = json.loads((home / "pipeline" / "report-2" / "train.json").read_text())
    assert not (Path(train["run_dir"]) / "report.md").exists()
