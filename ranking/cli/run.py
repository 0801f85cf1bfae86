"""``ranker run``: the whole retrain without Airflow (window, train, gate, promote or reject, metrics)."""

from __future__ import annotations

import argparse
import logging

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    effective_config,
    parse_date,
    workspace,
)
from ranking.cli.options import add_gate_options, add_promotion_options, add_registry_option
from ranking.core.summaries import FirstBase, RunSummary
from ranking.core.workspace import Workspace
from ranking.pipeline.run import RunPlan, execute, new_run_id
from ranking.trainer.models.config import PIPELINES

log = logging.getLogger(__name__)


def handle_run(args: argparse.Namespace) -> CommandResult[RunSummary]:
    # the run's flags are bound to their config keys (ranking.cli.config.bindings), so this one
    # effective config carries them, below --params, to every step's request
    plan = RunPlan(
        end=args.end,
        effective=effective_config(args),
        dry_run=args.dry_run,
        force_promote=args.force_promote,
        reason=args.reason,
        registry=args.registry,
    )
    ws = workspace(args)
    if not args.run_id:
        args.run_id = new_run_id(args.end)  # the CLI then records this summary as <run id>/run.json
    from ranking.pipeline.run import run_id_lock
    from ranking.pipeline.steps import InProcessSteps

    # the run id is held from the first base on: a second attempt must not pretrain a base too
    with run_id_lock(str(ws.root), args.run_id):
        pretrained = _first_base(args, ws)
    result = execute(plan, str(ws.root), args.run_id, InProcessSteps(ws, args.run_id))
    if pretrained is not None and result.summary is not None:
        result.summary = result.summary.model_copy(update={"pretrain": pretrained})
    return result


def _first_base(args: argparse.Namespace, ws: Workspace) -> FirstBase | None:
    """A recipe on the base model with no base yet: pretrain one first (what the weekly
    ranker_pretrain DAG does), under its own run id; if that fails the run still goes on, its
    train step starting from scratch ("base (none yet)"), and the summary says why. The base is
    the weekly one: the workspace's config and the run's Params it shares with the daily model,
    not the run's window or recipe flags."""
    from ranking.config.loader import load, parse_params
    from ranking.core.results import record_summary
    from ranking.pipeline.pretrain import base_params, execute_pretrain, plan_for, uses_base
    from ranking.pipeline.steps import InProcessSteps
    from ranking.registry import Registry

    if not uses_base(effective_config(args).config):
        return None
    if Registry.for_workspace(ws, args.registry).base() is not None:
        return None
    base_source = load(ws.root, args.config, params=base_params(parse_params(args.params)))
    run_id = f"{args.run_id}-pretrain"
    plan = plan_for(base_source.config, args.end, args.registry, reason=f"first base, for run {args.run_id}")
    result = execute_pretrain(plan, base_source, str(ws.root), run_id, InProcessSteps(ws, run_id))
    # as `ranker pretrain` records it: `ranker runs list` reads the folder as a pretrained base
    record_summary(ws, run_id, "pretrain", result)
    if result.exit_code != 0:
        log.warning(
            "ranker run: no base model and pretraining one failed (%s); training from scratch",
            result.summary.error if result.summary else None,
        )
    return FirstBase(
        run_id=run_id,
        exit_code=result.exit_code,
        version=result.summary.version if result.summary else None,
        error=result.summary.error if result.summary else None,
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "run",
        help="the whole retrain without Airflow: window, train, gate, promote or reject, metrics",
    )
    p.add_argument("--end", type=parse_date, required=True, help="window end = eval day (YYYY-MM-DD)")
    p.add_argument("--days", type=config_type("window.days"), default=None, help="window length")
    p.add_argument("--epochs", type=config_type("recipe.epochs"), default=None)
    p.add_argument(
        "--schedule",
        type=config_type("recipe.schedule"),
        default=None,
        help="embedding schedule, e.g. delayed or F,J,J",
    )
    p.add_argument("--pipeline", choices=PIPELINES, default=None)
    add_promotion_options(p, dry_run_help="train and gate, never move the champion")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_run, step="run")
