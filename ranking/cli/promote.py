"""``ranker promote``: make a (blessed) version the champion."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, text_arg
from ranking.cli.options import add_registry_option, reason_arg, registry_of, version_arg
from ranking.cli.tracking import settings_of as tracking_of
from ranking.core.summaries import PromoteSummary
from ranking.registry.operations import PromoteRequest


def handle_promote(args: argparse.Namespace) -> CommandResult[PromoteSummary]:
    from ranking.pipeline.steps import promote
    from ranking.tracking.outbox import mirror_champion

    registry = registry_of(args)
    result = promote(
        PromoteRequest(
            registry=registry,
            version=args.version,
            reason=args.reason,
            force=args.force,
            run_id=args.run_id,
            who=args.who,
        )
    )
    if result.summary is not None and not result.summary.noop:
        # the registry stays the source of truth; MLflow's alias follows it (queued when down)
        result.text = (
            (result.text or "") + "\nMLflow: " + mirror_champion(registry, tracking_of(args), [args.version])
        )
    return result


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``promote`` to ``ranker``."""
    p = sub.add_parser("promote", help="make a (blessed) version the champion")
    p.add_argument("version", type=version_arg)
    p.add_argument("--reason", type=reason_arg, required=True)
    p.add_argument("--force", action="store_true", help="promote even without a passing gate verdict")
    p.add_argument(
        "--who",
        type=text_arg,
        default=None,
        help="who is promoting (default: $RANKER_ACTOR, else the OS user)",
    )
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_promote, step="promote")
