"""The blessing policy: whether a gate verdict lets a version become the champion, and the status
a version shows in listings. Pure functions of the stored verdict."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

if TYPE_CHECKING:
    from ranking.registry.records import Blessing, Verdict

_DIGEST_KEYS = (
    "decision",
    "champion_version",
    "eval_date",
    "relative_change",
    "ci",
    "failed_checks",
    "run_id",
)


def blessing_problem(verdict: Verdict | None, current_champion: str | None) -> str | None:
    """Why a verdict does not bless promotion over ``current_champion`` (None when it does)."""
    if verdict is None or verdict.decision is None:
        return "it has not been through the gate"
    if verdict.rejected:
        return "it was rejected"
    if verdict.decision != "pass":
        failed = ", ".join(verdict.failed_checks) or "see its gate report"
        return f"the gate rejected it ({failed})"
    gated_against = verdict.champion_version
    if gated_against != current_champion:
        return (
            f"its gate verdict compared it with {gated_against or 'no champion'}, "
            f"but the champion is now {current_champion or 'none'}: run the gate again"
        )
    return None


def blessing_digest(verdict: Verdict | None, problem: str | None) -> Blessing:
    """What an alias event records about the verdict it was promoted on."""
    if verdict is None:
        return {"decision": None, "problem": problem}
    recorded = verdict.to_dict()
    out = cast("Blessing", {k: recorded.get(k) for k in _DIGEST_KEYS})
    out["problem"] = problem
    return out


def version_status(
    *, complete: bool, is_champion: bool, verdict: Verdict | None, champion: str | None = None
) -> str:
    """incomplete | champion | rejected | blessed | blessed-stale | gate-rejected | candidate."""
    if not complete:
        return "incomplete"
    if is_champion:
        return "champion"
    if verdict is not None and verdict.rejected:
        return "rejected"
    if verdict is not None and verdict.decision == "pass":
        # a pass against an older champion blesses nothing now (promote would refuse it)
        return "blessed" if verdict.champion_version == champion else "blessed-stale"
    if verdict is not None and verdict.decision == "reject":
        return "gate-rejected"
    return "candidate"
