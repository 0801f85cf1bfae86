"""`ranker runs list`: one row per run folder, read through the step summaries' models, each
decision kind named, a broken or older folder shown rather than a crash."""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path

import pytest
from summary_examples import example_summaries

from ranking.cli.main import main
from ranking.core.summaries import (
    FirstBase,
    GateSummary,
    RunSummary,
    StepError,
    StepSummary,
    TrainSummary,
    ValidationBrief,
)
from ranking.core.workspace import Workspace
from ranking.pipeline.runs import list_runs

DAY = dt.date(2026, 12, 1)


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")


def write(ws: Workspace, run_id: str, *summaries: StepSummary) -> None:
    for s in summaries:
        path = ws.step_summary_path(run_id, str(s.step))
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(json.dumps({**s.body(), "run_id": run_id}))


def ranker(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str]:
    code = main(list(argv))
    return code, capsys.readouterr().out


def with_config(ws: Workspace, train: TrainSummary, run_id: str, **recipe: object) -> TrainSummary:
    """The train summary pointing at an effective config whose recipe came from a file."""
    path = ws.root / "runs" / run_id / "effective_config.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    recipe_file = str(ws.root / "recipes" / "night.toml")
    path.write_text(
        json.dumps(
            {
                "config": {"recipe": recipe},
                "sources": {f"recipe.{k}": f"file:{recipe_file}" for k in recipe},
                "files": [recipe_file],
            }
        )
    )
    return train.model_copy(update={"effective_config": str(path)})


def run(**update: object) -> RunSummary:
    base = example_summaries()["run"]
    assert isinstance(base, RunSummary)
    return base.model_copy(update=update)


def rows(ws: Workspace) -> dict[str, dict]:  # type: ignore[type-arg]
    return {r.run_id: r.model_dump(mode="json") for r in list_runs(ws.pipeline).runs}


def test_each_decision_kind(ws: Workspace) -> None:
    ex = example_summaries()
    steps = [ex[s] for s in ("window", "validate", "gate", "decide")]
    assert isinstance(ex["train"], TrainSummary)
    train = with_config(
        ws, ex["train"], "promoted", schedule="F,J,J", warm_start="champion", history_features=True
    )
    write(ws, "promoted", *steps, train, ex["promote"], ex["metrics"], run())
    write(ws, "forced", run(forced=True))
    write(
        ws, "rejected", run(decision="reject", promoted=False, champion="v0002", failed_checks=["reference"])
    )
    write(ws, "dry", run(dry_run=True, promoted=False, kept_champion=True, champion="v0002"))
    stopped = ValidationBrief(verdict="fail", counts={"fail": 1}, failing=["drift"], report="r.md")
    write(
        ws,
        "stopped",
        run(
            decision=None, promoted=False, exit_code=2, error="x", failed_step="validate", validation=stopped
        ),
    )
    write(ws, "crashed", run(decision=None, promoted=False, exit_code=2, error="x", failed_step="train"))
    # the DAG's tasks record each step, with no run.json: a failed train, and one still going
    write(ws, "dag-failed", ex["window"], StepError(step="train", exit_code=2, error="disk full"))
    write(ws, "dag-rejected", ex["window"], ex["train"], ex["gate"], ex["reject"])
    write(ws, "dag-going", ex["window"])

    got = rows(ws)
    assert {k: v["decision"] for k, v in got.items()} == {
        "promoted": "promoted",
        "forced": "promoted (forced)",
        "rejected": "rejected by the gate",
        "dry": "kept the champion (dry run)",
        "stopped": "stopped by data validation",
        "crashed": "failed at train",
        "dag-failed": "failed at train",
        "dag-rejected": "rejected by the gate",
        "dag-going": "in progress",
    }
    gate = ex["gate"]
    assert isinstance(gate, GateSummary)
    assert got["promoted"]["save_hit_at_3"] == gate.candidate.save_hit_at_3
    assert got["promoted"]["champion"] == "v0003" and got["rejected"]["champion"] == "v0002"
    assert got["promoted"]["recipe"] == {
        "schedule": "F,J,J",
        "warm_start": "champion",
        "history_features": True,
        "file": str(ws.root / "recipes" / "night.toml"),
    }
    # no effective config on disk (pruned, or older code): the train summary's own, history unknown
    assert got["dag-rejected"]["recipe"]["schedule"] == ex["train"].schedule_spec  # type: ignore[attr-defined]
    assert got["dag-rejected"]["recipe"]["history_features"] is None
    assert got["dag-going"]["save_hit_at_3"] is None and got["dag-going"]["champion"] is None
    assert all(r["day"] == DAY.isoformat() for r in got.values())


