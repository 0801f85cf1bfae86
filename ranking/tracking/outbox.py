"""Send or queue: the one place that decides. Every record, alias move and deletion goes
through here: what waits in the queue is sent first (so a parent run lands before its child and a
version is registered before its alias moves); MLflow trouble queues the item instead of failing
the caller; ``ranker tracking replay`` sends the queue in order.

Below it, without knowledge of each other's callers: ``client`` (runs), ``registry`` (the model
registry), ``queue`` (the files).
"""

from __future__ import annotations

import logging

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ranking.tracking.client import TrackingRef, one_line, send_record
from ranking.tracking.queue import (
    ChampionItem,
    DeleteItem,
    RunItem,
    enqueue,
    enqueue_record,
    queue_lock,
    queued_files,
    read_entry,
)
from ranking.tracking.records import TrackingRecord
from ranking.tracking.registry import send_champion, send_deletions
from ranking.tracking.settings import TrackingSettings

log = logging.getLogger(__name__)


def track(record: TrackingRecord, settings: TrackingSettings) -> TrackingRef:
    """Send ``record`` to MLflow; never raises for MLflow trouble: the record is queued instead
    (``queued=True``, a message naming ``ranker tracking replay``). Records queued before it are
    sent first (a parent before its child), and while any stay queued this one waits behind them."""
    if not settings.enabled:
        return TrackingRef.unsent(record.record_id, "tracking is off ([tracking] enabled = false)")
    waiting = drain_before(settings)
    if waiting:
        return enqueue_record(record, settings, f"{waiting} earlier item(s) still queued")
    try:
        run_id, exp_id, notes = send_record(record, settings)
    except Exception as exc:  # any MLflow trouble; a step is never failed by its tracking
        log.debug("tracking %s failed", record.record_id, exc_info=True)
        return enqueue_record(record, settings, one_line(exc))
    url = settings.run_url(exp_id, run_id)
    message = f"tracked {record.record_id} as MLflow run {run_id}" + (f" ({url})" if url else "")
    if notes:
        message += "; " + "; ".join(notes)
    return TrackingRef(
        record_id=record.record_id,
        run_id=run_id,
        experiment_id=exp_id,
        queued=False,
        url=url,
        message=one_line(message, 600),
    )


def deliver(item: RunItem | ChampionItem | DeleteItem, settings: TrackingSettings) -> str:
    """Send one item (raises on MLflow trouble); a one-line note of what it did."""
    if isinstance(item, RunItem):
        run_id, _, notes = send_record(item.record, settings)
        return "; ".join([f"run {item.record.record_id} -> {run_id}", *notes])
    if isinstance(item, ChampionItem):
        return send_champion(item, settings)
    return send_deletions(item, settings)


class ReplayResult(BaseModel):
    model_config = ConfigDict(extra="forbid")

    sent: list[str] = Field(default_factory=list)
    """queue file names sent (and removed)"""
    left: int = 0
    failed: str | None = None
    """the first file that failed and why (the replay stopped there)"""
    busy: bool = False
    """another replay held the queue"""


def replay(settings: TrackingSettings, wait: float = 60.0) -> ReplayResult:
    """Send the queue oldest first, removing each file once sent; stop at the first failure."""
    result = ReplayResult()
    with queue_lock(settings, wait=wait) as held:
        if not held:
            return ReplayResult(left=len(queued_files(settings)), busy=True)
        files = queued_files(settings)
        for n, queued in enumerate(files):
            try:
                entry = read_entry(queued.path)
            except (ValidationError, ValueError, OSError) as exc:
                # not ours to delete: a person looks at it (and removes it) before later items move
                result.failed = f"{queued.path.name}: unreadable ({one_line(exc)})"
                result.left = len(files) - n
                return result
            try:
                note = deliver(entry.item, settings)
            except Exception as exc:  # MLflow trouble: the item and those after it stay
                log.debug("replay of %s failed", queued.path.name, exc_info=True)
                result.failed = f"{queued.path.name}: {one_line(exc)}"
                result.left = len(files) - n
                return result
            log.info("sent %s: %s", queued.path.name, note)
            queued.path.unlink(missing_ok=True)
            result.sent.append(queued.path.name)
    return result


def drain_before(settings: TrackingSettings) -> int:
    """Before sending something new: replay what waits, so the order holds; the items still
    queued after (0: send the new one now). A replay busy in another process counts as waiting."""
    if not queued_files(settings):
        return 0
    result = replay(settings, wait=0)
    return result.left


def mirror_champion(registry_url: str, settings: TrackingSettings, versions: list[str] | None = None) -> str:
    """After a promotion or a rollback: register ``versions`` and move the alias to the project's
    champion, or queue that when MLflow is down. Never raises; one line for the operator."""
    if not settings.enabled:
        return "tracking is off"
    item = ChampionItem(registry=registry_url, versions=versions or [])
    why = None
    waiting = drain_before(settings)
    if waiting:
        why = f"{waiting} earlier item(s) still queued"
    else:
        try:
            return send_champion(item, settings)
        except Exception as exc:  # MLflow trouble never fails a promotion
            log.debug("mirroring the champion failed", exc_info=True)
            why = one_line(exc)
    try:
        path = enqueue(item, settings, why)
    except OSError as exc:
        return one_line(f"MLflow champion alias not updated ({why}) and not queued: {exc}", 600)
    return one_line(
        f"MLflow champion alias not updated ({why}): queued as {path}; `ranker tracking replay` sends it"
    )


def prune(
    record_ids: list[str],
    versions: list[str],
    settings: TrackingSettings,
) -> str:
    """``ranker gc`` removed these: delete their MLflow runs and model versions, or queue that.
    Never raises; one line."""
    if not settings.enabled or not (record_ids or versions):
        return ""
    item = DeleteItem(record_ids=record_ids, versions=versions)
    waiting = drain_before(settings)
    why = f"{waiting} earlier item(s) still queued" if waiting else None
    if why is None:
        try:
            return send_deletions(item, settings)
        except Exception as exc:  # MLflow trouble never fails gc
            log.debug("deleting MLflow runs failed", exc_info=True)
            why = one_line(exc)
    try:
        path = enqueue(item, settings, why)
    except OSError as exc:
        return one_line(f"MLflow runs of what gc removed not deleted ({why}), not queued: {exc}", 600)
    return one_line(f"MLflow runs of what gc removed not deleted ({why}): queued as {path}", 600)
