"""The step summaries the DAG reads, against their exported JSON Schema (issue 22).

This environment (.venv-airflow) has no ``ranking`` package: the contract reaches the DAG as
docs/schemas/step-summaries.schema.json, generated from ranking/core/summaries.py (`make schema`;
tests/core/test_summaries.py keeps it fresh). The schema is valid, its examples validate, the
summaries the real ``ranker`` prints validate, and the DAG's own decisions accept the examples.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import jsonschema
import pytest
from dag_test_paths import RANKER_BIN, REPO
from ranker_dags import decisions as d
from ranker_dags.retrain_graph import RETRAIN

SCHEMA_PATH = REPO / "docs" / "schemas" / "step-summaries.schema.json"


@pytest.fixture(scope="module")
def schema() -> dict[str, Any]:
    loaded: dict[str, Any] = json.loads(SCHEMA_PATH.read_text())
    jsonschema.Draft202012Validator.check_schema(loaded)
    return loaded


def _validator(schema: dict[str, Any]) -> jsonschema.Draft202012Validator:
    return jsonschema.Draft202012Validator(schema, format_checker=jsonschema.FormatChecker())


def _examples(schema: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {
        ex["step"]: ex for definition in schema["$defs"].values() for ex in definition.get("examples", [])
    }


def _ranker(*argv: str) -> tuple[int, dict[str, Any]]:
    proc = subprocess.run([str(RANKER_BIN), *argv, "--json"], capture_output=True, text=True, timeout=300)
    return proc.returncode, json.loads(proc.stdout.strip().splitlines()[-1])


def test_every_step_has_a_valid_example(schema: dict[str, Any]) -> None:
    examples = _examples(schema)
    assert {"freshness", "window", "train", "gate", "decide", "promote", "reject", "metrics", "run"} <= set(
        examples
    )
    validator = _validator(schema)
    for step, example in examples.items():
        errors = [e.message for e in validator.iter_errors(example)]
        assert not errors, (step, errors)


def test_a_summary_with_a_wrong_field_does_not_validate(schema: dict[str, Any]) -> None:
    validator = _validator(schema)
    window = _examples(schema)["window"]
    assert not validator.is_valid({**window, "rows_train": "many"})
    assert not validator.is_valid({**window, "surprise": 1})  # undeclared fields are refused
    assert not validator.is_valid({k: v for k, v in window.items() if k != "end"})


def test_the_dag_decisions_accept_the_contract(schema: dict[str, Any]) -> None:
    """The DAG reads the summaries as dicts: the typed contract's examples pass its checks."""
    examples = _examples(schema)
    lines = d.gate_check_lines(examples["gate"])
    assert any(examples["gate"]["checks"][0]["name"] in line for line in lines), lines
    assert d.chosen_branch(RETRAIN["decide"], examples["decide"]) == "promote"


@pytest.mark.slow
def test_what_the_real_ranker_prints_validates(schema: dict[str, Any], tmp_path: Path) -> None:
    validator = _validator(schema)
    home = str(tmp_path / "home")
    small = ["--users", "50", "--pins", "60", "--requests-per-day", "20"]
    code, synth = _ranker("data", "synth", "--start", "2026-01-01", "--days", "3", *small, "--home", home)
    assert code == 0, synth
    code, fresh = _ranker("features", "freshness", "--end", "2026-01-03", "--home", home, "--run-id", "r1")
    assert code == 0 and fresh["step"] == "freshness", fresh
    assert not [e.message for e in validator.iter_errors(fresh)]
    recorded = json.loads((Path(home) / "pipeline" / "r1" / "freshness.json").read_text())
    assert not [e.message for e in validator.iter_errors(recorded)]
    code, failed = _ranker("features", "freshness", "--end", "2026-02-01", "--home", home)
    assert code == 2 and failed["error"], failed  # a step that failed: {step, exit_code, error, error_type}
    assert not [e.message for e in validator.iter_errors(failed)]
