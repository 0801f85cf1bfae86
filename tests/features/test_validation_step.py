"""The data validation step on a real built window (Feast, the window builder, the CLI): its
records and report, the statistics' backfill, a bad window stopped in one line, an operator's
acceptance, `ranker train` refusing a failed window, and `ranker run` stopping before training."""

from __future__ import annotations

import datetime as dt
import json
import shutil
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
import pytest
from tinyspace import DAYS, START, WINDOW_DAYS

from features import sources
from features.schema import SNAPSHOT_TIME
from ranking.cli.main import main
from ranking.core.workspace import Workspace

pytestmark = pytest.mark.slow

END = START + dt.timedelta(days=DAYS - 1)  # the tiny window's eval day
BAD_DAY = START + dt.timedelta(days=3)  # one of its training days


def _validate(home: Path, capsys: pytest.CaptureFixture[str], *extra: str) -> tuple[int, dict[str, Any], str]:
    code = main(
        [
            "features",
            "validate",
            "--home",
            str(home),
            "--end",
            END.isoformat(),
            "--days",
            str(WINDOW_DAYS),
            "--json",
            *extra,
        ]
    )
    captured = capsys.readouterr()
    return code, json.loads(captured.out.strip().splitlines()[-1]), captured.err


def _window(home: Path) -> dict[str, Any]:
    from features.window import build_window

    return build_window(Workspace.resolve(home), END, WINDOW_DAYS)


def _late_snapshots(home: Path) -> None:
    """The pin snapshot of BAD_DAY stamped 12 h after its impressions' day began: every row that
    joins it joined a snapshot dated after the impression (a snapshot job that ran late and kept
    its run time). Feast still joins it by its event time."""
    ws = Workspace.resolve(home)
    table = sources.read_day(ws, sources.PINS, BAD_DAY)
    late = pc.add(table.column(SNAPSHOT_TIME), pa.scalar(dt.timedelta(hours=12), pa.duration("us")))
    index = table.schema.get_field_index(SNAPSHOT_TIME)
    sources.write_day(
        ws,
        sources.PINS,
        BAD_DAY,
        table.set_column(index, SNAPSHOT_TIME, late.cast(table.schema.field(index).type)),
    )


