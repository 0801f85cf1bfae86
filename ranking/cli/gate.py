"""``ranker gate``: judge a candidate version against the champion (exit 0 pass, 1 reject)."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, effective_config, parse_date, workspace
from ranking.cli.options import add_gate_options, add_registry_option, version_arg


def handle_gate(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import gate_request
    from ranking.pipeline.steps import gate

    config = effective_config(args).config  # the gate flags are bound: given ones are in it
    return gate(
        gate_request(
            config, workspace(args), args.candidate, args.end, registry=args.registry, run_id=args.run_id
        )
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``gate`` to ``ranker``."""
    p = sub.add_parser("gate", help="judge a candidate version against the champion (exit 0 pass, 1 reject)")
    p.add_argument("--candidate", type=version_arg, required=True, metavar="VERSION")
    p.add_argument("--end", type=parse_date, default=None, help="eval day (default: the candidate's own)")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gate, step="gate")
