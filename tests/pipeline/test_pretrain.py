"""`ranker pretrain` (the base alias), warm starts from the base, the incremental recipe's lineage,
and carrying the tables' optimizer state (slow: real Feast windows and torchrec training)."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest

from ranking.cli.main import main

pytestmark = pytest.mark.slow

GATE_OPEN = (
    "[gate]\ntolerance = 0.9\nmax_auc_drop = 1.0\nmax_ne_rise = 1.0\nmin_lift_over_random = 0.0\n"
    'anchor_tolerance = 0.9\ncalibration_low = 0.01\ncalibration_high = 100.0\nrule = "point"\n'
)


@pytest.fixture
def tiny_home(tmp_path: Path) -> Path:
    return tmp_path


def _ranker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main([*argv, "--json"])
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _fresh(tmp_path: Path, name: str, config: str) -> Path:
    """A tiny workspace (13 days from 2026-01-01, Feast applied) with ``config`` as its ranker.toml."""
    from features import feast_repo
    from features.testing import make_tiny_workspace
    from ranking.core.workspace import Workspace

    home = tmp_path / name
    make_tiny_workspace(home, start=dt.date(2026, 1, 1), days=13, build=False)
    feast_repo.apply(Workspace.resolve(home))
    (home / "ranker.toml").write_text(config)
    return home


def test_pretrain_trains_on_the_range_before_the_window_and_moves_the_base(
    tiny_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _fresh(tiny_home, "base-ws", '[window]\ndays = 4\n[recipe]\nwarm_start = "base"\n')
    code, out = _ranker(capsys, "pretrain", "--end", "2026-01-10", "--days", "3", "--home", str(home))
    assert code == 0, (out.get("error"), out)
    # daily window for 01-10: [01-06, 01-10); the base's range ends where it starts
    assert out["base_range"] == ["2026-01-03", "2026-01-06"] and out["moved"] and out["previous_base"] is None
    version = out["version"]
    record = json.loads((home / "registry" / "versions" / version / "version.json").read_text())
    assert (record["train"]["train_start"], record["train"]["train_end"]) == ("2026-01-03", "2026-01-06")
    assert record["train"]["warm_start"]["source"] == "none" and record["train"]["epochs"] == 1

    code, _ = _ranker(capsys, "features", "window", "--end", "2026-01-10", "--home", str(home))
    assert code == 0
    code, train = _ranker(
        capsys, "train", "--end", "2026-01-10", "--epochs", "2", "--no-progress", "--home", str(home)
    )
    assert code == 0, train
    assert train["warm_start"]["source"] == f"base {version}"
    assert set(train["window"]["train_dates"]).isdisjoint({"2026-01-03", "2026-01-04", "2026-01-05"})

    # a second pretrain (a week on) moves the base; rollback --alias base moves it back
    code, out2 = _ranker(capsys, "pretrain", "--end", "2026-01-12", "--days", "3", "--home", str(home))
    assert code == 0 and out2["previous_base"] == version and out2["version"] != version
    code, rb = _ranker(capsys, "rollback", "--alias", "base", "--reason", "test", "--home", str(home))
    assert code == 0 and rb["version"] == version
    code, listing = _ranker(capsys, "models", "list", "--home", str(home))
    assert listing["base"] == version and listing["champion"] is None


def test_pretrain_refuses_bad_input_with_exit_2(tiny_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _fresh(tiny_home, "bad-ws", "[window]\ndays = 4\n")
    code = main(["pretrain", "--end", "2026-01-10", "--schedule", "X,Y", "--home", str(home)])
    assert code == 2
    assert "pretrain.schedule" in capsys.readouterr().err
    # a base range before the data: the window step fails, nothing moves
    code, out = _ranker(capsys, "pretrain", "--end", "2026-01-05", "--days", "3", "--home", str(home))
    assert code == 2 and out["failed_step"] == "window" and not out["moved"]
    assert not (home / "registry" / "aliases" / "base").exists()


def test_incremental_continues_the_champion_on_new_days_and_retrains_fully_every_k(
    tiny_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = (
        '[window]\ndays = 4\n[recipe]\nschedule = "joint"\nepochs = 1\nwarm_start = "champion"\n'
        "incremental = true\nfull_retrain_every_days = 3\n" + GATE_OPEN
    )
    home = _fresh(tiny_home, "inc-ws", config)
    assert _ranker(capsys, "pretrain", "--end", "2026-01-09", "--days", "3", "--home", str(home))[0] == 0
    lineages = []
    for day in ("2026-01-09", "2026-01-10", "2026-01-11", "2026-01-12"):
        code, run = _ranker(
            capsys, "run", "--end", day, "--force-promote", "--reason", "test", "--home", str(home)
        )
        assert code == 0 and run["promoted"], run
        train = json.loads((home / "pipeline" / run["run_id"] / "train.json").read_text())
        lineages.append((train["lineage"], train["window"]["train_dates"], train["warm_start"]["source"]))
        record = json.loads((home / "registry" / "versions" / run["version"] / "version.json").read_text())
        assert record["train"]["lineage"] == train["lineage"]  # the registry keeps the lineage

    (first, dates1, src1), (second, dates2, src2), (third, dates3, _), (fourth, dates4, src4) = lineages
    assert first["kind"] == "full" and src1.startswith("base ") and len(dates1) == 4
    assert second["kind"] == "incremental" and dates2 == ["2026-01-09"] and src2.startswith("champion ")
    assert third["kind"] == "incremental" and dates3 == ["2026-01-10"]
    assert third["full_retrain_end"] == "2026-01-09" and third["parent"] != second["parent"]
    # 3 days after the last full retrain: a full retrain from the base again
    assert fourth["kind"] == "full" and len(dates4) == 4 and src4.startswith("base ")


def test_incremental_needs_a_champion_warm_start(tiny_home: Path, capsys: pytest.CaptureFixture[str]) -> None:
    home = _fresh(tiny_home, "inc-bad", '[recipe]\nwarm_start = "none"\nincremental = true\n')
    code = main(["train", "--end", "2026-01-10", "--home", str(home)])
    assert code == 2
    assert "recipe.incremental: needs warm_start = champion" in capsys.readouterr().err


def _table_optimizer(run_dir: Path) -> dict:  # type: ignore[type-arg]
    from ranking.trainer.checkpointing.checkpoint import load_checkpoint

    return load_checkpoint(run_dir / "model.pt")["table_optimizer"]  # type: ignore[no-any-return]


def test_a_warm_start_carries_the_table_optimizer_state_only_when_asked(
    tiny_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    import torch

    home = _fresh(tiny_home, "opt-ws", "[window]\ndays = 4\n")
    assert _ranker(capsys, "features", "window", "--end", "2026-01-10", "--home", str(home))[0] == 0
    common = ["--end", "2026-01-10", "--no-progress", "--no-register", "--home", str(home)]
    code, a = _ranker(
        capsys, "train", *common, "--schedule", "joint", "--epochs", "1", "--warm-start", "none"
    )
    assert code == 0
    saved = _table_optimizer(Path(a["run_dir"]))
    assert saved and all(float(v.abs().sum()) > 0 for v in saved.values())  # trained: non-zero sums

    # one frozen epoch: the tables and their optimizer are not stepped, so the final state is the start
    frozen = [*common, "--schedule", "frozen", "--epochs", "1", "--warm-start", a["run_dir"]]
    code, _ = _ranker(capsys, "train", *frozen, "--warm-start-optimizer", "--out", str(home / "c"))
    assert code == 0
    code, _ = _ranker(capsys, "train", *frozen, "--out", str(home / "f"))
    assert code == 0
    for key, value in _table_optimizer(home / "c").items():
        assert torch.equal(value, saved[key]), key
    assert all(float(v.abs().sum()) == 0 for v in _table_optimizer(home / "f").values())

    code = main(
        ["train", *frozen, "--warm-start-optimizer", "--warm-start-scope", "dense", "--out", str(home / "d")]
    )
    assert code == 2
    assert "recipe.warm_start_optimizer: needs warm_start_scope = all" in capsys.readouterr().err


def test_ranker_run_pretrains_a_first_base_when_its_recipe_needs_one(
    tiny_home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = (
        '[window]\ndays = 4\n[recipe]\nschedule = "F,J"\nwarm_start = "base"\n[pretrain]\ndays = 3\n'
        + GATE_OPEN
    )
    home = _fresh(tiny_home, "first-base", config)
    code, run = _ranker(capsys, "run", "--end", "2026-01-10", "--run-id", "r1", "--home", str(home))
    assert code in (0, 1), run
    assert run["pretrain"]["exit_code"] == 0 and run["pretrain"]["run_id"] == "r1-pretrain"
    train = json.loads((home / "pipeline" / "r1" / "train.json").read_text())
    assert train["warm_start"]["source"] == f"base {run['pretrain']['version']}"
    # its folder reads as the base it made, as a `ranker pretrain` folder does
    code, listing = _ranker(capsys, "runs", "list", "--home", str(home))
    listed = {row["run_id"]: row for row in listing["runs"]}
    assert listed["r1-pretrain"]["decision"] == "pretrained base"
    assert listed["r1-pretrain"]["candidate"] == run["pretrain"]["version"]
    # a base exists now: the next run does not pretrain again
    code, run2 = _ranker(capsys, "run", "--end", "2026-01-11", "--run-id", "r2", "--home", str(home))
    assert "pretrain" not in run2
