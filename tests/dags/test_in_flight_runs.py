"""A DAG run in flight across the change to the declared graph (issue 33, deliver 1) still
finishes: the values its earlier tasks left are read as they were written then — the decide task
answered with the branch's task id and pushed the decision under an XCom key of its own; the gate
task copied the candidate's version into its report."""

from __future__ import annotations

from typing import Any

import pytest
from ranker_dags import retrain_tasks
from ranker_dags.retrain_tasks import LEGACY_DECISION_KEY, _upstream_value

DECISION = {"branch": "promote", "version": "v0007", "reason": "gate passed", "force": False}


class OldRun:
    """The task instance of a run whose decide task ran before the change."""

    def __init__(self) -> None:
        self.pulled: list[tuple[str, str]] = []

    def xcom_pull(self, task_ids: str, key: str = "return_value", **_: Any) -> Any:
        self.pulled.append((task_ids, key))
        return DECISION if (task_ids, key) == ("decide", LEGACY_DECISION_KEY) else None


def test_the_old_decide_answer_is_read_from_its_decision_key(monkeypatch: pytest.MonkeyPatch) -> None:
    ti = OldRun()
    monkeypatch.setattr(retrain_tasks, "get_current_context", lambda: {"ti": ti})
    assert _upstream_value("decide", "promote") == DECISION  # the branch id it returned
    assert ti.pulled == [("decide", LEGACY_DECISION_KEY)]
    assert _upstream_value("decide", DECISION) == DECISION  # a run of the graph: its return value


def test_the_old_gate_report_is_read_without_its_copied_candidate() -> None:
    old = {"decision": "pass", "candidate": {"version": "v0007"}, "candidate_version": "v0007"}
    assert _upstream_value("gate", old) == {"decision": "pass", "candidate": {"version": "v0007"}}
