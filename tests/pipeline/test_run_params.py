"""`ranker run --params`: a DAG run's Params reach every step of the run (issue 25.3: they were
validated by `run` and then ignored, every step reading only the file and the defaults)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from ranking.cli.main import main
from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.core.summaries import TrainSummary, WindowSummary
from ranking.pipeline import steps


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    """Stand-ins for the window, train and gate steps that record the request each was given
    (the registry and training themselves are other tests'); the gate stops the run."""
    seen: dict[str, Any] = {}

    def window(request: Any) -> CommandResult:
        seen["window_days"] = request.days
        return CommandResult(WindowSummary.model_construct(days=request.days, window_id="w"))

    def validate(request: Any) -> CommandResult:
        from summary_examples import example_summaries

        seen["validate"] = request.config
        return CommandResult(example_summaries()["validate"])

    def training(job: Any) -> CommandResult:
        seen["train"] = {
            "epochs": job.epochs,
            "schedule": job.schedule,
            "warm_start": job.warm_start,
            "sources": job.effective_config["sources"],
        }
        return CommandResult(TrainSummary.model_construct(version="v0001", run_dir="unused", eval=None))

    def gating(request: Any) -> CommandResult:
        seen["gate"] = request.config
        raise RankerError("stopped by the test after the gate got its request")

    monkeypatch.setattr(steps, "window", window)
    monkeypatch.setattr(steps, "validate", validate)
    monkeypatch.setattr(steps, "train", training)
    monkeypatch.setattr(steps, "gate", gating)
    return seen


def test_params_reach_the_window_train_and_gate_steps(
    seen: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    (home).mkdir()
    (home / "ranker.toml").write_text('[recipe]\nepochs = 4\nschedule = "joint"\n')
    params = {
        "recipe.epochs": 2,
        "recipe.schedule": "frozen",
        "recipe.warm_start": "none",
        "window.days": 5,
        "gate.bootstrap_samples": 77,
        "gate.tolerance": 0.125,
        "validation.min_history_days": 3,
    }
    argv = ["run", "--end", "2026-01-21", "--home", str(home), "--run-id", "p-1", "--json"]
    assert main([*argv, "--params", json.dumps(params)]) == 2
    summary = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert summary["failed_step"] == "gate" and "stopped by the test" in summary["error"]
    assert seen["window_days"] == 5
    assert seen["train"]["epochs"] == 2 and seen["train"]["schedule"] == "frozen"
    assert seen["train"]["warm_start"] == "none"
    assert seen["train"]["sources"]["recipe.epochs"] == "param"
    assert seen["gate"].bootstrap_samples == 77 and seen["gate"].tolerance == 0.125
    assert seen["validate"].min_history_days == 3


def test_without_params_the_steps_read_the_config_file(
    seen: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = tmp_path / "home"
    home.mkdir()
    (home / "ranker.toml").write_text(
        '[recipe]\nepochs = 4\nschedule = "joint"\nwarm_start = "none"\n[gate]\nbootstrap_samples = 33\n'
    )
    main(["run", "--end", "2026-01-21", "--home", str(home), "--run-id", "p-2", "--json"])
    capsys.readouterr()
    assert seen["train"]["epochs"] == 4 and seen["train"]["schedule"] == "joint"
    assert seen["train"]["sources"]["recipe.epochs"].startswith("file:")
    assert seen["gate"].bootstrap_samples == 33


def test_a_first_base_keeps_its_own_recipe_under_the_runs_params(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Params sit above flags: passed whole to the first base's pretrain, a run's recipe (remedy,
    schedule, epochs, window) became the weekly base's. The base gets only what it shares."""
    jobs: dict[str, Any] = {}

    def training(job: Any) -> CommandResult:
        jobs[job.run_id] = (job.remedy, job.days, job.schedule, job.epochs, job.batch_size)
        return CommandResult(TrainSummary.model_construct(version="v0001", run_dir="unused", eval=None))

    def gating(request: Any) -> CommandResult:
        raise RankerError("stopped by the test")

    from summary_examples import example_summaries

    monkeypatch.setattr(
        steps, "window", lambda r: CommandResult(WindowSummary.model_construct(days=r.days, window_id="w"))
    )
    monkeypatch.setattr(steps, "validate", lambda r: CommandResult(example_summaries()["validate"]))
    monkeypatch.setattr(steps, "train", training)
    monkeypatch.setattr(steps, "gate", gating)
    home = tmp_path / "home"
    home.mkdir()
    params = {
        "recipe.remedy": "meda",
        "recipe.schedule": "delayed",
        "recipe.epochs": 3,
        "recipe.batch_size": 256,  # shared with the base (BASE_INHERITS)
        "window.days": 5,
        "pretrain.days": 30,
    }
    argv = ["run", "--end", "2026-03-01", "--home", str(home), "--run-id", "r1", "--json"]
    main([*argv, "--params", json.dumps(params)])
    capsys.readouterr()
    assert jobs["r1"] == ("meda", 5, "delayed", 3, 256)
    assert jobs["r1-pretrain"] == ("none", 30, "joint", 1, 256)
