"""`ranker data import` with unsigned 64-bit ids (issue 25.14): ids above the int64 range were
cast and wrapped to negative ids silently; now one line naming the column and rows, exit 2, and
nothing written. Unsigned ids within the range are kept as they are."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from features import sources
from ranking.cli.main import main
from ranking.core.workspace import Workspace

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z
BIG = [2**63, 2**64 - 1]


def _events(users: list[int]) -> pd.DataFrame:
    n = len(users)
    return pd.DataFrame(
        {
            "uid": np.array(users, dtype=np.uint64),
            "item": np.arange(100, 100 + n, dtype=np.int64),
            "ts": [T0 + 60 * i for i in range(n)],
            "label": [i % 2 for i in range(n)],
        }
    )


def _import(path: Path, home: Path) -> int:
    return main(["data", "import", "--events", str(path), "--home", str(home), "--user-col", "uid",
                 "--item-col", "item", "--time-col", "ts", "--json"])  # fmt: skip


@pytest.mark.parametrize("suffix", [".parquet", ".csv"])
def test_ids_beyond_int64_are_one_line_naming_column_and_rows(
    suffix: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / f"events{suffix}"
    frame = _events([1, 2, *BIG, 3])
    if suffix == ".parquet":
        frame.to_parquet(path)
    else:  # pandas reads 2**63.. back as uint64
        frame.to_csv(path, index=False)
    home = tmp_path / "home"
    assert _import(path, home) == 2
    captured = capsys.readouterr()
    lines = [line for line in captured.err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in captured.err, captured.err
    assert "2 user ids in column 'uid' do not fit a signed 64-bit integer" in lines[0]
    assert f"row 3 ({2**63}), row 4 ({2**64 - 1})" in lines[0]
    assert json.loads(captured.out)["error_type"] == "DataValidationError"
    assert not sources.list_days(Workspace.resolve(home), sources.IMPRESSIONS)
    assert not home.exists() or not any(home.iterdir())


def test_unsigned_ids_within_int64_are_kept(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = tmp_path / "events.parquet"
    users = [1, 2, 2**63 - 1]
    _events(users).to_parquet(path)
    home = tmp_path / "home"
    assert _import(path, home) == 0
    capsys.readouterr()
    ws = Workspace.resolve(home)
    day = sources.list_days(ws, sources.IMPRESSIONS)[0]
    stored = sources.read_day(ws, sources.IMPRESSIONS, day)["user_id"].to_pylist()
    assert sorted(set(stored)) == users
