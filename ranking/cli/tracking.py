"""``ranker tracking replay|status|sync``: MLflow tracking's queue and the champion's alias
(docs/tracking.md).

``replay`` sends what waits in ``<home>/mlflow/queue`` (MLflow was down), oldest first, and stops
at the first failure: exit 0 when the queue is empty after, 1 when items are left. ``status`` says
where the store is, whether it answers and what waits. ``sync`` registers every version that was
ever champion and points the ``champion`` alias at the project registry's champion."""

from __future__ import annotations

import argparse
import sys

from pydantic import BaseModel, ConfigDict

from ranking.cli.common import CommandResult, add_common, effective_config, workspace
from ranking.cli.options import add_registry_option, registry_of
from ranking.tracking.settings import TrackingSettings


class ReplaySummary(BaseModel):
    """``ranker tracking replay``: what was sent, what is left."""

    model_config = ConfigDict(extra="forbid")

    uri: str
    sent: list[str]
    """queue files sent (and removed), oldest first"""
    left: int
    failed: str | None
    """the item the replay stopped at, and why"""


class TrackingStatus(BaseModel):
    """``ranker tracking status``: the store, whether it answers, the queue."""

    model_config = ConfigDict(extra="forbid")

    enabled: bool
    uri: str
    ui_url: str | None
    reachable: bool
    error: str | None
    queued: int
    oldest: str | None
    """the oldest queue file's name and when it was queued"""


class SyncSummary(BaseModel):
    """``ranker tracking sync``: the alias reconciled with the project registry."""

    model_config = ConfigDict(extra="forbid")

    uri: str
    model_name: str
    champion: str | None
    message: str


def settings_of(args: argparse.Namespace) -> TrackingSettings:
    from ranking.tracking.settings import tracking_settings

    return tracking_settings(workspace(args).root, effective_config(args))


def handle_replay(args: argparse.Namespace) -> CommandResult[ReplaySummary]:
    from ranking.tracking.outbox import replay

    settings = settings_of(args)
    result = replay(settings)
    summary = ReplaySummary(uri=settings.uri, sent=result.sent, left=result.left, failed=result.failed)
    text = f"sent {len(result.sent)}, left {result.left} ({settings.uri})"
    if result.left:
        why = "another replay holds the queue" if result.busy else f"stopped at {result.failed}"
        print(f"ranker tracking replay: {result.left} item(s) left: {why}", file=sys.stderr)
    return CommandResult(summary, exit_code=1 if result.left else 0, text=text)


def _reachable(settings: TrackingSettings) -> str | None:
    """None when the store answers, else why not (one line)."""
    from ranking.tracking.client import bounded_calls, mlflow_client, one_line

    try:
        with bounded_calls(settings):
            mlflow_client(settings).search_experiments(max_results=1)
    except Exception as exc:  # any trouble is the answer
        return one_line(exc)
    return None


def handle_status(args: argparse.Namespace) -> CommandResult[TrackingStatus]:
    from ranking.tracking.queue import queued_files, read_entry

    settings = settings_of(args)
    files = queued_files(settings)
    oldest = None
    if files:
        try:
            oldest = f"{files[0].path.name} (queued {read_entry(files[0].path).queued_at})"
        except (OSError, ValueError):
            oldest = f"{files[0].path.name} (unreadable)"
    error = _reachable(settings) if settings.enabled else None
    status = TrackingStatus(
        enabled=settings.enabled,
        uri=settings.uri,
        ui_url=settings.ui_url,
        reachable=settings.enabled and error is None,
        error=error,
        queued=len(files),
        oldest=oldest,
    )
    lines = [
        f"store: {settings.uri}" + ("" if settings.enabled else " (tracking is off)"),
        "ui: "
        + (
            settings.ui_url
            or (f".venv-mlflow/bin/mlflow ui --backend-store-uri {settings.uri}" if settings.local else "-")
        ),
        "reachable: " + ("yes" if status.reachable else f"no ({error or 'tracking is off'})"),
        f"queue: {len(files)} item(s)"
        + (f", oldest {oldest}" if oldest else "")
        + f" in {settings.queue_dir}",
    ]
    return CommandResult(status, text="\n".join(lines))


def handle_sync(args: argparse.Namespace) -> CommandResult[SyncSummary]:
    from ranking.core.errors import RankerError
    from ranking.registry import Registry
    from ranking.tracking.client import one_line
    from ranking.tracking.registry import sync

    settings = settings_of(args)
    if not settings.enabled:
        raise RankerError("tracking is off ([tracking] enabled = false): nothing to sync")
    url = registry_of(args)
    try:
        message = sync(url, settings)
    except RankerError:
        raise
    except Exception as exc:  # MLflow trouble: exit 1 with the reason, as replay does
        message = f"not synced: {one_line(exc)}"
        print(f"ranker tracking sync: {message}", file=sys.stderr)
        summary = SyncSummary(
            uri=settings.uri,
            model_name=settings.model_name,
            champion=Registry(url).champion(),
            message=message,
        )
        return CommandResult(summary, exit_code=1, text=message)
    summary = SyncSummary(
        uri=settings.uri, model_name=settings.model_name, champion=Registry(url).champion(), message=message
    )
    return CommandResult(summary, text=message)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``tracking`` to ``ranker``."""
    group = sub.add_parser("tracking", help="MLflow tracking: the queue, the store, the champion alias")
    commands = group.add_subparsers(dest="tracking_command", metavar="SUBCOMMAND")
    p = commands.add_parser("replay", help="send what waits in <home>/mlflow/queue, oldest first")
    add_common(p)
    p.set_defaults(handler=handle_replay, step="tracking_replay")
    p = commands.add_parser("status", help="the store, whether it answers, what waits in the queue")
    add_common(p)
    p.set_defaults(handler=handle_status, step="tracking_status")
    p = commands.add_parser("sync", help="point the MLflow alias champion at the project registry's champion")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_sync, step="tracking_sync")
