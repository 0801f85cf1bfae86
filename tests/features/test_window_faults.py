"""Window faults: partitions that no longer match their record are rebuilt (not trusted), rows
filed under the wrong day are refused, and a day's partition key covers every snapshot that can
serve it (the day before's too: the TTL boundary is inclusive)."""

from __future__ import annotations

import datetime as dt
import logging
from pathlib import Path
from typing import Any

import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tinyspace import START, WINDOW_DAYS

from features import sources
from features.build_checks import WindowChecks
from ranking.core.errors import DataValidationError
from ranking.core.workspace import Workspace

pytestmark = pytest.mark.slow

END = START + dt.timedelta(days=6)
DAY = START + dt.timedelta(days=3)  # 2026-01-04, a training day


def _build(home: Path, **checks: Any) -> dict[str, Any]:
    from features.window import build_window

    return build_window(Workspace.resolve(home), END, WINDOW_DAYS, WindowChecks(**checks))


def _part(manifest: dict[str, Any], day: dt.date) -> dict[str, Any]:
    return next(p for p in [*manifest["train"], manifest["eval"]] if p["date"] == day.isoformat())


@pytest.mark.parametrize("damage", ["truncate", "flip", "delete"])
def test_a_partition_damaged_after_its_manifest_is_rebuilt(
    damage: str, private_home: Path, caplog: pytest.LogCaptureFixture
) -> None:
    first = _build(private_home)
    path = Path(_part(first, DAY)["path"])
    good = pd.read_parquet(path)
    data = bytearray(path.read_bytes())
    if damage == "truncate":
        path.write_bytes(bytes(data[: len(data) // 2]))
    elif damage == "flip":  # same size: only the checksum sees it
        data[len(data) // 2] ^= 0xFF
        path.write_bytes(bytes(data))
    else:
        path.unlink()
    with caplog.at_level(logging.WARNING, logger="features.window"):
        again = _build(private_home)
    assert (again["days_built"], again["days_reused"]) == (1, WINDOW_DAYS)
    assert list(again["days_repaired"]) == [DAY.isoformat()]
    assert "does not match its record" in caplog.text
    assert _part(again, DAY)["partition_key"] == _part(first, DAY)["partition_key"]
    pd.testing.assert_frame_equal(pd.read_parquet(path), good)
    assert again["window_id"] == first["window_id"]
    third = _build(private_home)
    assert (third["days_built"], third["days_repaired"]) == (0, {})


def test_impressions_outside_their_day_are_refused_naming_rows(private_home: Path) -> None:
    ws = Workspace.resolve(private_home)
    table = sources.read_day(ws, sources.IMPRESSIONS, DAY)
    ts = table["event_timestamp"].to_pylist()
    ts[0] = ts[0] + dt.timedelta(days=1)  # filed under D, happened on D+1
    moved = table.set_column(
        table.schema.get_field_index("event_timestamp"),
        "event_timestamp",
        pa.array(ts, type=table.schema.field("event_timestamp").type),
    )
    sources.write_day(ws, sources.IMPRESSIONS, DAY, moved)
    first = moved.slice(0, 1).to_pylist()[0]
    with pytest.raises(
        DataValidationError, match=r"1 impressions filed under 2026-01-04 have timestamps outside"
    ) as exc:
        _build(private_home)
    assert f"{first['request_id']}/{first['pin_id']} at 2026-01-05" in str(exc.value)


def test_the_day_befores_snapshot_can_serve_midnight_and_is_in_the_key(private_home: Path) -> None:
    """An impression at exactly D 00:00:00 of a pin that D's snapshot lacks is served by D-1's
    snapshot (Feast's TTL check is inclusive); changing D-1's snapshot must rebuild D."""
    ws = Workspace.resolve(private_home)
    before = DAY - dt.timedelta(days=1)
    imps = sources.read_day(ws, sources.IMPRESSIONS, DAY).to_pandas()
    pin = int(imps["pin_id"].iloc[0])
    midnight = pd.Timestamp(dt.datetime.combine(DAY, dt.time(), dt.UTC))
    imps.loc[0, "event_timestamp"] = midnight
    sources.write_day(
        ws,
        sources.IMPRESSIONS,
        DAY,
        pa.Table.from_pandas(
            imps, schema=sources.read_day(ws, sources.IMPRESSIONS, DAY).schema, preserve_index=False
        ),
    )
    pins_d = sources.read_day(ws, sources.PINS, DAY)
    sources.write_day(ws, sources.PINS, DAY, pins_d.filter(pc.not_equal(pins_d["pin_id"], pin)))
    key = (imps.loc[0, "request_id"], pin)

    def served(manifest: dict[str, Any]) -> int:
        frame = pd.read_parquet(_part(manifest, DAY)["path"]).set_index(["request_id", "pin_id"])
        return int(frame.loc[key, "pin_stats__impressions_28d"])

    first = _build(private_home)
    pins_b = sources.read_day(ws, sources.PINS, before).to_pandas()
    assert served(first) == int(pins_b.loc[pins_b["pin_id"] == pin, "impressions_28d"].iloc[0])

    pins_b.loc[pins_b["pin_id"] == pin, "impressions_28d"] += 1000  # D-1's snapshot is restated
    schema = sources.read_day(ws, sources.PINS, before).schema
    sources.write_day(
        ws, sources.PINS, before, pa.Table.from_pandas(pins_b, schema=schema, preserve_index=False)
    )
    second = _build(private_home)
    assert _part(second, DAY)["partition_key"] != _part(first, DAY)["partition_key"]
    assert served(second) == served(first) + 1000  # not the stale partition
