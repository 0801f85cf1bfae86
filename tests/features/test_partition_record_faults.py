"""A partition's record (``partition.json``) that is torn or edited (issue 25.5: a record that is
not JSON was exit 70, ``JSONDecodeError``, in `ranker features window` and `ranker run`, and a
damaged record was never rebuilt): the record is judged like the parquet beside it, and a window
that meets one rebuilds that day and says why."""

from __future__ import annotations

import datetime as dt
import json
import logging
from pathlib import Path
from typing import Any

import pytest
from tinyspace import START, WINDOW_DAYS

from features.partitions import RECORD, read_record
from ranking.core.workspace import Workspace

END = START + dt.timedelta(days=6)
DAY = START + dt.timedelta(days=3)  # a training day

GOOD = {"rows": 10, "bytes": 100, "sha256": "ab", "label_rate": 0.1, "null_rates": {"x": 0.0}}


@pytest.mark.parametrize(
    ("text", "why"),
    [
        (b'{"rows": 10, "lab', "is not valid JSON"),  # torn mid-write
        (b"\xff\xfe\x00garbage", "is not valid JSON"),
        (b"[1, 2]", "is not a JSON object"),
        (json.dumps({**GOOD, "rows": -3}).encode(), "'rows' that is not a whole number"),
        (json.dumps({**GOOD, "label_rate": None}).encode(), "no finite 'label_rate'"),
        (json.dumps({k: v for k, v in GOOD.items() if k != "null_rates"}).encode(), "no 'null_rates'"),
    ],
)
def test_an_unusable_record_says_why_instead_of_raising(text: bytes, why: str, tmp_path: Path) -> None:
    path = tmp_path / RECORD
    path.write_bytes(text)
    record, problem = read_record(path)
    assert record is None and problem is not None
    assert problem.startswith(f"its record {RECORD} ") and why in problem and "\n" not in problem


def test_a_usable_record_is_returned(tmp_path: Path) -> None:
    path = tmp_path / RECORD
    path.write_text(json.dumps(GOOD))
    assert read_record(path) == (GOOD, None)


@pytest.mark.slow
def test_a_window_rebuilds_a_day_whose_record_is_torn(
    private_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    from features.window import build_window

    ws = Workspace.resolve(private_home)
    first: dict[str, Any] = build_window(ws, END, WINDOW_DAYS)
    part = next(p for p in first["train"] if p["date"] == DAY.isoformat())
    record = Path(part["path"]).with_name(RECORD)
    record.write_bytes(record.read_bytes()[:40])  # torn: not JSON
    with caplog.at_level(logging.WARNING, logger="features.window"):
        again = build_window(ws, END, WINDOW_DAYS)
    assert again["days_built"] == 1 and list(again["days_repaired"]) == [DAY.isoformat()]
    assert "is not valid JSON" in again["days_repaired"][DAY.isoformat()]
    assert json.loads(record.read_text())["sha256"] == part["sha256"]  # rewritten whole
    assert again["window_id"] == first["window_id"]
