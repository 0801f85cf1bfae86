"""``ranker gc``: remove what killed writers left (temp folders, export scratch, incomplete
registry versions) once it is older than a grace period and no live process holds it, prune what
``[retention]`` lets go (registered runs' checkpoints, run folders no role keeps, backtest replays
but their reports, old window partitions; ``--leftovers-only`` skips that), then measure the disk
by kind and push it (job ``ranker_gc``; ranking/monitoring/disk.py). ``--dry-run`` lists what
would go and pushes nothing."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, effective_config, float_in, workspace
from ranking.cli.options import add_registry_option, registry_of
from ranking.registry.janitor import DEFAULT_GRACE_SECONDS, GcSummary

MAX_GRACE_HOURS = 24.0 * 365


def handle_gc(args: argparse.Namespace) -> CommandResult[GcSummary]:
    from ranking.config.requests import retention_policy
    from ranking.pipeline.steps import GcRequest, collect_garbage
    from ranking.tracking.settings import tracking_settings

    effective = effective_config(args)
    config = effective.config
    request = GcRequest(
        workspace(args),
        registry_of(args),
        grace_seconds=args.grace_hours * 3600.0,
        dry_run=args.dry_run,
        retention=None if args.leftovers_only else retention_policy(config),
        pushgateway=config.metrics.pushgateway,
        tracking=tracking_settings(workspace(args).root, effective),
    )
    return collect_garbage(request)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``gc`` to ``ranker``."""
    p = sub.add_parser(
        "gc",
        help="remove what killed writers left, prune what [retention] lets go, measure the disk",
        description=__doc__,
    )
    p.add_argument(
        "--grace-hours",
        type=float_in(0.0, MAX_GRACE_HOURS),
        default=DEFAULT_GRACE_SECONDS / 3600.0,
        help="keep anything modified more recently than this (default: %(default)g)",
    )
    p.add_argument(
        "--dry-run", action="store_true", help="list what would be removed; remove and push nothing"
    )
    p.add_argument(
        "--leftovers-only",
        action="store_true",
        help="remove only what killed writers left; prune nothing by [retention]",
    )
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gc, step="gc")
