"""``ranker decide``: after the gate, promote, record the rejection, or keep the champion (the
promotion policy, ranking/pipeline/policy.py). Prints ``{"branch", "reason", "force", ...}``;
exit 0 whatever the branch (acting on it is the next step's job)."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, parse_date
from ranking.cli.options import (
    add_promotion_options,
    add_registry_option,
    registry_of,
    version_arg,
)
from ranking.core.summaries import DecideSummary
from ranking.pipeline.decide import DecideRequest
from ranking.pipeline.steps import decide


def handle_decide(args: argparse.Namespace) -> CommandResult[DecideSummary]:
    return decide(
        DecideRequest(
            registry=registry_of(args),
            candidate=args.candidate,
            end=args.end,
            dry_run=args.dry_run,
            force_promote=args.force_promote,
            reason=args.reason,
            run_id=args.run_id,
        )
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``decide`` to ``ranker``."""
    p = sub.add_parser(
        "decide",
        help="after the gate: promote, record the rejection, or keep the champion (reads the verdict)",
    )
    p.add_argument("--candidate", type=version_arg, required=True, metavar="VERSION")
    p.add_argument("--end", type=parse_date, required=True, help="window end = eval day the gate judged on")
    add_promotion_options(p, dry_run_help="never move the champion")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_decide, step="decide")
