"""The blessing policy: which verdicts let a version be promoted, and the status it shows."""

from __future__ import annotations

from typing import Any

from ranking.registry.blessing import (
    AliasPast,
    alias_pasts,
    blessing_digest,
    blessing_problem,
    version_status,
)
from ranking.registry.records import AliasEvent, Verdict

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
    def status(
        verdict: Verdict | None,
        *,
        complete: bool = True,
        champion: bool = False,
        past: AliasPast | None = None,
    ) -> str:
        return version_status(
            complete=complete, is_champion=champion, verdict=verdict, champion="v0001", past=past
        )

    assert status(v(decision="pass"), complete=False) == "incomplete"
    assert status(v(decision="reject"), champion=True) == "champion"
    assert status(v(decision="reject", rejected=REJECTED)) == "rejected-by-gate"
    assert status(v(decision="reject")) == "rejected-by-gate"  # a dry run records no rejection
    assert status(v(decision="pass", rejected=REJECTED)) == "rejected-by-operator"
    assert status(v(rejected=REJECTED)) == "rejected-by-operator"
    assert status(v(decision="pass", champion_version="v0001")) == "promotable"
    assert status(v(decision="pass", champion_version=None)) == "needs-regate"
    assert status(None) == "ungated"
    # the aliases' histories come before any verdict: a forced champion's own gate said reject
    assert status(v(decision="reject"), past=AliasPast(left_champion_by="promote")) == "former-champion"
    assert status(v(decision="pass"), past=AliasPast(left_champion_by="rollback")) == "rolled-back-from"
    assert status(None, past=AliasPast(is_base=True, was_base=True)) == "base"
    assert status(None, past=AliasPast(was_base=True)) == "former-base"


def _event(
    seq: int, frm: str | None, to: str, action: str = "promote", alias: str = "champion"
) -> AliasEvent:
    return AliasEvent(seq, alias, frm, to, action, "2026-01-01T00:00:00Z", None, "r", "who")


def test_alias_pasts_read_every_move() -> None:
    champion = [
        _event(1, None, "v0001"),
        _event(2, "v0001", "v0002"),
        _event(3, "v0002", "v0001", "rollback"),
        _event(4, "v0001", "v0002", "rollback"),  # --to v0002: it is the champion again
        _event(5, "v0002", "v0003"),
    ]
    pasts = alias_pasts(
        champion, [_event(1, None, "v0004", alias="base"), _event(2, "v0004", "v0005", alias="base")]
    )
    assert {v: p.left_champion_by for v, p in pasts.items() if p.left_champion_by} == {
        "v0001": "rollback",  # rolled back from once: a rollback without --to skips it for good
        "v0002": "rollback",
    }
    assert "v0003" not in pasts  # the champion
    assert (pasts["v0004"].is_base, pasts["v0004"].was_base) == (False, True)
    assert (pasts["v0005"].is_base, pasts["v0005"].was_base) == (True, True)
    replaced = alias_pasts(champion[:2], [])
    assert replaced["v0001"].left_champion_by == "promote" and "v0002" not in replaced
