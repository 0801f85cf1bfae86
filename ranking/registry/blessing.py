"""The blessing policy: whether a gate verdict lets a version become the champion, and the status
a version shows in listings. Pure functions of the stored verdict and the aliases' histories."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Literal, cast, get_args

if TYPE_CHECKING:
    from ranking.registry.records import AliasEvent, Blessing, Verdict

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


# what `models list` and `models show` call a version (docs/registry.md has the table)
VersionStatus = Literal[
    "incomplete",
    "champion",
    "base",
    "rolled-back-from",
    "former-champion",
    "former-base",
    "rejected-by-gate",
    "rejected-by-operator",
    "promotable",
    "needs-regate",
    "ungated",
]
VERSION_STATUSES: tuple[VersionStatus, ...] = get_args(VersionStatus)


@dataclass(frozen=True)
class AliasPast:
    """What the aliases' histories say of a version: how it stopped being the champion
    (``rollback``: a rollback left it, at least once; ``promote``: only ever replaced by a
    promotion), and whether it is, or was, the base."""

    left_champion_by: str | None = None
    is_base: bool = False
    was_base: bool = False


def alias_pasts(
    champion_history: Sequence[AliasEvent], base_history: Sequence[AliasEvent]
) -> dict[str, AliasPast]:
    """Each version the aliases ever pointed to, with its :class:`AliasPast`."""
    # as rollback_target: once rolled back from, always skipped by a rollback without --to
    rolled_back = {e.from_version for e in champion_history if e.action == "rollback" and e.from_version}
    current = champion_history[-1].to_version if champion_history else None
    left = {
        v: "rollback" if v in rolled_back else "promote"
        for e in champion_history
        for v in (e.from_version, e.to_version)
        if v is not None and v != current
    }
    base = base_history[-1].to_version if base_history else None
    bases = {e.to_version for e in base_history}
    return {
        v: AliasPast(left_champion_by=left.get(v), is_base=v == base, was_base=v in bases)
        for v in set(left) | bases
    }


def version_status(
    *,
    complete: bool,
    is_champion: bool,
    verdict: Verdict | None,
    champion: str | None = None,
    past: AliasPast | None = None,
) -> VersionStatus:
    """The first that holds, in the order of :data:`VersionStatus`: where the aliases point and
    have pointed, then what the gate and an operator said."""
    past = past or AliasPast()
    decision = verdict.decision if verdict is not None else None
    rules: tuple[tuple[bool, VersionStatus], ...] = (
        (not complete, "incomplete"),
        (is_champion, "champion"),
        # not gated: a base is judged by the daily models trained from it
        (past.is_base, "base"),
        # a rollback without --to never returns to it
        (past.left_champion_by == "rollback", "rolled-back-from"),
        (past.left_champion_by is not None, "former-champion"),
        (past.was_base, "former-base"),
        # whether or not the rejection was recorded (a dry run records none)
        (decision == "reject", "rejected-by-gate"),
        # `ranker reject` on a version the gate did not reject
        (verdict is not None and verdict.rejected is not None, "rejected-by-operator"),
        # a pass against an older champion blesses nothing now (promote would refuse it)
        (decision == "pass" and verdict is not None and verdict.champion_version == champion, "promotable"),
        (decision == "pass", "needs-regate"),
    )
    return next((status for holds, status in rules if holds), "ungated")
