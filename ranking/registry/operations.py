"""The registry commands (`ranker promote|reject|rollback|models list|show`): one typed request each,
one function each, returning the command's JSON summary."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ranking.core.summaries import PromoteSummary, RejectSummary
from ranking.registry.aliases import BASE, CHAMPION
from ranking.registry.records import Verdict
from ranking.registry.registry import Registry

_LISTED_METRICS = ("save_hit_at_3", "auc", "ne", "calibration")


@dataclass(frozen=True)
class PromoteRequest:
    registry: str  # registry root URL
    version: str
    reason: str
    force: bool = False
    run_id: str | None = None
    who: str | None = None


@dataclass(frozen=True)
class RejectRequest:
    registry: str
    version: str
    reason: str | None = None  # default: the gate's failed checks
    run_id: str | None = None
    who: str | None = None


@dataclass(frozen=True)
class RollbackRequest:
    registry: str
    reason: str
    to: str | None = None  # default: the alias's previous version
    run_id: str | None = None
    who: str | None = None
    alias: str = CHAMPION  # champion | base


@dataclass(frozen=True)
class ListRequest:
    registry: str


@dataclass(frozen=True)
class ShowRequest:
    registry: str
    version: str
    verify: bool = False


def promote(req: PromoteRequest) -> dict[str, Any]:
    event, previous = Registry(req.registry).promote(
        req.version, reason=req.reason, force=req.force, run_id=req.run_id, who=req.who
    )
    return PromoteSummary(
        version=req.version,
        previous=previous,
        reason=req.reason,
        forced=bool(event and event.forced),
        noop=event is None,
        seq=event.seq if event else None,
    ).body()


def rejection_reason(verdict: Verdict | None) -> str:
    """The reason recorded when none is given: the gate's failed checks."""
    failed = verdict.failed_checks if verdict else []
    return "gate rejected: " + ", ".join(failed) if failed else "rejected"


def reject(req: RejectRequest) -> dict[str, Any]:
    reg = Registry(req.registry)
    verdict = reg.verdict(req.version)
    reason = req.reason or rejection_reason(verdict)
    reg.record_rejection(req.version, reason, req.run_id, req.who)
    return RejectSummary(
        version=req.version, failed_checks=verdict.failed_checks if verdict else [], reason=reason
    ).body()


def rollback(req: RollbackRequest) -> dict[str, Any]:
    event = Registry(req.registry).rollback(
        to=req.to, reason=req.reason, run_id=req.run_id, who=req.who, alias=req.alias
    )
    return {
        "alias": req.alias,
        "version": event.to_version,
        "previous": event.from_version,
        "reason": event.reason,
        "seq": event.seq,
        "who": event.who,
    }


def _version_row(reg: Registry, version: str, champion: str | None) -> dict[str, Any]:
    status = reg.status(version, champion)
    row: dict[str, Any] = {"version": version, "status": status}
    if status != "incomplete":
        rec = reg.record(version)
        row.update(
            created_at=rec.created_at,
            run_id=rec.run_id,
            eval={k: v for k, v in rec.eval.items() if k in _LISTED_METRICS},
            train=rec.train,
        )
    return row


def list_models(req: ListRequest) -> dict[str, Any]:
    """Every version with its status, the champion, the base and the aliases' histories."""
    reg = Registry(req.registry)
    reg.store.require_location()
    champion = reg.champion()
    base = reg.base()
    versions = [_version_row(reg, v, champion) for v in reg.version_ids()]
    for row in versions:
        row["base"] = row["version"] == base
    return {
        "registry": reg.url,
        "champion": champion,
        "base": base,
        "versions": versions,
        "history": [e.to_dict() for e in reg.history()],
        "base_history": [e.to_dict() for e in reg.history(BASE)],
    }


def show_model(req: ShowRequest) -> dict[str, Any]:
    reg = Registry(req.registry)
    champion = reg.champion()
    rec = reg.verify(req.version) if req.verify else reg.record(req.version)
    verdict = reg.verdict(req.version)
    return {
        **rec.to_dict(),
        "status": reg.status(req.version, champion),
        "verdict": verdict.to_dict() if verdict else None,
        "checksums_verified": req.verify,
        "was_champion": any(e.to_version == req.version for e in reg.history()),
    }
