"""The blessing policy: which verdicts let a version be promoted, and the status it shows."""

from __future__ import annotations

from typing import Any

from ranking.registry.blessing import blessing_digest, blessing_problem, version_status
from ranking.registry.records import Verdict

REJECTED = {"when": "2026-01-22T08:00:00Z", "reason": "on-call"}


def v(**fields: Any) -> Verdict:
    return Verdict.model_validate(fields)


def test_blessing_problem_cases() -> None:
    assert blessing_problem(None, None) == "it has not been through the gate"
    assert blessing_problem(v(decision="pass", champion_version="v0001"), "v0001") is None
    assert "run the gate again" in str(
        blessing_problem(v(decision="pass", champion_version="v0001"), "v0002")
    )


def test_negative_verdicts_name_the_problem() -> None:
    assert blessing_problem(v(decision="pass", rejected=REJECTED), None) == "it was rejected"
    assert blessing_problem(v(decision="reject", failed_checks=["auc_drop"]), None) == (
        "the gate rejected it (auc_drop)"
    )
    assert blessing_problem(v(decision="reject"), None) == "the gate rejected it (see its gate report)"


def test_blessing_digest_keeps_what_the_event_records() -> None:
    verdict = v(decision="pass", champion_version="v0001", eval_date="2026-01-21", checks=[1, 2])
    digest = blessing_digest(verdict, None)
    assert digest["decision"] == "pass" and digest["eval_date"] == "2026-01-21" and digest["problem"] is None
    assert "checks" not in digest
    assert blessing_digest(None, "it has not been through the gate") == {
        "decision": None,
        "problem": "it has not been through the gate",
    }


def test_version_status() -> None:
    def status(verdict: Verdict | None, *, complete: bool = True, champion: bool = False) -> str:
        return version_status(complete=complete, is_champion=champion, verdict=verdict, champion="v0001")

    assert status(v(decision="pass"), complete=False) == "incomplete"
    assert status(v(decision="reject"), champion=True) == "champion"
    assert status(v(decision="pass", rejected=REJECTED)) == "rejected"
    assert status(v(decision="pass", champion_version="v0001")) == "blessed"
    assert status(v(decision="pass", champion_version=None)) == "blessed-stale"
    assert status(v(decision="reject")) == "gate-rejected"
    assert status(None) == "candidate"
