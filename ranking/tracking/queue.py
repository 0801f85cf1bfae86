"""What MLflow could not take yet: one JSON file per item in ``<home>/mlflow/queue``, named
``<seq>-<record id>.json`` so that the oldest sorts first, and sent in that order by
``ranker tracking replay`` (a parent run before its child, a version registered before its alias
moves). A replay stops at the first item that fails: sending later ones would break that order.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import logging
import re
from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Literal

from pydantic import BaseModel, ConfigDict, Field

from ranking.core.atomic import atomic_write_text
from ranking.tracking.client import TrackingRef, one_line
from ranking.tracking.records import TrackingRecord

if TYPE_CHECKING:
    from ranking.tracking.settings import TrackingSettings

log = logging.getLogger(__name__)

REPLAY_HINT = "ranker tracking replay"
_SEQ_DIGITS = 9
_NAME = re.compile(r"\A(\d{9})-[A-Za-z0-9_.+=@-]{1,80}\.json\Z")
_UNSAFE = re.compile(r"[^A-Za-z0-9_.+=@-]")


class _Item(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class RunItem(_Item):
    """A run record (:func:`ranking.tracking.client.track`)."""

    kind: Literal["run"] = "run"
    record: TrackingRecord


class ChampionItem(_Item):
    """The champion changed (a promotion or a rollback): register ``versions`` if MLflow lacks
    them and point the alias at what the project registry says when it is sent (not when queued:
    a stale replay must not move the alias back)."""

    kind: Literal["champion"] = "champion"
    registry: str
    """the project registry's root URL (the source of truth)"""
    versions: list[str] = Field(default_factory=list)


class DeleteItem(_Item):
    """``ranker gc`` removed these run folders / versions: their MLflow runs and model versions go."""

    kind: Literal["delete"] = "delete"
    record_ids: list[str] = Field(default_factory=list)
    versions: list[str] = Field(default_factory=list)


QueueItem = Annotated[RunItem | ChampionItem | DeleteItem, Field(discriminator="kind")]


class QueueEntry(BaseModel):
    """A queue file's content."""

    model_config = ConfigDict(extra="forbid")

    item: QueueItem
    queued_at: str
    why: str
    """the one line that made it wait"""


class QueuedFile(BaseModel):
    model_config = ConfigDict(frozen=True)

    path: Path
    seq: int


def item_key(item: RunItem | ChampionItem | DeleteItem) -> str:
    if isinstance(item, RunItem):
        return item.record.record_id
    if isinstance(item, ChampionItem):
        return "champion"
    return "delete"


def queued_files(settings: TrackingSettings) -> list[QueuedFile]:
    """The queue, oldest first (names that are not ours are left alone)."""
    found = []
    with contextlib.suppress(FileNotFoundError):
        for path in settings.queue_dir.iterdir():
            m = _NAME.match(path.name)
            if m and path.is_file():
                found.append(QueuedFile(path=path, seq=int(m[1])))
    return sorted(found, key=lambda f: f.seq)


@contextlib.contextmanager
def queue_lock(settings: TrackingSettings, wait: float) -> Iterator[bool]:
    """Yield True while holding the queue's lock (False: another process holds it past ``wait``)."""
    from filelock import FileLock, Timeout

    settings.mlflow_dir.mkdir(parents=True, exist_ok=True)
    lock = FileLock(settings.mlflow_dir / ".queue.lock", timeout=wait)
    try:
        lock.acquire()
    except Timeout:
        yield False
        return
    try:
        yield True
    finally:
        lock.release()


def enqueue(item: RunItem | ChampionItem | DeleteItem, settings: TrackingSettings, why: str) -> Path:
    """Write ``item`` atomically as the newest queue file; its path."""
    entry = QueueEntry(item=item, queued_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), why=why)
    with queue_lock(settings, wait=60.0) as held:
        if not held:  # a replay has held it for a minute: a new number past its files still sorts last
            log.warning("the tracking queue's lock is busy; queueing without it")
        files = queued_files(settings)
        seq = (files[-1].seq + 1) if files else 1
        name = _UNSAFE.sub("_", item_key(item))[:80]
        path = settings.queue_dir / f"{seq:0{_SEQ_DIGITS}d}-{name}.json"
        atomic_write_text(path, entry.model_dump_json(indent=2) + "\n")
    return path


def enqueue_record(record: TrackingRecord, settings: TrackingSettings, why: str) -> TrackingRef:
    try:
        path = enqueue(RunItem(record=record), settings, why)
    except OSError as exc:  # even the queue cannot be written (a full disk): say so, still no raise
        lost = f"MLflow tracking of {record.record_id} lost: {why}; and the queue could not be written: {exc}"
        return TrackingRef.unsent(record.record_id, one_line(lost, 600))
    queued = f"MLflow not reached ({why}): queued {record.record_id} as {path}; `{REPLAY_HINT}` sends it"
    return TrackingRef.unsent(record.record_id, one_line(queued, 600), queued=True)


def read_entry(path: Path) -> QueueEntry:
    return QueueEntry.model_validate_json(path.read_text())
