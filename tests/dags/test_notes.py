"""The note a retrain run carries in Airflow's runs list (ranker_dags/notes.py): its text per
outcome, and how it is set through the REST API (a recorded HTTP exchange, no server)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, ClassVar

import httpx
import pytest
from ranker_dags import notes
from ranker_dags.notes import ApiAccess, RunFacts, run_note, set_note

OK = "success"


def _check(name: str, passed: bool, value: float, threshold: float) -> dict[str, Any]:
    return {"name": name, "passed": passed, "value": value, "threshold": threshold, "detail": "d"}


def _gate(decision: str, champion: bool = True) -> dict[str, Any]:
    checks = [_check("save_hit_at_3_floor", True, 0.163, 0.0)]
    if champion:
        checks.append(
            _check("save_hit_at_3_change", decision == "pass", -0.041 if decision != "pass" else 0.018, -0.01)
        )
    return {
        "decision": decision,
        "checks": checks,
        "failed_checks": [c["name"] for c in checks if not c["passed"]],
        "candidate": {"version": "v0013", "save_hit_at_3": 0.163},
        "champion": {"version": "v0012", "save_hit_at_3": 0.170} if champion else None,
        "relative_change": (-0.041 if decision != "pass" else 0.018) if champion else None,
    }


def _decide(branch: str, decision: str, dry_run: bool = False) -> dict[str, Any]:
    return {
        "branch": branch,
        "decision": decision,
        "dry_run": dry_run,
        "version": "v0013",
        "champion": "v0012",
        "reason": "the gate rejected it",
    }


def _states(**done: str) -> dict[str, str | None]:
    states: dict[str, str | None] = {
        "plan": OK,
        "check_freshness": OK,
        "build_window": OK,
        "validate_window": OK,
        "train": OK,
        "gate": OK,
        "decide": OK,
        "promote": "skipped",
        "record_rejection": "skipped",
        "keep_champion": "skipped",
    }
    return {**states, **done}


def test_a_rejection_reads_as_one_with_the_failed_check_and_both_hit_rates() -> None:
    note = run_note(
        RunFacts(
            _states(record_rejection=OK), gate=_gate("reject"), decide=_decide("record_rejection", "reject")
        )
    )
    assert note == (
        "REJECTED by the gate: save_hit_at_3_change -0.041 (threshold -0.01)"
        " (save HIT@3 0.163 vs champion v0012 0.170, -4.1 %; champion kept)"
    )


def test_a_promotion_names_the_version_and_the_change() -> None:
    note = run_note(RunFacts(_states(promote=OK), gate=_gate("pass"), decide=_decide("promote", "pass")))
    assert note == "PROMOTED v0013 (save HIT@3 0.163 vs champion v0012 0.170, +1.8 %)"
    first = run_note(
        RunFacts(_states(promote=OK), gate=_gate("pass", champion=False), decide=_decide("promote", "pass"))
    )
    assert first == "PROMOTED v0013 (save HIT@3 0.163, first champion: absolute checks only)"


def test_a_forced_promotion_says_so_with_its_reason() -> None:
    plan: Any = {"force_promote": True, "reason": "incident 42", "config_params": {}}
    note = run_note(
        RunFacts(
            _states(promote=OK),
            plan=plan,
            gate=_gate("reject"),
            decide=_decide("promote", "reject"),
            promote={"forced": True, "reason": "incident 42"},
        )
    )
    assert note.startswith("PROMOTED v0013 BY FORCE past the gate (save_hit_at_3_change -0.041")
    assert note.endswith("incident 42 | force_promote - reason: incident 42")


@pytest.mark.parametrize(
    ("decision", "expected"),
    [
        (
            "pass",
            "DRY RUN: would promote v0013 (save HIT@3 0.163 vs champion v0012 0.170, +1.8 %); champion kept",
        ),
        (
            "reject",
            "DRY RUN: would reject v0013: save_hit_at_3_change -0.041 (threshold -0.01)"
            " (save HIT@3 0.163 vs champion v0012 0.170, -4.1 %); champion kept",
        ),
    ],
)
def test_a_dry_run_says_what_it_would_have_done(decision: str, expected: str) -> None:
    facts = RunFacts(
        _states(keep_champion=OK), gate=_gate(decision), decide=_decide("keep_champion", decision, True)
    )
    assert run_note(facts) == expected


def test_a_kept_champion_without_a_dry_run_gives_the_decisions_reason() -> None:
    facts = RunFacts(
        _states(keep_champion=OK), gate=_gate("reject"), decide=_decide("keep_champion", "reject")
    )
    assert run_note(facts) == "KEPT champion v0012: the gate rejected it"


def _validation(tmp_path: Path, run_id: str) -> None:
    anomalies = [
        {"kind": "label_rate_jump", "feature": None, "day": "2026-01-20", "policy": "fail"},
        {"kind": "drift", "feature": "pin_age", "day": "2026-01-21", "policy": "fail"},
        {"kind": "quiet_day", "feature": None, "day": "2026-01-19", "policy": "warn"},
    ]
    folder = tmp_path / "pipeline" / run_id
    folder.mkdir(parents=True)
    (folder / "validate.json").write_text(
        json.dumps({"verdict": "fail", "anomalies": anomalies, "report": "/w/report.md"})
    )


def test_a_run_stopped_by_data_validation_names_the_failing_anomalies(tmp_path: Path) -> None:
    _validation(tmp_path, "r1")
    states = _states(validate_window="failed", train="upstream_failed", gate="upstream_failed")
    validation = notes.recorded_validation(str(tmp_path), "r1", states)
    assert run_note(RunFacts(states, validation=validation)) == (
        "STOPPED by data validation: label_rate_jump 2026-01-20, drift pin_age 2026-01-21 (report /w/report.md)"
    )
    # a validate task that crashed (no failing verdict recorded) is a failure like any other
    assert run_note(RunFacts(states)) == "FAILED at validate_window"
    assert notes.recorded_validation(str(tmp_path), "r1", _states()) is None  # it did not fail


def test_a_failed_run_names_the_first_step_that_failed_itself() -> None:
    states = _states(train="failed", gate="upstream_failed", decide="upstream_failed")
    assert run_note(RunFacts(states)) == "FAILED at train"
    after = _states(promote=OK, materialize_online="failed")
    assert run_note(RunFacts(after, gate=_gate("pass"))) == "FAILED at materialize_online"


def test_the_overrides_and_their_reason_follow_the_outcome() -> None:
    plan: Any = {
        "force_promote": False,
        "reason": "",
        "override_reason": "champion trained a day later",
        "config_params": {"recipe.epochs": 3, "gate.allow_unfair": True, "gate.tolerance": 0.2},
    }
    note = run_note(
        RunFacts(_states(promote=OK), plan=plan, gate=_gate("pass"), decide=_decide("promote", "pass"))
    )
    assert note.endswith(
        " | overrides gate.allow_unfair=True, gate.tolerance=0.2 - reason: champion trained a day later"
    )
    assert "recipe.epochs" not in note  # a recipe Param is not an override of a check


def test_a_long_note_is_cut_to_airflows_limit() -> None:
    plan: Any = {
        "force_promote": False,
        "override_reason": "x" * 990,
        "config_params": {"gate.tolerance": 0.2},
    }
    note = run_note(RunFacts(_states(promote=OK), plan=plan, gate=_gate("pass")))
    assert len(note) == notes.NOTE_MAX and note.startswith("PROMOTED v0013") and note.endswith("…")


# -- setting it --------------------------------------------------------------------------------


class _Conn:
    host, port, schema, login, password = "127.0.0.1", 8080, None, "admin", "pw"
    extra_dejson: ClassVar[dict[str, Any]] = {}


def test_the_note_is_patched_after_logging_in() -> None:
    seen: list[httpx.Request] = []

    def answer(request: httpx.Request) -> httpx.Response:
        seen.append(request)
        if request.url.path == "/auth/token":
            return httpx.Response(201, json={"access_token": "T"})
        return httpx.Response(200, json={})

    access = ApiAccess.from_connection(_Conn())
    assert access.base_url == "http://127.0.0.1:8080"
    notes.patch_note(
        access,
        "ranker_retrain",
        "manual__2026-01-25T10:00:00+00:00",
        "REJECTED ...",
        httpx.MockTransport(answer),
    )
    login, patch = seen
    assert json.loads(login.content) == {"username": "admin", "password": "pw"}
    assert patch.method == "PATCH"
    assert patch.url.raw_path.decode() == (
        "/api/v2/dags/ranker_retrain/dagRuns/manual__2026-01-25T10%3A00%3A00%2B00%3A00?update_mask=note"
    )
    assert patch.headers["Authorization"] == "Bearer T"
    assert json.loads(patch.content) == {"note": "REJECTED ..."}


def test_setting_a_note_never_raises() -> None:
    def refused(access: ApiAccess, dag_id: str, run_id: str, note: str) -> None:
        raise httpx.HTTPStatusError(
            "403", request=httpx.Request("PATCH", "http://x"), response=httpx.Response(403)
        )

    access = ApiAccess(base_url="http://x", token="T")
    assert set_note("d", "r", "n", access=lambda: access, patch=refused) is False
    assert set_note("d", "r", "n", access=lambda: None) is False  # no connection: logged only
    done: list[str] = []
    assert set_note("d", "r", "n", access=lambda: access, patch=lambda *a: done.append(a[3])) is True
    assert done == ["n"]
