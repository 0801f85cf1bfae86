"""``ranker evaluate``: one line of text (or one JSON object), and one-line errors with exit 2."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from tests.trainer.conftest import END


def test_evaluate_prints_one_line_or_one_json_object(
    tmp_path: Path, window_home: Path, trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    common = ["evaluate", "--home", str(window_home), "--model", str(trained), "--end", END.isoformat()]
    assert main(common) == 0
    (line,) = capsys.readouterr().out.strip().splitlines()
    assert line.startswith(f"{trained / 'model.pt'} on {END}: save HIT@3 0.") and "rows)" in line
    scores = tmp_path / "scores.parquet"
    assert main([*common, "--json", "--scores-out", str(scores)]) == 0
    (body,) = capsys.readouterr().out.strip().splitlines()
    summary = json.loads(body)
    assert summary["step"] == "evaluate" and summary["exit_code"] == 0 and scores.is_file()
    assert summary["metrics"]["save_hit_at_3"] == pytest.approx(
        float(line.split("HIT@3 ")[1].split()[0]), abs=1e-4
    )


def test_evaluate_without_a_window_is_one_line_exit_2(
    tmp_path: Path, trained: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rc = main(["evaluate", "--home", str(tmp_path), "--model", str(trained), "--end", END.isoformat()])
    assert rc == 2
    err = capsys.readouterr().err.strip().splitlines()
    windows = tmp_path.resolve() / "windows"
    assert err[-1] == f"ranker evaluate: error: no window ending {END} under {windows}: build one first"
