"""The `ranker data|features` commands: one JSON object on stdout, step summaries, exit codes,
online store loaded by materialize (full first, then incremental), freshness."""

from __future__ import annotations

import datetime as dt
import json
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pandas as pd
import pytest
from tinyspace import START, WINDOW_DAYS

from features import sources
from ranking.cli.main import main
from ranking.core.workspace import Workspace

END = START + dt.timedelta(days=6)


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict[str, Any]]:
    code = main(list(argv))
    out = capsys.readouterr().out.strip().splitlines()
    assert len(out) == 1, f"stdout must be exactly one JSON object, got {out!r}"
    return code, json.loads(out[0])


def test_synth_then_freshness_from_the_cli(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = str(tmp_path / "home")
    code, s = _run(
        capsys,
        *(
            "data",
            "synth",
            "--home",
            home,
            "--json",
            "--run-id",
            "r1",
            "--start",
            "2026-05-01",
            "--days",
            "3",
        ),
        *("--users", "200", "--pins", "300", "--requests-per-day", "20", "--slate-size", "5", "--seed", "9"),
    )
    assert code == 0 and s["step"] == "synth" and s["impressions"] == 3 * 20 * 5
    assert json.loads((tmp_path / "home/pipeline/r1/synth.json").read_text())["impressions"] == 300
    code, s = _run(capsys, "features", "freshness", "--home", home, "--json", "--end", "2026-05-03")
    assert code == 0 and s["latest_source_date"] == "2026-05-03" and s["lag_seconds"] == 0.0
    code, s = _run(capsys, "features", "freshness", "--home", home, "--json")
    expected = (dt.datetime.now(dt.UTC) - dt.datetime(2026, 5, 4, tzinfo=dt.UTC)).total_seconds()
    assert s["lag_seconds"] == pytest.approx(expected, abs=60)  # from the end of the newest day to now
    assert main(["features", "freshness", "--home", home, "--json", "--end", "2026-05-04"]) == 2
    assert "2026-05-04 has not landed" in capsys.readouterr().err
    assert main(["features", "freshness", "--home", home, "--json", "--max-lag-hours", "1"]) == 2
    assert "source data is stale" in capsys.readouterr().err


def test_freshness_threshold_from_the_environment(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    home = str(tmp_path / "home")
    argv = ["data", "synth", "--home", home, "--json", "--start", "2026-05-01", "--days", "1"]
    assert main([*argv, "--users", "50", "--pins", "50", "--requests-per-day", "5", "--slate-size", "5"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("RANKER_MAX_SOURCE_LAG_HOURS", "2")
    assert main(["features", "freshness", "--home", home, "--json"]) == 2
    assert "limit 2.0 h" in capsys.readouterr().err
    assert main(["features", "freshness", "--home", home, "--json", "--max-lag-hours", "1e9"]) == 0
    capsys.readouterr()
    monkeypatch.setenv("RANKER_MAX_SOURCE_LAG_HOURS", "soon")
    assert main(["features", "freshness", "--home", home, "--json"]) == 2
    assert "RANKER_MAX_SOURCE_LAG_HOURS" in capsys.readouterr().err


def test_freshness_of_an_empty_workspace_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["features", "freshness", "--home", str(tmp_path), "--json"]) == 2
    assert "source is empty" in capsys.readouterr().err


@pytest.mark.parametrize(
    "argv",
    [
        ["features", "window", "--end", "2026-13-01"],
        ["features", "window", "--end", "2026-01-07", "--days", "0"],
        ["features", "window", "--end", "2026-01-07", "--max-null-rate", "1.5"],
        ["data", "synth", "--start", "2026-01-01", "--days", "2", "--label-noise", "-1"],
        ["data", "import", "--events", "x.csv", "--label-col", "a", "--rating-col", "b"],
    ],
)
def test_bad_arguments_exit_2(argv: list[str], capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exc:
        main(argv)
    assert exc.value.code == 2
    assert "error" in capsys.readouterr().err


def test_help_does_not_import_feast_or_torch() -> None:
    code = "import sys, ranking.cli.main as c; c.build_parser(); print(any(m in sys.modules for m in ('feast', 'torch')))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"


@pytest.mark.slow
def test_window_from_the_cli_reuses_the_partitions(
    tiny: dict[str, Any], capsys: pytest.CaptureFixture[str]
) -> None:
    code, s = _run(
        capsys,
        *("features", "window", "--home", tiny["home"], "--json", "--run-id", "w1"),
        *("--end", END.isoformat(), "--days", str(WINDOW_DAYS)),
    )
    assert code == 0
    want = {
        "end",
        "days",
        "rows_train",
        "rows_eval",
        "label_rate",
        "days_built",
        "days_reused",
        "duration_seconds",
    }
    assert want | {"manifest"} <= set(s)
    assert (s["days_built"], s["days_reused"]) == (0, WINDOW_DAYS + 1)
    assert s["manifest"] == tiny["manifest"] and s["rows_train"] == tiny["window"]["rows_train"]
    assert (Path(tiny["home"]) / "pipeline/w1/window.json").is_file()


@pytest.mark.slow
def test_materialize_loads_the_latest_snapshot_then_goes_incremental(
    tiny: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from features.feast_repo import open_store
    from features.schema import FEATURE_SERVICE

    home = tmp_path / "home"
    shutil.copytree(Path(tiny["home"]) / "source", home / "source")
    code, s = _run(capsys, "features", "apply", "--home", str(home), "--json")
    assert code == 0 and s["feature_services"] == [FEATURE_SERVICE]
    assert (home / "feast/feature_store.yaml").read_text().count(str(home)) >= 2  # absolute paths
    code, s = _run(capsys, "features", "materialize", "--home", str(home), "--json", "--end", "2026-01-05")
    assert (code, s["mode"], s["start"], s["end"]) == (0, "full", START.isoformat(), "2026-01-05")
    code, s = _run(capsys, "features", "materialize", "--home", str(home), "--json")
    assert (code, s["mode"], s["end"]) == (0, "incremental", END.isoformat())

    ws = Workspace.resolve(home)
    snapshot = sources.read_day(ws, sources.USERS, END + dt.timedelta(days=1)).to_pandas().head(5)
    pins = sources.read_day(ws, sources.PINS, END + dt.timedelta(days=1)).to_pandas().head(5)
    store = open_store(ws)
    online = store.get_online_features(
        # the views keyed by user or pin (user_category_stats needs the pin's category first)
        features=["user_stats:impressions_28d", "pin_stats:category"],
        entity_rows=[
            {"user_id": int(u), "pin_id": int(p)}
            for u, p in zip(snapshot["user_id"], pins["pin_id"], strict=True)
        ],
        full_feature_names=True,
    ).to_df()
    pd.testing.assert_series_equal(
        online["user_stats__impressions_28d"].astype("int64"), snapshot["impressions_28d"], check_names=False
    )
    pd.testing.assert_series_equal(online["pin_stats__category"], pins["category"], check_names=False)
    _serve_a_slate(ws, store, END + dt.timedelta(days=1))


def _serve_a_slate(ws: Workspace, store: Any, snapshot_day: dt.date) -> None:
    """Serving's two lookups for one user and a 25-pin slate: the user's, the pins' and the user x
    pin history by (user, pin), then the user x category history by the pins' categories. Pairs
    in the materialised snapshot read its values, the others none (the ranker reads 0)."""
    from features.schema import HISTORY_NUMERIC, USER_CATEGORY_VIEW, USER_PIN_VIEW

    pairs = sources.read_day(ws, sources.USER_PINS, snapshot_day).to_pandas()
    user = int(pairs["user_id"].value_counts().index[0])  # the user with the most pins seen
    theirs = pairs[pairs["user_id"] == user].set_index("pin_id")
    catalogue = sources.read_day(ws, sources.PINS, snapshot_day).to_pandas().set_index("pin_id")
    others = [int(p) for p in catalogue.index if p not in theirs.index]
    slate = [int(p) for p in theirs.index[:10]] + others[: 25 - min(10, len(theirs))]
    assert len(slate) == 25 and len(theirs) >= 1
    fields = [*HISTORY_NUMERIC, "as_of"]
    first = store.get_online_features(
        features=["pin_stats:category", *(f"{USER_PIN_VIEW}:{f}" for f in fields)],
        entity_rows=[{"user_id": user, "pin_id": p} for p in slate],
        full_feature_names=True,
    ).to_df()
    for pin, row in zip(slate, first.itertuples(index=False), strict=True):
        got = row._asdict()
        if pin in theirs.index:
            assert got[f"{USER_PIN_VIEW}__saves_28d"] == theirs.loc[pin, "saves_28d"]
            assert got[f"{USER_PIN_VIEW}__impressions_7d"] == theirs.loc[pin, "impressions_7d"]
        else:
            assert pd.isna(got[f"{USER_PIN_VIEW}__impressions_28d"])
    assert first["pin_stats__category"].tolist() == catalogue.loc[slate, "category"].tolist()
    categories = sorted(set(first["pin_stats__category"]))
    second = store.get_online_features(
        features=[f"{USER_CATEGORY_VIEW}:{f}" for f in fields],
        entity_rows=[{"user_id": user, "category": c} for c in categories],
        full_feature_names=True,
    ).to_df()
    by_category = sources.read_day(ws, sources.USER_CATEGORIES, snapshot_day).to_pandas()
    by_category = by_category[by_category["user_id"] == user].set_index("category")
    for category, saves in zip(categories, second[f"{USER_CATEGORY_VIEW}__saves_28d"], strict=True):
        if category in by_category.index:
            assert saves == by_category.loc[category, "saves_28d"]
        else:
            assert pd.isna(saves)
    assert second[f"{USER_CATEGORY_VIEW}__impressions_28d"].notna().any()
