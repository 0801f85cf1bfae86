"""`ranker data import`: the timestamp unit cannot be flipped by one outlier, out-of-range
timestamps are refused naming their rows, and --replace swaps the new data in whole (a kill at
any point leaves the old data)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pandas as pd
import pytest

from features import sources
from features.importer import ImportConfig, import_events, numeric_time_unit
from ranking.cli.main import main
from ranking.core.errors import DataValidationError
from ranking.core.workspace import Workspace

T0 = 1_767_225_600  # 2026-01-01T00:00:00Z


def _log(ts: list[float], days: int = 1) -> pd.DataFrame:
    n = len(ts)
    return pd.DataFrame(
        {
            "uid": [f"u{i % 7}" for i in range(n)],
            "item": [f"p{i}" for i in range(n)],
            "ts": ts,
            "label": [i % 2 for i in range(n)],
        }
    )


def _write(tmp_path: Path, frame: pd.DataFrame, name: str = "events.parquet") -> Path:
    path = tmp_path / name
    frame.to_parquet(path)
    return path


def _cfg(path: Path, **kw: object) -> ImportConfig:
    return ImportConfig(events=path, user_col="uid", item_col="item", time_col="ts", **kw)  # type: ignore[arg-type]


def test_one_outlier_cannot_flip_the_unit(tmp_path: Path) -> None:
    seconds = [T0 + 3600 * i for i in range(50)]
    frame = _log([*seconds, 2e11])  # one row in milliseconds-looking range among seconds
    ws = Workspace.resolve(tmp_path / "home")
    with pytest.raises(
        DataValidationError,
        match=r"1 timestamps .* outside .* \(read as Unix s, auto: .*\): row 51 \(2e\+11\)",
    ):
        import_events(ws, _cfg(_write(tmp_path, frame)))
    assert not sources.list_days(ws, sources.IMPRESSIONS)
    # without the outlier: read as seconds, 2026-01-01..02, nothing merged as duplicates
    summary = import_events(ws, _cfg(_write(tmp_path, _log(seconds), "clean.parquet")))
    assert summary.time_unit == "s" and summary.start == "2026-01-01"
    assert summary.impressions == 50 and summary.duplicates_merged == 0


@pytest.mark.parametrize(
    ("scale", "unit"), [(1, "s"), (1_000, "ms"), (1_000_000, "us"), (1_000_000_000, "ns")]
)
def test_the_unit_is_the_medians(scale: int, unit: str, tmp_path: Path) -> None:
    ts = [(T0 + 600 * i) * scale for i in range(20)]
    assert numeric_time_unit(pd.Series(ts, dtype="float64")) == unit
    summary = import_events(Workspace.resolve(tmp_path / "home"), _cfg(_write(tmp_path, _log(ts))))
    assert summary.time_unit == unit and summary.start == summary.end == "2026-01-01"


def test_1e15_is_a_named_row_not_a_traceback(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    path = _write(tmp_path, _log([T0, T0 + 60, 1e15, T0 + 120]))
    home = str(tmp_path / "home")
    code = main(["data", "import", "--events", str(path), "--home", home, "--user-col", "uid",
                 "--item-col", "item", "--time-col", "ts", "--json"])  # fmt: skip
    captured = capsys.readouterr()
    assert code == 2 and "Traceback" not in captured.err
    assert "row 3 (1e+15)" in captured.err and "--time-unit" in captured.err
    assert json.loads(captured.out)["exit_code"] == 2


def test_an_explicit_unit_wins_and_is_range_checked(tmp_path: Path) -> None:
    ms = [(T0 + 60 * i) * 1000 for i in range(10)]
    ws = Workspace.resolve(tmp_path / "home")
    with pytest.raises(DataValidationError, match=r"10 timestamps .* \(read as Unix s\)"):
        import_events(ws, _cfg(_write(tmp_path, _log(ms)), time_unit="s"))
    assert import_events(ws, _cfg(_write(tmp_path, _log(ms)), time_unit="ms")).time_unit == "ms"


def test_text_timestamps_out_of_range_are_refused(tmp_path: Path) -> None:
    frame = _log([0.0] * 3).assign(
        ts=["2026-01-01T00:00:00Z", "1969-07-20T20:17:00Z", "2026-01-01T01:00:00Z"]
    )
    with pytest.raises(
        DataValidationError, match=r"outside 1990-01-01\.\.2100-01-01: row 2 \('1969-07-20T20:17:00Z'\)"
    ):
        import_events(Workspace.resolve(tmp_path / "home"), _cfg(_write(tmp_path, frame)))


def _days(ws: Workspace) -> list[str]:
    return [d.isoformat() for d in sources.list_days(ws, sources.IMPRESSIONS)]


KILLED_IMPORT = """
import os, sys
from pathlib import Path
import features.sources as sources
from features.importer import ImportConfig, import_events
from ranking.core.workspace import Workspace
home, events, kill_at = sys.argv[1], sys.argv[2], sys.argv[3]
written = []
real_write_day, real_entities = sources.write_day, sources.write_table_file
def write_day(ws, table, day, data):
    if kill_at == "day" and table == "impressions" and len(written) == 2:
        os._exit(137)  # killed after two days of the new data
    written.append(day)
    return real_write_day(ws, table, day, data)
