"""The blessing policy: whether a gate verdict lets a version become the champion, and the status
a version shows in listings. Pure functions of the stored verdict."""

from __future__ import annotations

from typing import Any

_DIGEST_KEYS = (
    "decision",
    "champion_version",
    "eval_date",
    "relative_change",
    "ci",
    "failed_checks",
    "run_id",
)


def blessing_problem(verdict: dict[str, Any] | None, current_champion: str | None) -> str | None:
    """Why a verdict does not bless promotion over ``current_champion`` (None when it does)."""
    if not verdict or "decision" not in verdict:
        return "it has not been through the gate"
    if verdict.get("rejected"):
        return "it was rejected"
    if verdict["decision"] != "pass":
        failed = ", ".join(verdict.get("failed_checks") or []) or "see its gate report"
        return f"the gate rejected it ({failed})"
    gated_against = verdict.get("champion_version")
    if gated_against != current_champion:
        return (
            f"its gate verdict compared it with {gated_against or 'no champion'}, "
            f"but the champion is now {current_champion or 'none'}: run the gate again"
        )
    return None


def blessing_digest(verdict: dict[str, Any] | None, problem: str | None) -> dict[str, Any]:
    """What an alias event records about the verdict it was promoted on."""
    if not verdict:
        return {"decision": None, "problem": problem}
    out = {k: verdict.get(k) for k in _DIGEST_KEYS}
    out["problem"] = problem
    return out


def version_status(
    *, complete: bool, is_champion: bool, verdict: dict[str, Any] | None, champion: str | None = None
) -> str:
    """incomplete | champion | rejected | blessed | blessed-stale | gate-rejected | candidate."""
    if not complete:
        return "incomplete"
    if is_champion:
        return "champion"
    verdict = verdict or {}
    if verdict.get("rejected"):
        return "rejected"
    if verdict.get("decision") == "pass":
        # a pass against an older champion blesses nothing now (promote would refuse it)
        return "blessed" if verdict.get("champion_version") == champion else "blessed-stale"
    if verdict.get("decision") == "reject":
        return "gate-rejected"
    return "candidate"
