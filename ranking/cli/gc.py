"""``ranker gc``: remove what killed writers left (temp folders, export scratch, incomplete
registry versions) once it is older than a grace period and no live process holds it, prune what
``[retention]`` lets go (registered runs' checkpoints, run folders no role keeps, backtest replays
but their reports, old window partitions; ``--leftovers-only`` skips that), then measure the disk
by kind and push it (job ``ranker_gc``; ranking/monitoring/disk.py). ``--dry-run`` lists what
would go and pushes nothing."""

from __future__ import annotations

import argparse
import time
from pathlib import Path

from ranking.cli.common import CommandResult, add_common, effective_config, float_in, workspace
from ranking.cli.options import add_registry_option, registry_of
from ranking.registry.janitor import DEFAULT_GRACE_SECONDS

MAX_GRACE_HOURS = 24.0 * 365


def handle_gc(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import retention_policy
    from ranking.monitoring.delivery import resolve_pushgateway
    from ranking.monitoring.disk import deliver, gc_samples, measure
    from ranking.registry import Registry
    from ranking.registry.janitor import collect_garbage

    config = effective_config(args).config
    retention = None if args.leftovers_only else retention_policy(config)
    ws, reg = workspace(args), Registry(registry_of(args))
    report = collect_garbage(
        ws.root,
        reg,
        grace_seconds=args.grace_hours * 3600.0,
        dry_run=args.dry_run,
        retention=retention,
    )
    summary = report.to_dict()
    usage = measure(ws.root, Path(reg.store.root) if reg.store.local else None)
    summary["disk"] = usage.to_dict()
    if not args.dry_run:
        pushgateway = config.metrics.pushgateway
        delivered = deliver(
            gc_samples(usage, summary, time.time()),
            resolve_pushgateway(pushgateway) if pushgateway != "" else None,
            ws.metrics,
        )
        summary["metrics"] = {"delivery": delivered.delivery, "target": delivered.target}
    verb = "would remove" if args.dry_run else "removed"
    lines = [f"{verb} {len(report.removed)} leftover(s), {summary['bytes_freed'] / 2**20:.1f} MiB freed"]
    lines += [f"  {verb}: {r['kind']} {r['where']} ({r['bytes'] / 2**20:.1f} MiB)" for r in report.removed]
    lines += [f"  kept: {r['kind']} {r['where']} ({r['why']})" for r in report.kept]
    lines += [f"  failed: {r['kind']} {r['where']} ({r['why']})" for r in report.failed]
    used = ", ".join(f"{kind} {size / 2**20:.1f}" for kind, size in usage.kinds.items())
    lines.append(
        f"disk (MiB): {used}; {usage.free_bytes / max(usage.size_bytes, 1):.0%} of the filesystem free"
    )
    return CommandResult(summary, text="\n".join(lines))


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