def write_table_file(path, data):
    if kill_at == "entities":
        os._exit(137)  # killed after every day, before the entity files
    return real_entities(path, data)
def replace(src, dst):
    if kill_at == "swap" and Path(dst).name == "source":
        os._exit(137)  # killed between the two renames of the swap
    return real_replace(src, dst)
real_replace = os.replace
sources.write_day, sources.write_table_file = write_day, write_table_file
import features.importer as importer
importer.os.replace = replace  # the same os module: only the swap's second rename dies
import_events(Workspace.resolve(home), ImportConfig(events=Path(events), user_col="uid",
              item_col="item", time_col="ts", replace=True))
"""


@pytest.mark.parametrize("kill_at", ["day", "entities", "swap"])
def test_a_killed_replace_leaves_the_old_data(kill_at: str, tmp_path: Path) -> None:
    ws = Workspace.resolve(tmp_path / "home")
    old = [T0 + 86400 * d + 60 * i for d in range(3) for i in range(5)]  # 2026-01-01..03
    import_events(ws, _cfg(_write(tmp_path, _log(old), "old.parquet")))
    old_days = _days(ws)
    before = {p.relative_to(ws.source): p.read_bytes() for p in ws.source.rglob("*.parquet")}
    new = [T0 + 86400 * (10 + d) + 60 * i for d in range(5) for i in range(5)]  # 01-11..15
    new_path = _write(tmp_path, _log(new), "new.parquet")
    proc = __import__("subprocess").run(
        [__import__("sys").executable, "-c", KILLED_IMPORT, str(ws.root), str(new_path), kill_at],
        capture_output=True,
        text=True,
        timeout=300,
        env={**__import__("os").environ, "PYTHONPATH": str(Path(__file__).resolve().parents[2])},
    )
    assert proc.returncode == 137, proc.stderr
    # what a reader sees right after the kill, before anything repairs it: the old data, whole
    # (the swap is one rename of a link: killed before it, nothing of the new data is visible)
    assert _days(ws) == old_days
    assert {p.relative_to(ws.source): p.read_bytes() for p in ws.source.rglob("*.parquet")} == before
    # the next import's recovery step removes what the killed one left
    from features.importer import SOURCE_VERSIONS, recover_source

    recover_source(ws)
    assert _days(ws) == old_days
    assert not list(ws.root.glob(".import-staging-*")) and not list(ws.root.glob(".source.replaced-*"))
    assert [v.resolve() for v in (ws.root / SOURCE_VERSIONS).iterdir()] == [ws.source.resolve()]
    # and a re-run of the replace completes
    summary = import_events(ws, _cfg(new_path, replace=True))
    assert _days(ws) == [f"2026-01-{d}" for d in range(11, 16)] and summary.impressions == 25
    assert sources.entities_path(ws, sources.USERS).is_file()


def test_replace_over_a_plain_source_folder_and_one_version_kept(tmp_path: Path) -> None:
    """A workspace whose source is a plain folder (ranker data synth, or one from before versioned
    sources) is replaced like any other; afterwards only the live version is kept."""
    from features.importer import SOURCE_VERSIONS

    ws = Workspace.resolve(tmp_path / "home")
    first = [T0 + 86400 * d + 60 * i for d in range(3) for i in range(5)]
    import_events(ws, _cfg(_write(tmp_path, _log(first), "first.parquet")))
    # turn the linked source into a plain folder, as synth writes it
    plain = tmp_path / "plain"
    shutil.copytree(ws.source, plain)
    ws.source.unlink()
    shutil.rmtree(ws.root / SOURCE_VERSIONS)
    plain.rename(ws.source)
    assert not ws.source.is_symlink() and _days(ws) == ["2026-01-01", "2026-01-02", "2026-01-03"]
    for k, offset in enumerate((10, 20)):
        new = [T0 + 86400 * (offset + d) + 60 * i for d in range(2) for i in range(5)]
        import_events(ws, _cfg(_write(tmp_path, _log(new), f"new{k}.parquet"), replace=True))
        assert ws.source.is_symlink()
        assert _days(ws) == [f"2026-01-{offset + 1 + d}" for d in range(2)]
        assert [v.resolve() for v in (ws.root / SOURCE_VERSIONS).iterdir()] == [ws.source.resolve()]
    assert not list(ws.root.glob(".source.replaced-*")) and not list(ws.root.glob(".import-staging-*"))
