"""``ranker run``: the whole retrain without Airflow (window, train, gate, promote or reject, metrics)."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, parse_date, positive_int, workspace
from ranking.cli.options import (
    add_gate_options,
    add_promotion_options,
    add_registry_option,
    gate_passthrough,
)
from ranking.pipeline.run import RunPlan, execute, new_run_id


def handle_run(args: argparse.Namespace) -> CommandResult:
    plan = RunPlan(
        end=args.end,
        days=args.days,
        epochs=args.epochs,
        schedule=args.schedule,
        pipeline=args.pipeline,
        dry_run=args.dry_run,
        force_promote=args.force_promote,
        reason=args.reason,
        registry=args.registry,
        gate_args=tuple(gate_passthrough(args)),
    )
    ws = workspace(args)
    if not args.run_id:
        args.run_id = new_run_id(args.end)  # the CLI then records this summary as <run id>/run.json
    from ranking.cli.config import config_env
    from ranking.cli.main import build_parser
    from ranking.cli.steps import InProcessSteps

    steps = InProcessSteps(build_parser(), str(ws.root), args.run_id)
    with config_env(args):  # every step reads the run's --config, or <home>/ranker.toml
        result = execute(plan, str(ws.root), args.run_id, steps)
    return CommandResult(result.summary, exit_code=result.exit_code, text=result.text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "run",
        help="the whole retrain without Airflow: window, train, gate, promote or reject, metrics",
    )
    p.add_argument("--end", type=parse_date, required=True, help="window end = eval day (YYYY-MM-DD)")
    p.add_argument(
        "--days", type=positive_int, default=None, help="window length (default: the window builder's)"
    )
    p.add_argument("--epochs", type=positive_int, default=None)
    p.add_argument("--schedule", default=None, help="embedding schedule, e.g. delayed or F,J,J")
    p.add_argument("--pipeline", choices=("sync", "semisync"), default=None)
    add_promotion_options(p, dry_run_help="train and gate, never move the champion")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_run, step="run")
