"""`python -m benchmarks.slice_guard_power`: bad input is one line and exit 2; the eval days it
judges are those with the day's candidate and the day before's both scored on them."""

from __future__ import annotations

import datetime as dt
from pathlib import Path

import pytest

from benchmarks import slice_guard_power


def test_bad_input_is_one_line_and_exit_2(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert slice_guard_power.main([]) == 2
    assert slice_guard_power.main(["--home", str(tmp_path), "--suite", "../etc"]) == 2
    assert slice_guard_power.main(["--home", str(tmp_path)]) == 2
    lines = capsys.readouterr().err.strip().splitlines()
    assert len(lines) == 3 and "no gate suite scores at" in lines[-1]


def test_the_days_judged_have_both_candidates_scored(tmp_path: Path) -> None:
    for name in (
        "c-2026-11-10@2026-11-10.parquet",
        "c-2026-11-10@2026-11-11.parquet",
        "c-2026-11-11@2026-11-11.parquet",  # 11-11: its own candidate and 11-10's: judged
        "c-2026-11-12@2026-11-12.parquet",  # 11-12: no 11-11 candidate scored on it
        "c-2026-11-12@2026-11-13.parquet",
        "c-2026-11-13@2026-11-13.parquet",  # 11-13: judged
        "naive-2026-11-13@2026-11-13.parquet",
    ):
        (tmp_path / name).touch()
    assert slice_guard_power._days(tmp_path) == [dt.date(2026, 11, 11), dt.date(2026, 11, 13)]
