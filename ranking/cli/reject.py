"""``ranker reject``: record that a candidate version was rejected."""

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


def handle_reject(args: argparse.Namespace) -> CommandResult:
    _, reg = open_registry(args)
    verdict = reg.verdict(args.version) or {}
    failed = list(verdict.get("failed_checks") or [])
    reason = args.reason or ("gate rejected: " + ", ".join(failed) if failed else "rejected")
    reg.record_rejection(args.version, reason, args.run_id, args.who)
    summary = {"version": args.version, "failed_checks": failed, "reason": reason}
    return CommandResult(summary, text=f"recorded rejection of {args.version}: {reason}")


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``reject`` to ``ranker``."""
    p = sub.add_parser("reject", help="record that a candidate version was rejected")
    p.add_argument("version", type=version_arg)
    p.add_argument("--reason", type=reason_arg, default=None)
    p.add_argument("--who", default=None)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_reject, step="reject")
