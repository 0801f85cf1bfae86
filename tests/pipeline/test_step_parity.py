"""Parity at the typed layer (issue 22): a step run by `ranker run` gets the same request as the
same step run on its own — by the DAG (`ranker step NAME`, the run's request and its Params as
`--params`) or by a person (`ranker train`, with the run's flags as its own) — so whoever starts
a step, the step is the same."""

from __future__ import annotations

import dataclasses
import io
import json
from pathlib import Path
from typing import Any

import pytest
from summary_examples import example_summaries

from ranking.cli.main import main
from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.core.summaries import TrainSummary, WindowSummary
from ranking.pipeline import steps

CONFIG = '[recipe]\nschedule = "joint"\nepochs = 3\nremedy = "meda"\n[gate]\nbootstrap_samples = 50\n'
PARAMS = {"recipe.seed": 5, "window.min_coverage": 0.5, "gate.ci_level": 0.8, "validation.rate_max_z": 4.0}


@pytest.fixture
def requests_seen(monkeypatch: pytest.MonkeyPatch) -> dict[str, Any]:
    seen: dict[str, Any] = {}

    def window(request: Any) -> CommandResult:
        seen["window"] = request
        return CommandResult(WindowSummary.model_construct(days=request.days, window_id="w"))

    def validate(request: Any) -> CommandResult:
        from summary_examples import example_summaries

        seen["validate"] = request
        return CommandResult(example_summaries()["validate"])

    def train(job: Any) -> CommandResult:
        seen["train"] = job
        return CommandResult(TrainSummary.model_construct(version="v0001", run_dir="unused", eval=None))

    def gate(request: Any) -> CommandResult:
        seen["gate"] = request
        raise RankerError("stopped by the test")

    monkeypatch.setattr(steps, "window", window)
    monkeypatch.setattr(steps, "validate", validate)
    monkeypatch.setattr(steps, "train", train)
    monkeypatch.setattr(steps, "gate", gate)
    return seen


def _home(tmp_path: Path) -> Path:
    home = tmp_path / "home"
    home.mkdir()
    (home / "ranker.toml").write_text(CONFIG)
    return home


def test_ranker_run_and_the_dags_steps_build_the_same_requests(
    requests_seen: dict[str, Any],
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    home = _home(tmp_path)
    params = {**PARAMS, "window.days": 7, "gate.tolerance": 0.2}  # a DAG run's Params
    common = ["--home", str(home), "--run-id", "R", "--params", json.dumps(params), "--json"]
    main(["run", "--end", "2026-03-01", *common])
    by_run = dict(requests_seen)
    requests_seen.clear()

    # the DAG's tasks: the same run id, request and Params; the gate takes train's result on stdin
    request = ["--request", json.dumps({"window_end": "2026-03-01", "run_id": "R", "actor": "airflow"})]
    for name in ("build_window", "validate_window", "train"):
        main(["step", name, *request, *common])
    trained = example_summaries()["train"].model_copy(update={"version": "v0001"}).body()
    monkeypatch.setattr("sys.stdin", io.StringIO(json.dumps({"train": trained})))
    main(["step", "gate", *request, *common])
    capsys.readouterr()

    assert by_run["window"] == requests_seen["window"]
    assert by_run["window"].days == 7 and by_run["window"].checks.min_coverage == 0.5
    assert by_run["validate"] == requests_seen["validate"]
    assert by_run["validate"].days == 7 and by_run["validate"].config.rate_max_z == 4.0
    assert by_run["gate"] == requests_seen["gate"]
    assert by_run["gate"].config.tolerance == 0.2 and by_run["gate"].config.ci_level == 0.8
    assert by_run["gate"].config.bootstrap_samples == 50
    run_job, step_job = by_run["train"], requests_seen["train"]
    assert run_job == step_job  # TrainJob equality leaves the recorded provenance out
    assert (run_job.schedule, run_job.epochs, run_job.remedy, run_job.seed) == ("joint", 3, "meda", 5)
    # and the provenance of what training reads agrees: each value and its source, as recorded
    # beside the run
    run_record, step_record = run_job.effective_config, step_job.effective_config
    assert run_record["sources"]["recipe.seed"] == "param" and run_record["sources"]["window.days"] == "param"
    for section in ("recipe", "window", "features", "pretrain"):
        assert run_record["config"][section] == step_record["config"][section], section
        assert {k: v for k, v in run_record["sources"].items() if k.startswith(section + ".")} == {
            k: v for k, v in step_record["sources"].items() if k.startswith(section + ".")
        }, section


def test_the_parity_check_sees_a_request_that_differs(
    requests_seen: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    home = _home(tmp_path)
    common = ["--home", str(home), "--run-id", "R", "--json"]
    main(["run", "--end", "2026-03-01", *common])
    by_run = requests_seen["train"]
    main(["train", "--end", "2026-03-01", "--resume", "--seed", "6", *common])
    capsys.readouterr()
    assert by_run != requests_seen["train"]
    assert dataclasses.replace(by_run, seed=6) == requests_seen["train"]
