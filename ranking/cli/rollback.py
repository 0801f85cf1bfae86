"""``ranker rollback``: move the champion back (default: to the previous champion)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CommandResult,
    add_common,
)
from ranking.cli.options import add_registry_option, open_registry, reason_arg, version_arg

if TYPE_CHECKING:
    pass


def handle_rollback(args: argparse.Namespace) -> CommandResult:
    _, reg = open_registry(args)
    event = reg.rollback(to=args.to, reason=args.reason, run_id=args.run_id, who=args.who)
    summary = {
        "version": event.to_version,
        "previous": event.from_version,
        "reason": event.reason,
        "seq": event.seq,
        "who": event.who,
    }
    return CommandResult(summary, text=f"rolled back champion: {event.from_version} -> {event.to_version}")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``rollback`` to ``ranker``."""
    p = sub.add_parser("rollback", help="move the champion back (default: to the previous champion)")
    p.add_argument("--to", type=version_arg, default=None, metavar="VERSION")
    p.add_argument("--reason", type=reason_arg, required=True)
    p.add_argument("--who", default=None)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_rollback, step="rollback")
