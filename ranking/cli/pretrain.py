"""``ranker pretrain``: train the base model on the range before the daily window and make it the
registry's ``base`` (ranking.pipeline.pretrain)."""

from __future__ import annotations

import argparse
from dataclasses import replace

from ranking.cli.common import CommandResult, add_common, parse_date, positive_int, workspace
from ranking.cli.options import add_registry_option, non_negative_int, reason_arg


def handle_pretrain(args: argparse.Namespace) -> CommandResult:
    from ranking.cli.config import config_env, effective_config
    from ranking.cli.main import build_parser
    from ranking.cli.steps import InProcessSteps
    from ranking.pipeline.pretrain import execute_pretrain, new_pretrain_run_id, plan_for
    from ranking.trainer.schedule import NAMED_SCHEDULES

    config = effective_config(args).config
    epochs = args.epochs or (1 if args.schedule in NAMED_SCHEDULES else len(args.schedule.split(",")))
    plan = replace(
        plan_for(config, args.end, args.registry, args.reason),
        days=args.days or config.window.days,
        gap_days=args.gap_days,
        schedule=args.schedule,
        epochs=epochs,
        seed=args.seed,
    )
    ws = workspace(args)
    if not args.run_id:
        args.run_id = new_pretrain_run_id(args.end)
    steps = InProcessSteps(build_parser(), str(ws.root), args.run_id)
    with config_env(args):
        result = execute_pretrain(plan, str(ws.root), args.run_id, steps)
    return CommandResult(result.summary, exit_code=result.exit_code, text=result.text)


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
        "--days", type=positive_int, default=None, help="the base's range in days (default: window.days)"
    )
    p.add_argument(
        "--gap-days",
        type=non_negative_int,
        default=0,
        help="days between the base's range and the daily window",
    )
    p.add_argument("--schedule", default="joint", help="the base's schedule")
    p.add_argument(
        "--epochs", type=positive_int, default=None, help="unset: 1, or the explicit list's length"
    )
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--reason", type=reason_arg, default=None, help="recorded with the base's move")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_pretrain, step="pretrain")
