"""`ranker backtest` on a tiny real workspace: each day is a real `ranker run` in the recipe's own
home; the served model is the champion before the day; a re-run trains nothing (slow)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.registry import Registry

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_backtest_naive_vs_default_on_a_tiny_workspace(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from features.testing import make_tiny_workspace

    home = tmp_path / "home"
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=7, window_days=4)
    # the workspace's config: recipes change only their sections; the window length comes from here
    (home / "ranker.toml").write_text("[window]\ndays = 4\n[recipe]\nbatch_size = 128\n")
    argv = [
        "backtest",
        "--home",
        str(home),
        "--start",
        "2026-01-06",
        "--days",
        "2",
        "--recipe",
        f"naive={REPO / 'recipes' / 'naive.toml'}",
        "--recipe",
        "default",  # a shipped recipe by name
        "--bootstrap-samples",
        "50",
        "--json",
    ]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    folder = Path(summary["backtest_dir"])
    assert summary["baseline"] == "naive"
    for name in ("naive", "default"):
        records = [json.loads((folder / name / "days" / f"2026-01-0{d}.json").read_text()) for d in (6, 7)]
        reg = Registry(str(folder / name / "home" / "registry"))
        assert reg.version_ids() == ["v0001", "v0002"]
        # each day ran `ranker run` in the recipe's home; its effective config came from that home
        run_dir = folder / name / "home" / "runs" / records[0]["run_id"]
        manifest = json.loads((run_dir / "train_manifest.json").read_text())
        assert manifest["epochs"] and len(manifest["epochs"]) == (1 if name == "naive" else 2)  # default: F,J
        assert records[0]["served"] is None  # the first day: no champion yet
        first_champion = records[0]["champion_after"]
        assert records[1]["champion_before"] == first_champion
        if first_champion is not None:
            assert records[1]["served"]["version"] == first_champion
            assert records[1]["served"]["age_days"] == 1
            assert (folder / name / records[1]["served"]["scores"]).is_file()
            # the day before's choice seen on this day (the gate regret): day 1's candidate was promoted,
            # there was no champion to keep
            forward = records[1]["served"]["forward"]
            assert forward["fresh"] == records[0]["candidate"]["version"] == first_champion
            assert forward["promoted_fresh"] is True and forward["other"] is None
            assert forward["fresh_save_hit_at_3"] == records[1]["served"]["metrics"]["save_hit_at_3"]
    assert Path(summary["report"]["markdown"]).is_file() and Path(summary["report"]["png"]).is_file()
    text = Path(summary["report"]["markdown"]).read_text()
    assert "Gate regret" in text and "Against the non-learned heuristic" in text
    # every recipe's candidates against the heuristic, scored on each eval day's partition (issue 31)
    report = json.loads(Path(summary["report"]["json"]).read_text())
    for name in ("naive", "default"):
        found = report["vs_heuristic"]["candidate"][name]
        assert found["days"] == 2 and found["ci"]["save_hit_at_3"] is not None
    # and slice by slice against the baseline, pooled over the days (issue 31)
    rows = report["slices_vs_baseline"]["candidate"]["default"]
    assert {"user:first_seen", "user:returning", "pin:head"} <= {r["name"] for r in rows}
    assert all(r["days"] <= 2 and r["saves"] >= 0 for r in rows)
    assert "naive" not in report["slices_vs_baseline"]["candidate"]  # the baseline itself
    assert "Slices (candidate models" in text
    assert sorted(p.name for p in (folder / "slices").iterdir()) == [
        "2026-01-06.parquet",
        "2026-01-07.parquet",
    ]
    assert sorted(p.name for p in (folder / "heuristic").iterdir()) == [
        "2026-01-06.parquet",
        "2026-01-07.parquet",
    ]
    assert not (home / "registry").exists()

    runs_before = sorted(p.name for p in (folder / "default" / "home" / "runs").iterdir())
    assert main(argv) == 0
    capsys.readouterr()
    assert sorted(p.name for p in (folder / "default" / "home" / "runs").iterdir()) == runs_before
