"""``ranker metrics publish|show`` — a pipeline run's Prometheus metrics (ranking/monitoring/)."""

from __future__ import annotations

import argparse
import os

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    effective_config,
    int_in,
    text_arg,
    workspace,
)
from ranking.core.errors import RankerError

# each failed push waits twice as long as the one before (ranking.monitoring.delivery): the 10th
# waits about 8.5 minutes, past what a task's metrics are worth holding it for
MAX_PUSH_ATTEMPTS = 10


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``metrics publish`` and ``metrics show`` to ``ranker``."""
    metrics = sub.add_parser("metrics", help="publish or show a pipeline run's Prometheus metrics")
    msub = metrics.add_subparsers(dest="metrics_command", metavar="SUBCOMMAND")

    publish = msub.add_parser(
        "publish",
        help="turn a run's step summaries into metrics: Pushgateway if configured, else a textfile",
        description="Reads <home>/pipeline/<run-id>/*.json (+ failures/*.json), updates the "
        "workspace's metric state (counters, last-success time) and pushes the metrics to the "
        "Pushgateway (--pushgateway or $RANKER_PUSHGATEWAY_URL), retrying; without one, or when "
        "every push fails, writes them atomically to <home>/metrics/ranker.prom. A failed push "
        "never fails this command.",
    )
    add_common(publish)
    publish.add_argument(
        "--status",
        choices=("success", "failed"),
        default=None,
        help="final status of the run (default: failed if it has failure records)",
    )
    publish.add_argument(
        "--failed-step", type=text_arg, default=None, help="the step that failed (with --status failed)"
    )
    publish.add_argument(
        "--pushgateway",
        type=config_type("metrics.pushgateway"),
        default=None,
        help="Pushgateway base URL (default: $RANKER_PUSHGATEWAY_URL; '' = none)",
    )
    publish.add_argument(
        "--job",
        type=config_type("metrics.job"),
        default=None,
        help="Pushgateway grouping key job (default: ranker_retrain)",
    )
    publish.add_argument("--push-attempts", type=int_in(1, MAX_PUSH_ATTEMPTS), default=3)
    publish.add_argument(
        "--textfile",
        type=config_type("metrics.textfile"),
        default=None,
        help="textfile-collector output (default: <home>/metrics/ranker.prom)",
    )
    publish.set_defaults(handler=_publish, step="metrics")

    show = msub.add_parser("show", help="print the metrics of the last publish in this workspace")
    add_common(show)
    show.set_defaults(handler=_show, step="metrics-show")


def _workspace_origin(home: str | None) -> str:
    if home:
        return f"--home {home}"
    if os.environ.get("RANKER_HOME"):
        return f"$RANKER_HOME={os.environ['RANKER_HOME']}"
    return "the default ./var: neither --home nor $RANKER_HOME is set"


def _publish(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import publish_request
    from ranking.pipeline.steps import publish

    if not args.run_id:
        raise RankerError("metrics publish needs --run-id (the pipeline run whose summaries to read)")
    # --pushgateway, --job and --textfile are bound to [metrics]: given ones are in the config
    config = effective_config(args).config
    request = publish_request(
        config,
        workspace(args),
        args.run_id,
        status=args.status,
        failed_step=args.failed_step,
        push_attempts=args.push_attempts,
    )
    return publish(request)


def _show(args: argparse.Namespace) -> CommandResult:
    from ranking.monitoring.publish import ShowRequest, show

    last = show(ShowRequest(workspace=workspace(args), origin=_workspace_origin(args.home)))
    return CommandResult(summary=last.summary, text=last.exposition.rstrip("\n"))
