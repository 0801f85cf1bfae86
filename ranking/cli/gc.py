"""``ranker gc``: remove what killed writers left (temp folders, export scratch, incomplete
registry versions) once it is older than a grace period and no live process holds it, and prune
by age what ``[retention]`` lets go (finished runs' checkpoints, registered run folders, backtest
replays, old window partitions; ``--leftovers-only`` skips that)."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, effective_config, float_in, workspace
from ranking.cli.options import add_registry_option, registry_of
from ranking.registry.janitor import DEFAULT_GRACE_SECONDS

MAX_GRACE_HOURS = 24.0 * 365


def handle_gc(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import retention_policy
    from ranking.registry import Registry
    from ranking.registry.janitor import collect_garbage

    retention = None if args.leftovers_only else retention_policy(effective_config(args).config)
    report = collect_garbage(
        workspace(args).root,
        Registry(registry_of(args)),
        grace_seconds=args.grace_hours * 3600.0,
        dry_run=args.dry_run,
        retention=retention,
    )
    summary = report.to_dict()
    verb = "would remove" if args.dry_run else "removed"
    lines = [f"{verb} {len(report.removed)} leftover(s), {summary['bytes_freed'] / 2**20:.1f} MiB freed"]
    lines += [f"  {verb}: {r['kind']} {r['where']}" for r in report.removed]
    lines += [f"  kept: {r['kind']} {r['where']} ({r['why']})" for r in report.kept]
    lines += [f"  failed: {r['kind']} {r['where']} ({r['why']})" for r in report.failed]
    return CommandResult(summary, text="\n".join(lines))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``gc`` to ``ranker``."""
    p = sub.add_parser(
        "gc",
        help="remove what killed writers left, and prune by age what [retention] lets go",
        description=__doc__,
    )
    p.add_argument(
        "--grace-hours",
        type=float_in(0.0, MAX_GRACE_HOURS),
        default=DEFAULT_GRACE_SECONDS / 3600.0,
        help="keep anything modified more recently than this (default: %(default)g)",
    )
    p.add_argument("--dry-run", action="store_true", help="list what would be removed; remove nothing")
    p.add_argument(
        "--leftovers-only",
        action="store_true",
        help="remove only what killed writers left; prune nothing by [retention]",
    )
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gc, step="gc")
