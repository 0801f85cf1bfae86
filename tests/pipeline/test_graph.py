"""The daily retrain declared once (issue 33, deliver 1): the graph is well formed, its export
(what the DAG builds its tasks from) is fresh, and `ranker step` refuses bad input in one line."""

from __future__ import annotations

import io
import json
import typing
from pathlib import Path

import pytest

from ranking.cli.main import main
from ranking.core.summaries import STEP_MODELS, DecideSummary
from ranking.pipeline import graph
from ranking.pipeline.graph import RETRAIN, Graph, Step


def test_the_export_the_dag_reads_is_fresh(tmp_path: Path) -> None:
    assert graph.main(["--check"]) == 0, "dags/ranker_dags/retrain_graph.json is stale: run `make schema`"
    stale = tmp_path / "graph.json"
    stale.write_text("{}")
    assert graph.main(["--check", "--out", str(stale)]) == 1


def test_each_recorded_step_returns_the_model_of_its_summary() -> None:
    for step in RETRAIN:
        if step.summary is not None:
            assert STEP_MODELS[step.summary] is step.result, step.name


def test_the_decision_chooses_between_the_steps_of_its_branches() -> None:
    decide = RETRAIN["decide"]
    answers = typing.get_args(DecideSummary.model_fields["branch"].annotation)
    assert sorted(answers) == sorted(decide.branches)
    assert all(RETRAIN.branch_of(name) is decide for name in decide.branches)


def _step(name: str, **kw: object) -> Step:
    return Step(name, "", summary=None, label=None, result=None, call=None, **kw)  # type: ignore[arg-type]


def test_a_malformed_graph_is_refused() -> None:
    with pytest.raises(ValueError, match="a needs b, not declared before it"):
        Graph((_step("a", after=("b",)), _step("b")))
    with pytest.raises(ValueError, match="declared twice"):
        Graph((_step("a"), _step("a")))
    with pytest.raises(ValueError, match="chooses branches but its result names none"):
        Graph((_step("a", branches=("b",)), _step("b")))


def _step_cli(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, stdin: str, *argv: str
) -> str:
    monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    assert main(["step", *argv]) == 2
    err = capsys.readouterr().err.strip()
    assert "\n" not in err and "Traceback" not in err
    return err


def test_ranker_step_refuses_bad_input_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    common = ["--home", str(tmp_path), "--run-id", "R", "--json"]
    request = ["--request", json.dumps({"window_end": "2026-03-01"})]
    bad_day = json.dumps({"window_end": "2026-02-30"})
    assert "not a retrain request" in _step_cli(
        capsys, monkeypatch, "", "gate", "--request", bad_day, *common
    )
    assert "takes train on stdin" in _step_cli(capsys, monkeypatch, "", "gate", *request, *common)
    assert "not JSON" in _step_cli(capsys, monkeypatch, "{", "gate", *request, *common)
    assert "train's result is not a TrainSummary" in _step_cli(
        capsys, monkeypatch, json.dumps({"train": {"version": "v1"}}), "gate", *request, *common
    )
    no_run_id = ["--home", str(tmp_path), "--json"]
    assert "give --run-id" in _step_cli(capsys, monkeypatch, "", "build_window", *request, *no_run_id)
    assert not (tmp_path / "pipeline").exists()  # nothing recorded for a refused step


def test_the_window_waits_until_its_eval_day_has_landed() -> None:
    import datetime as dt

    from ranking.core.summaries import FreshnessSummary
    from ranking.pipeline.steps import not_landed

    end = dt.date(2026, 1, 24)
    assert not_landed(FreshnessSummary.model_construct(latest_source_date=end), end) is None
    assert (
        not_landed(FreshnessSummary.model_construct(latest_source_date=end + dt.timedelta(days=1)), end)
        is None
    )
    late = not_landed(FreshnessSummary.model_construct(latest_source_date=end - dt.timedelta(days=1)), end)
    assert late is not None and "has not landed" in late
