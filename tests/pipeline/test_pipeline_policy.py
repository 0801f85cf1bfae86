"""The promotion policy: which branch follows the gate, and the reason recorded with it."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from ranking.pipeline import policy as p

END = "2026-01-24"
PLAN: dict[str, Any] = {"end": END, "run_id": "r1", "dry_run": False, "force_promote": False, "reason": ""}


def decide(
    decision: str, trained_for: str | None = None, failed: tuple[str, ...] = (), **plan: Any
) -> p.Decision:
    return p.decide(
        gate_decision=decision,
        failed_checks=list(failed),
        champion_trained_for=trained_for,
        **{**PLAN, **plan},
    )


@pytest.mark.parametrize(
    ("decision", "plan_change", "branch"),
    [
        ("pass", {}, p.PROMOTE),
        ("reject", {}, p.RECORD_REJECTION),
        ("reject", {"force_promote": True, "reason": "incident 7"}, p.PROMOTE),
        ("pass", {"dry_run": True}, p.KEEP_CHAMPION),
        ("reject", {"dry_run": True}, p.KEEP_CHAMPION),
    ],
)
def test_gate_branch(decision: str, plan_change: dict[str, Any], branch: str) -> None:
    assert decide(decision, **plan_change).branch == branch


def test_a_rerun_of_a_date_that_already_promoted_keeps_the_champion() -> None:
    kept = decide("pass", trained_for=END)
    assert kept.branch == p.KEEP_CHAMPION and END in kept.reason and not kept.force
    assert (
        decide("pass", trained_for=END, force_promote=True, reason="retrained on fixed data").branch
        == p.PROMOTE
    )
    assert decide("pass", trained_for="2026-01-23").branch == p.PROMOTE


def test_promotion_reason_forces_only_past_a_rejection() -> None:
    passed = decide("pass")
    assert not passed.force and "gate passed" in passed.reason and END in passed.reason
    assert "(run r1)" in passed.reason
    forced = decide("reject", failed=("relative_change",), force_promote=True, reason="incident 7")
    assert forced.force and "incident 7" in forced.reason and "relative_change" in forced.reason
    # forcing a model that passed anyway is an ordinary promotion, with the reason added
    both = decide("pass", force_promote=True, reason="incident 7")
    assert not both.force and "gate passed" in both.reason and both.reason.endswith("; incident 7")


def test_rejection_reason_lists_the_failed_checks() -> None:
    rejected = decide("reject", failed=("value_floor", "auc_drop"))
    assert rejected.branch == p.RECORD_REJECTION and "value_floor, auc_drop" in rejected.reason
    assert "unknown checks" in decide("reject").reason
    assert "(run" not in decide("reject", run_id=None).reason


def test_contradicting_requests_are_named() -> None:
    assert p.request_problem(dry_run=False, force_promote=False, reason=None) is None
    assert "needs --reason" in str(p.request_problem(dry_run=False, force_promote=True, reason="  "))
    assert "contradict" in str(p.request_problem(dry_run=True, force_promote=True, reason="x"))
    assert p.request_problem(dry_run=True, force_promote=False, reason=None) is None


def test_the_branches_are_the_dag_task_ids() -> None:
    assert p.BRANCHES == ("promote", "record_rejection", "keep_champion")
    assert {f.name for f in dataclasses.fields(decide("pass"))} == {"branch", "reason", "force"}
