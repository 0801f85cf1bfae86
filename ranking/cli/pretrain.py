"""``ranker pretrain``: train the base model on the range before the daily window and make it the
registry's ``base`` (ranking.pipeline.pretrain)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    effective_config,
    parse_date,
    workspace,
)
from ranking.cli.options import add_registry_option, reason_arg

if TYPE_CHECKING:
    from ranking.pipeline.pretrain import PretrainSummary


def handle_pretrain(args: argparse.Namespace) -> CommandResult[PretrainSummary]:
    from ranking.pipeline.pretrain import execute_pretrain, new_pretrain_run_id, plan_for
    from ranking.pipeline.steps import InProcessSteps

    # --days, --gap-days, --schedule, --epochs and --seed are bound to [pretrain]
    effective = effective_config(args)
    plan = plan_for(effective.config, args.end, args.registry, args.reason)
    ws = workspace(args)
    if not args.run_id:
        args.run_id = new_pretrain_run_id(args.end)
    return execute_pretrain(plan, effective, str(ws.root), args.run_id, InProcessSteps(ws, args.run_id))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``pretrain`` to ``ranker``."""
    p = sub.add_parser(
        "pretrain",
        help="train the base model on the range before the daily window and make it the registry's base",
    )
    p.add_argument(
        "--end", type=parse_date, required=True, help="eval day of the daily window the base is for"
    )
    p.add_argument(
        "--days",
        type=config_type("pretrain.days"),
        default=None,
        help="the base's range in days (default: window.days)",
    )
    p.add_argument(
        "--gap-days",
        type=config_type("pretrain.gap_days"),
        default=None,
        help="days between the base's range and the daily window",
    )
    p.add_argument(
        "--schedule", type=config_type("pretrain.schedule"), default=None, help="the base's schedule"
    )
    p.add_argument(
        "--epochs",
        type=config_type("pretrain.epochs"),
        default=None,
        help="unset: 1, or the explicit list's length",
    )
    p.add_argument("--seed", type=config_type("pretrain.seed"), default=None)
    p.add_argument("--reason", type=reason_arg, default=None, help="recorded with the base's move")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_pretrain, step="pretrain")