def test_pretrain_folder(ws: Workspace) -> None:
    ex = example_summaries()
    from ranking.pipeline.pretrain import PretrainSummary

    base = PretrainSummary(
        for_end=DAY,
        base_range=(DAY - dt.timedelta(days=30), DAY - dt.timedelta(days=10)),
        days=20,
        schedule="joint",
        epochs=1,
        version="v0001",
        previous_base=None,
        moved=True,
        steps=[],
        duration_seconds=1.0,
    )
    write(ws, "p1", ex["window"], base)
    write(ws, "r1", run(pretrain=FirstBase(run_id="p1", exit_code=0, version="v0001", error=None)))
    got = rows(ws)
    assert got["p1"]["decision"] == "pretrained base" and got["p1"]["candidate"] == "v0001"
    assert got["p1"]["recipe"]["schedule"] == "joint"
    assert got["r1"]["decision"] == "promoted"


def test_broken_and_older_files_are_rows_not_tracebacks(
    ws: Workspace, capsys: pytest.CaptureFixture[str]
) -> None:
    ex = example_summaries()
    write(ws, "torn", ex["window"], run())
    (ws.pipeline / "torn" / "gate.json").write_text('{"step": "gate", "deci')
    write(ws, "odd", ex["window"])
    (ws.pipeline / "odd" / "train.json").write_text(json.dumps({"step": "train", "schedule": 3}))
    old = run().body()
    for newer in ("validation", "failed_checks", "pretrain", "failed_step"):
        old.pop(newer, None)
    (ws.pipeline / "old").mkdir()
    (ws.pipeline / "old" / "run.json").write_text(json.dumps(old))

    got = rows(ws)
    assert got["torn"]["decision"] == "promoted"
    assert got["torn"]["problems"] == ["gate.json: not readable JSON (JSONDecodeError)"]
    assert got["odd"]["problems"][0].startswith("train.json: not a train summary")
    assert got["odd"]["decision"] == "in progress"
    assert got["old"]["decision"] == "promoted" and got["old"]["problems"] == []

    code, out = ranker(capsys, "runs", "list", "--home", str(ws.root))
    assert code == 0
    assert "torn: gate.json: not readable JSON" in out
    assert "Traceback" not in out


def test_sorted_json_shape_limit_and_day(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    for run_id, day in (("b", DAY), ("a", DAY), ("c", DAY - dt.timedelta(days=1))):
        write(ws, run_id, run(end=day))
    code, out = ranker(capsys, "runs", "list", "--home", str(ws.root), "--json")
    body = json.loads(out)
    assert code == 0 and body["total"] == 3
    assert [r["run_id"] for r in body["runs"]] == ["c", "a", "b"]
    assert set(body["runs"][0]) == {
        "run_id",
        "day",
        "kind",
        "recipe",
        "decision",
        "candidate",
        "save_hit_at_3",
        "champion",
        "problems",
    }
    _, out = ranker(capsys, "runs", "list", "--home", str(ws.root), "--json", "--limit", "2")
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["a", "b"]
    _, out = ranker(
        capsys, "runs", "list", "--home", str(ws.root), "--json", "--day", str(DAY - dt.timedelta(days=1))
    )
    assert [r["run_id"] for r in json.loads(out)["runs"]] == ["c"]

    code, out = ranker(capsys, "runs", "list", "--home", str(ws.root), "--limit", "1")
    lines = out.splitlines()
    assert code == 0 and lines[0].split()[:2] == ["RUN", "DAY"]
    assert lines[1].split()[:2] == ["b", DAY.isoformat()] and "(1 of 3 runs)" in out


def test_empty_workspace(ws: Workspace, capsys: pytest.CaptureFixture[str]) -> None:
    code, out = ranker(capsys, "runs", "list", "--home", str(ws.root))
    assert code == 0 and out.startswith("no runs in ")


@pytest.mark.parametrize("flag", [("--limit", "0"), ("--limit", "x"), ("--day", "2026-13-01")])
def test_bad_flags_exit_2(ws: Workspace, capsys: pytest.CaptureFixture[str], flag: tuple[str, str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["runs", "list", "--home", str(ws.root), *flag])
    assert exited.value.code == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and flag[0] in err[0]
