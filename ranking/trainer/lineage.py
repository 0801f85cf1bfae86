"""What a daily model is trained from and on: a full retrain, or an incremental one.

A *full* retrain trains on the whole window, warm-started as the recipe says. An *incremental*
one continues the champion on only the days after the champion's own training data ended, so
each impression passes through the tables once in the lineage of the served model; every
``full_retrain_every_days`` (counted from the lineage's last full retrain) it is a full retrain
again, from ``full_retrain_warm_start`` (the base model by default). The lineage is recorded in
the run's ``train_manifest.json`` and in the registry version (``train.lineage``), which is how
the next day's plan knows when the last full retrain was.

Pure: :func:`plan_training` takes what the registry says about the champion and returns the plan.
"""

from __future__ import annotations

import datetime as dt
from dataclasses import dataclass
from typing import TYPE_CHECKING, Final

from ranking.core.errors import RankerError
from ranking.core.summaries import Lineage  # the one shape: planned here, recorded as the summary's

if TYPE_CHECKING:
    from ranking.registry.records import TrainRecord

FULL: Final = "full"
INCREMENTAL: Final = "incremental"


@dataclass(frozen=True)
class ChampionInfo:
    """What the plan needs to know about the current champion."""

    version: str
    train_end: dt.date  # its window end: it trained on days before this one
    full_retrain_end: dt.date | None  # its lineage's last full retrain (None: it was one itself)


@dataclass(frozen=True)
class TrainingPlan:
    warm_start: str  # what to warm-start from: champion | base | none | a path
    since: dt.date | None  # train only on the window's days >= since (None: all of them)
    lineage: Lineage


def plan_training(
    *,
    end: dt.date,
    warm_start: str,
    incremental: bool,
    full_retrain_every_days: int | None,
    full_retrain_warm_start: str,
    champion: ChampionInfo | None,
) -> TrainingPlan:
    """The plan for the window ending ``end`` (exclusive: the eval day)."""
    if not incremental:
        return TrainingPlan(warm_start, None, _full(end, "full retrain"))

    def full(reason: str) -> TrainingPlan:
        return TrainingPlan(full_retrain_warm_start, None, _full(end, reason))

    if champion is None:
        return full("no champion yet")
    if champion.train_end >= end:
        raise RankerError(
            f"incremental: the champion {champion.version} already trained on every day before {end}"
            f" (its window ends {champion.train_end}): nothing new to train on"
        )
    last_full = champion.full_retrain_end or champion.train_end
    if full_retrain_every_days is not None and (end - last_full).days >= full_retrain_every_days:
        return full(
            f"{(end - last_full).days} days since the last full retrain ({last_full});"
            f" every {full_retrain_every_days}"
        )
    since = champion.train_end
    return TrainingPlan(
        "champion",
        since,
        Lineage(
            kind=INCREMENTAL,
            parent=champion.version,
            full_retrain_end=last_full,
            since=since,
            reason=f"continues {champion.version} on the days since {since}",
        ),
    )


def _full(end: dt.date, reason: str) -> Lineage:
    return Lineage(kind=FULL, parent=None, full_retrain_end=end, since=None, reason=reason)


def champion_info(version: str, train: TrainRecord) -> ChampionInfo | None:
    """From a version record's ``train`` summary; None when it does not say where its window ended."""
    end = train.get("train_end")
    if not end:
        return None
    lineage = train.get("lineage") or {}
    full_end = lineage.get("full_retrain_end") if lineage.get("kind") == INCREMENTAL else None
    return ChampionInfo(
        version=version,
        train_end=dt.date.fromisoformat(str(end)),
        full_retrain_end=dt.date.fromisoformat(str(full_end)) if full_end else None,
    )
