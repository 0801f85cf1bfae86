"""The registry commands (`ranker promote|reject|rollback|models list|show`): one typed request each,
one function each, returning the command's summary model."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import cast

from pydantic import Field, JsonValue

from ranking.core.summaries import PromoteSummary, RejectSummary, Summary
from ranking.registry.aliases import BASE, CHAMPION
from ranking.registry.blessing import AliasPast, VersionStatus
from ranking.registry.records import (
    AliasEventJson,
    AsRecorded,
    EvalRecord,
    FileChecksum,
    TrainRecord,
    Verdict,
)
from ranking.registry.registry import Registry

log = logging.getLogger(__name__)

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


class RollbackSummary(Summary):
    """``ranker rollback``: the alias moved back."""

    alias: str
    version: str
    """the version the alias points to now"""
    previous: str | None
    reason: str
    seq: int
    """the alias event's sequence number"""
    who: str


class VersionRow(Summary):
    """A version as `models list` shows it (an incomplete one: its id and status only)."""

    version: str
    status: VersionStatus
    """what it is now (docs/registry.md, "Statuses")"""
    created_at: str | None = None
    run_id: str | None = None
    eval: AsRecorded[EvalRecord] = Field(default_factory=lambda: EvalRecord())
    """the listed metrics of its eval.json"""
    train: AsRecorded[TrainRecord] = Field(default_factory=lambda: TrainRecord())
    base: bool


class ModelsListing(Summary):
    """``ranker models list``: every version, the champion, the base and the aliases' histories."""

    registry: str
    champion: str | None
    base: str | None
    versions: list[VersionRow]
    history: list[AsRecorded[AliasEventJson]]
    base_history: list[AsRecorded[AliasEventJson]]


class ModelShown(Summary):
    """``ranker models show``: a version's record, its status and its gate verdict."""

    version: str
    created_at: str
    run_id: str | None
    source_run_dir: str
    files: AsRecorded[dict[str, FileChecksum]]
    eval: AsRecorded[EvalRecord]
    train: AsRecorded[TrainRecord]
    who: str
    status: VersionStatus
    verdict: AsRecorded[dict[str, JsonValue]] | None  # the verdict file's JSON, every field
    checksums_verified: bool
    was_champion: bool


def promote(req: PromoteRequest) -> PromoteSummary:
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
    )


def rejection_reason(verdict: Verdict | None) -> str:
    """The reason recorded when none is given: the gate's failed checks."""
    failed = verdict.failed_checks if verdict else []
    return "gate rejected: " + ", ".join(failed) if failed else "rejected"


def reject(req: RejectRequest) -> RejectSummary:
    reg = Registry(req.registry)
    verdict = reg.verdict(req.version)
    reason = req.reason or rejection_reason(verdict)
    reg.record_rejection(req.version, reason, req.run_id, req.who)
    return RejectSummary(
        version=req.version, failed_checks=verdict.failed_checks if verdict else [], reason=reason
    )


def rollback(req: RollbackRequest) -> RollbackSummary:
    event = Registry(req.registry).rollback(
        to=req.to, reason=req.reason, run_id=req.run_id, who=req.who, alias=req.alias
    )
    return RollbackSummary(
        alias=req.alias,
        version=event.to_version,
        previous=event.from_version,
        reason=event.reason,
        seq=event.seq,
        who=event.who,
    )


def _version_row(
    reg: Registry, version: str, champion: str | None, base: str | None, pasts: dict[str, AliasPast]
) -> VersionRow:
    status = reg.status(version, champion, pasts)
    if status == "incomplete":
        return VersionRow(version=version, status=status, base=version == base)
    rec = reg.record(version)
    return VersionRow(
        version=version,
        status=status,
        created_at=rec.created_at,
        run_id=rec.run_id,
        eval=cast(EvalRecord, {k: v for k, v in rec.eval.items() if k in _LISTED_METRICS}),
        train=rec.train,
        base=version == base,
    )


def list_models(req: ListRequest) -> ModelsListing:
    """Every version with its status, the champion, the base and the aliases' histories."""
    reg = Registry(req.registry)
    reg.store.require_location()
    champion = reg.champion()
    base = reg.base()
    pasts = reg.alias_pasts()
    return ModelsListing(
        registry=reg.url,
        champion=champion,
        base=base,
        versions=[_version_row(reg, v, champion, base, pasts) for v in reg.version_ids()],
        history=[e.to_dict() for e in reg.history()],
        base_history=[e.to_dict() for e in reg.history(BASE)],
    )


def show_model(req: ShowRequest) -> ModelShown:
    reg = Registry(req.registry)
    champion = reg.champion()
    rec = reg.verify(req.version) if req.verify else reg.record(req.version)
    verdict = reg.verdict(req.version)
    return ModelShown(
        version=rec.version,
        created_at=rec.created_at,
        run_id=rec.run_id,
        source_run_dir=rec.source_run_dir,
        files=rec.files,
        eval=rec.eval,
        train=rec.train,
        who=rec.who,
        status=reg.status(req.version, champion),
        verdict=verdict.to_dict() if verdict else None,
        checksums_verified=req.verify,
        was_champion=any(e.to_version == req.version for e in reg.history()),
    )