def test_a_clean_window_is_validated_and_reported(
    private_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _window(private_home)
    code, summary, _ = _validate(private_home, capsys, "--run-id", "r1")
    assert code == 0 and summary["verdict"] in ("pass", "warn") and summary["counts"]["fail"] == 0
    # 5 days of history at most: the history-based kinds only warn (the synthetic log's features ramp up)
    assert all(a["policy"] == "warn" for a in summary["anomalies"])
    assert summary["leak_checked"] and summary["leak_clean"] and summary["schema_inferred"]
    assert summary["statistics_computed"] == 0  # the builder computed them with each partition
    folder = Path(summary["report"]).parent
    assert {p.name for p in folder.iterdir()} == {"validation.json", "report.md", "drift.png"}
    assert "Verdict:" in (folder / "report.md").read_text()
    recorded = json.loads((private_home / "pipeline" / "r1" / "validate.json").read_text())
    assert recorded["verdict"] == summary["verdict"] and recorded["step"] == "validate"
    schema = json.loads(Path(summary["schema_path"]).read_text())
    assert schema["features"]["pin_stats__save_rate_28d"]["domain_max"] == 1.0
    # the schema is kept: a second run reads it
    code, again, _ = _validate(private_home, capsys)
    assert code == 0 and not again["schema_inferred"] and again["schema_path"] == summary["schema_path"]


def test_statistics_of_partitions_built_before_are_backfilled(
    private_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = _window(private_home)
    for part in [*manifest["train"], manifest["eval"]]:
        (Path(part["path"]).parent / "statistics.json").unlink()
    code, summary, _ = _validate(private_home, capsys)
    assert code == 0 and summary["statistics_computed"] == WINDOW_DAYS + 1
    assert all((Path(p["path"]).parent / "statistics.json").is_file() for p in manifest["train"])
    code, summary, _ = _validate(private_home, capsys)
    assert summary["statistics_computed"] == 0


def test_a_leak_stops_the_window_in_one_line_until_accepted(
    private_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _window(private_home)
    _validate(private_home, capsys)  # the first run infers the schema from clean days
    _late_snapshots(private_home)
    _window(private_home)  # the day's partition is rebuilt from the changed source
    code, summary, err = _validate(private_home, capsys, "--run-id", "r2")
    assert code == 2 and summary["verdict"] == "fail" and not summary["leak_clean"]
    (line,) = err.strip().splitlines()
    assert (
        line.startswith("ranker features validate: error: data validation failed")
        and "leakage_snapshot_date" in line
    )
    failing = [a for a in summary["anomalies"] if a["policy"] == "fail"]
    assert {a["kind"] for a in failing} == {"leakage_snapshot_date"} and failing[0][
        "day"
    ] == BAD_DAY.isoformat()
    assert json.loads((private_home / "pipeline" / "r2" / "validate.json").read_text())["exit_code"] == 2

    # `ranker train` does not go around it
    code = main(
        [
            "train",
            "--home",
            str(private_home),
            "--end",
            END.isoformat(),
            "--days",
            str(WINDOW_DAYS),
            "--epochs",
            "1",
        ]
    )
    err = capsys.readouterr().err
    assert code == 2 and "failed its data validation (leakage_snapshot_date" in err

    key = f"leakage_snapshot_date:pin_stats__as_of@{BAD_DAY.isoformat()}"
    assert (
        main(
            [
                "features",
                "accept",
                "--home",
                str(private_home),
                "--anomaly",
                key,
                "--reason",
                "snapshot job clock fixed",
            ]
        )
        == 0
    )
    capsys.readouterr()
    code, summary, _ = _validate(private_home, capsys)
    assert code == 0 and summary["counts"]["accepted"] == 1
    (accepted,) = [a for a in summary["anomalies"] if a["policy"] == "accepted"]
    assert accepted["accepted"] == "snapshot job clock fixed"
    lines = (private_home / "validation" / "accepted.jsonl").read_text().splitlines()
    assert json.loads(lines[-1])["key"] == key and json.loads(lines[-1])["who"]


@pytest.mark.parametrize(
    ("anomaly", "message"),
    [
        ("not_a_kind@2026-01-04", "unknown kind 'not_a_kind'"),
        ("drift:x", "expected KIND[:FEATURE]@YYYY-MM-DD"),
        ("drift:x@2026-13-01", "'2026-13-01' is not a date"),
    ],
)
def test_a_bad_acceptance_is_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], anomaly: str, message: str
) -> None:
    assert main(["features", "accept", "--home", str(tmp_path), "--anomaly", anomaly, "--reason", "x"]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and message in err[0]
    assert not (tmp_path / "validation" / "accepted.jsonl").exists()


def test_ranker_run_stops_at_the_validation_step(
    private_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same step in `ranker run` as on the command line: the bad window stops the run before
    training (exit 2, one line, no train summary, nothing registered), and the metrics say so."""
    _window(private_home)
    _validate(private_home, capsys)
    _late_snapshots(private_home)
    code = main(
        [
            "run",
            "--home",
            str(private_home),
            "--end",
            END.isoformat(),
            "--days",
            str(WINDOW_DAYS),
            "--json",
            "--run-id",
            "bad",
        ]
    )
    captured = capsys.readouterr()
    summary = json.loads(captured.out.strip().splitlines()[-1])
    assert code == 2 and summary["failed_step"] == "validate"
    assert [s["step"] for s in summary["steps"]] == ["window", "validate", "metrics", "track"]
    assert summary["validation"]["verdict"] == "fail" and summary["validation"]["failing"] == [
        "leakage_snapshot_date"
    ]
    assert "ranker run: error: step validate failed: data validation failed" in captured.err
    folder = private_home / "pipeline" / "bad"
    assert not (folder / "train.json").exists() and not (private_home / "registry" / "versions").exists()
    prom = (private_home / "metrics" / "ranker.prom").read_text()
    assert "ranker_validation_passed 0" in prom and 'ranker_run_failures_total{step="validate"} 1' in prom
    assert 'ranker_validation_anomalies_by_kind{kind="leakage_snapshot_date"} ' in prom
    shutil.rmtree(folder)


def test_apply_gives_old_snapshots_their_time(tmp_path: Path) -> None:
    """A workspace written before the snapshots carried `as_of`: the first apply adds it (equal
    to the snapshot's event time), once, without touching the impressions."""
    from features.schema import SNAPSHOT_TIME

    ws = Workspace.resolve(tmp_path / "home")
    day = dt.date(2026, 1, 2)
    stamp = dt.datetime(2026, 1, 2, tzinfo=dt.UTC)
    old = pa.table(
        {
            "user_id": pa.array([1, 2], pa.int64()),
            "event_timestamp": pa.array([stamp, stamp], pa.timestamp("us", tz="UTC")),
        }
    )
    sources.write_day(ws, sources.USERS, day, old)
    assert sources.add_snapshot_time(ws, SNAPSHOT_TIME) == 1
    table = sources.read_day(ws, sources.USERS, day)
    assert table.column(SNAPSHOT_TIME).equals(table.column("event_timestamp"))
    assert sources.add_snapshot_time(ws, SNAPSHOT_TIME) == 0  # idempotent
