"""``ranker rollback``: move the champion (or the base) back (default: to its previous version)."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, text_arg
from ranking.cli.options import add_registry_option, reason_arg, registry_of, version_arg
from ranking.cli.tracking import settings_of as tracking_of
from ranking.registry.aliases import BASE, CHAMPION
from ranking.registry.operations import RollbackRequest, RollbackSummary, rollback


def handle_rollback(args: argparse.Namespace) -> CommandResult[RollbackSummary]:
    from ranking.tracking.outbox import mirror_champion

    registry = registry_of(args)
    summary = rollback(
        RollbackRequest(
            registry=registry,
            reason=args.reason,
            to=args.to,
            run_id=args.run_id,
            who=args.who,
            alias=args.alias,
        )
    )
    text = f"rolled back {args.alias}: {summary.previous} -> {summary.version}"
    if args.alias == CHAMPION:  # MLflow's alias follows the registry's (queued when MLflow is down)
        text += "\nMLflow: " + mirror_champion(registry, tracking_of(args), [summary.version])
    return CommandResult(summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rollback`` to ``ranker``."""
    p = sub.add_parser("rollback", help="move the champion back (default: to the previous champion)")
    p.add_argument(
        "--to",
        type=version_arg,
        default=None,
        metavar="VERSION",
        help="the registered version to move the alias to (e.g. v0003; its files are verified first)."
        " Default: the alias's previous version, skipping versions already rolled back from, so"
        " repeated rollbacks walk back v0003 -> v0002 -> v0001",
    )
    p.add_argument(
        "--alias",
        choices=(CHAMPION, BASE),
        default=CHAMPION,
        help="the alias to move back: the champion (default) or the base model (ranker pretrain)",
    )
    p.add_argument(
        "--reason",
        type=reason_arg,
        required=True,
        help="why (required, one line): recorded with the rollback in the alias's history"
        " (`ranker models list`)",
    )
    p.add_argument(
        "--who",
        type=text_arg,
        default=None,
        help="who rolls back, recorded with the reason (default: $RANKER_ACTOR, else the OS user)",
    )
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_rollback, step="rollback")
