"""The backtest replays `ranker run`, data validation included: a day whose window fails its
validation fails in the replay as it would in production (one line naming the days, the day's
record says why), and the days whose windows are clean still run."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pytest

from ranking.cli.main import main

pytestmark = pytest.mark.slow

START = dt.date(2026, 1, 1)
DAYS = 8
WINDOW = 3


def test_a_day_whose_window_fails_validation_fails_in_the_replay(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from features import feast_repo, sources
    from features.schema import SNAPSHOT_TIME
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=START, days=DAYS, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text(f"[window]\ndays = {WINDOW}\n[recipe]\nbatch_size = 128\n")
    recipe = tmp_path / "plain.toml"
    recipe.write_text('[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "none"\n')
    # the pin snapshot of one day dated 12 h late: its rows joined a snapshot dated after them
    ws = Workspace.resolve(home)
    bad = START + dt.timedelta(days=6)
    table = sources.read_day(ws, sources.PINS, bad)
    i = table.schema.get_field_index(SNAPSHOT_TIME)
    late = pc.add(table.column(i), pa.scalar(dt.timedelta(hours=12), pa.duration("us")))
    sources.write_day(
        ws, sources.PINS, bad, table.set_column(i, SNAPSHOT_TIME, late.cast(table.schema.field(i).type))
    )

    first = START + dt.timedelta(days=5)  # its window 01-03..01-05 is clean; 01-07's holds the bad day
    argv = ["backtest", "--home", str(home), "--start", first.isoformat(), "--days", "2",
            "--recipe", f"plain={recipe}", "--bootstrap-samples", "50", "--json"]  # fmt: skip
    code = main(argv)
    captured = capsys.readouterr()
    assert code == 2
    errors = [line for line in captured.err.splitlines() if line.startswith("ranker backtest: error: ")]
    assert len(errors) == 1 and "1 replayed day(s) failed (plain: 2026-01-07)" in errors[0], captured.err
    folder = (
        home / "backtests" / json.loads(captured.out.strip().splitlines()[-1])["backtest_dir"].split("/")[-1]
    )
    record = json.loads((folder / "plain" / "days" / "2026-01-07.json").read_text())
    assert "step validate failed: data validation failed" in record["error"]
    assert "leakage_snapshot_date" in record["error"]
    clean = json.loads((folder / "plain" / "days" / "2026-01-06.json").read_text())
    assert clean["exit_code"] in (0, 1) and clean["candidate"] is not None
