"""The DAGs check ids with the same pattern strings as the project (ranking/core/ids.py), which this
environment cannot import: the file is read as text (ast), not imported."""

from __future__ import annotations

import ast
import random
import re
import string

import pytest
from dag_test_paths import REPO

IDS = REPO / "ranking" / "core" / "ids.py"


def project_constants() -> dict[str, str]:
    tree = ast.parse(IDS.read_text())
    found: dict[str, str] = {}
    for node in tree.body:
        if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
            for target in node.targets:
                if isinstance(target, ast.Name) and isinstance(node.value.value, str):
                    found[target.id] = node.value.value
    return found


def test_the_patterns_are_the_same_strings() -> None:
    from ranker_dags.params import RUN_ID_PATTERN, VERSION_PATTERN

    project = project_constants()
    assert project["VERSION_ID_PATTERN"] == VERSION_PATTERN
    assert project["RUN_ID_PATTERN"] == RUN_ID_PATTERN


def test_the_comparison_reads_the_real_file() -> None:
    project = project_constants()
    assert {"VERSION_ID_PATTERN", "RUN_ID_PATTERN"} <= set(project)
    assert re.fullmatch(project["VERSION_ID_PATTERN"], "v0003") and not re.fullmatch(
        project["VERSION_ID_PATTERN"], "v1"
    )


def test_the_run_id_sanitizer_keeps_exactly_the_pattern_alphabet() -> None:
    from ranker_dags.params import _UNSAFE_RUN_ID, RUN_ID_PATTERN

    for c in map(chr, range(128)):
        allowed = re.fullmatch(RUN_ID_PATTERN, "a" + c) is not None
        assert allowed == (_UNSAFE_RUN_ID.search(c) is None), repr(c)


def test_derived_run_ids_always_match_the_pattern() -> None:
    from ranker_dags.params import RUN_ID_PATTERN, PlanError, ranker_run_id

    rng = random.Random(7)
    alphabet = string.printable + "éß\u200b/\\"
    for _ in range(2000):
        raw = "".join(rng.choice(alphabet) for _ in range(rng.randint(0, 200)))
        try:
            derived = ranker_run_id(raw)
        except PlanError:
            continue
        assert re.fullmatch(RUN_ID_PATTERN, derived), (raw, derived)


@pytest.mark.parametrize("bad", ["v1", "v12", "v0003\n", "v１２３４", "3", "v1/../../etc", "v0000000001"])
def test_the_rollback_dag_refuses_ids_the_registry_refuses(bad: str) -> None:
    from airflow.sdk.exceptions import ParamValidationError
    from airflow.serialization.serialized_objects import DagSerialization
    from ranker_dags.settings import OrchestrationSettings
    from ranker_rollback import build_rollback_dag

    dag = build_rollback_dag(OrchestrationSettings.from_env({}))
    params = DagSerialization.deserialize_dag(DagSerialization.serialize_dag(dag)).params
    assert params.deep_merge({"reason": "x", "to_version": "v0003"}).validate()["to_version"] == "v0003"
    with pytest.raises(ParamValidationError):
        params.deep_merge({"reason": "x", "to_version": bad}).validate()
