"""``ranker reject``: record that a candidate version was rejected."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, text_arg
from ranking.cli.options import add_registry_option, reason_arg, registry_of, version_arg
from ranking.core.summaries import RejectSummary
from ranking.registry.operations import RejectRequest


def handle_reject(args: argparse.Namespace) -> CommandResult[RejectSummary]:
    from ranking.pipeline.steps import reject

    return reject(
        RejectRequest(
            registry=registry_of(args),
            version=args.version,
            reason=args.reason,
            run_id=args.run_id,
            who=args.who,
        )
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``reject`` to ``ranker``."""
    p = sub.add_parser("reject", help="record that a candidate version was rejected")
    p.add_argument("version", type=version_arg)
    p.add_argument("--reason", type=reason_arg, default=None, help="default: the gate's failed checks")
    p.add_argument("--who", type=text_arg, default=None)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_reject, step="reject")
