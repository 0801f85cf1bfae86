"""``ranker review``: the weekly recipe review — replay the last eval days for the configured
recipes, recommend one by the rule, switch the daily recipe when ``review.recipe = "auto"``,
write a dated report and export the figures (ranking/review; docs/backtest.md "Recipe review")."""

from __future__ import annotations

import argparse
import datetime as dt
import os
import time
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    parse_date,
    progress_printer,
    workers_int,
    workspace,
)
from ranking.core import killpoints
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from ranking.review.summary import Review


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    p = sub.add_parser(
        "review",
        help="weekly recipe review: replay the last eval days per configured recipe, recommend one",
        description="Replay the last [review] days eval days for each of [review] recipes with the backtest "
        "engine (ranker backtest), measure each recipe's served and candidate save HIT@3 lift over the "
        "baseline with a paired bootstrap CI and its training time, recommend one (the rule is in the "
        'report), switch the daily recipe if [review] recipe = "auto", write <home>/reviews/<end>/ and '
        "export the figures to Prometheus.",
    )
    add_common(p)
    p.add_argument(
        "--end", type=parse_date, default=None, help="last eval day (default: the newest source day)"
    )
    p.add_argument(
        "--days", type=config_type("review.days"), default=None, help="eval days (default: [review] days)"
    )
    p.add_argument(
        "--candidate-only",
        action="store_true",
        default=None,
        help="compare fresh candidates only: no gate replay, no served models (default: [review] candidate_only)",
    )
    p.add_argument(
        "--parallel", type=workers_int, default=None, help="recipes at a time (default: the cores)"
    )
    p.set_defaults(handler=_review, step="review")


def _newest_source_day(ws: Workspace) -> dt.date:
    from features import sources

    days = sources.list_days(ws, sources.IMPRESSIONS)
    if not days:
        raise RankerError(
            f"no source impressions under {ws.source}: nothing to review (ranker data synth|import)"
        )
    return max(days)


def _review(args: argparse.Namespace) -> CommandResult[Review]:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # served models are scored in this process
    from pydantic import ValidationError

    from ranking.backtest.engine import window_builder_for
    from ranking.backtest.replay import CliReplayer
    from ranking.cli.config import effective_config
    from ranking.config.loader import file_values, find_config_file
    from ranking.core.code_version import code_version
    from ranking.monitoring.delivery import resolve_pushgateway
    from ranking.review.metrics import deliver, review_samples
    from ranking.review.run import ReviewFailed, plan_review, run_review
    from ranking.review.summary import ReviewDelivery
    from ranking.review.switch import FAILED

    ws = workspace(args)
    daily = effective_config(args)
    settings = daily.config.review
    overrides = {
        k: v
        for k, v in (
            ("days", args.days),
            ("candidate_only", args.candidate_only),
            ("parallel", args.parallel),
        )
        if v is not None
    }
    if overrides:
        try:
            settings = type(settings).model_validate({**settings.model_dump(), **overrides})
        except ValidationError as exc:
            flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in overrides.items())
            found = "; ".join(
                str(e["msg"]).removeprefix("Value error, ") for e in exc.errors(include_url=False)
            )
            raise RankerError(f"{flags}: {found} ([review] in the config, the flags over it)") from None
    end = args.end or _newest_source_day(ws)
    plan = plan_review(settings, end, daily.config.backtest)
    base_file = find_config_file(ws.root, args.config)
    pushgateway = daily.config.metrics.pushgateway
    failure: ReviewFailed | None = None
    try:
        review = run_review(
            ws,
            plan,
            daily,
            file_values(base_file) if base_file else {},
            f"file:{base_file}" if base_file else None,
            CliReplayer(run_args=("--dry-run",) if settings.candidate_only else ()),
            parallel=settings.parallel,
            code_version=code_version(),
            window_builder=window_builder_for(daily.config.features.store_settings()),
            on_progress=progress_printer("review", unit="day", label="day"),
            run_id=args.run_id,  # the ranker_recipe_review DAG's: its tasks link to the review's MLflow run
        )
    except ReviewFailed as exc:
        failure, review = exc, exc.review
    delivered = deliver(
        review_samples(review, time.time()),
        resolve_pushgateway(pushgateway) if pushgateway != "" else None,
        ws.metrics,
    )
    killpoints.reached("review:exported")
    review.metrics = ReviewDelivery(
        delivery=delivered.delivery, target=delivered.target, samples=delivered.samples
    )
    if failure is not None:
        raise failure
    if review.status == FAILED:
        # a review that could not weigh its recipes is a failed task (the weekly DAG's run goes red)
        raise RankerError(
            f"review {review.review_id} failed (the daily recipe stays): {review.error};"
            f" report: {review.report['markdown']}"
        )
    lines = [
        f"review {review.review_id} ({review.start}..{review.end}): {review.status};"
        f" recommended {review.recommended or '—'}",
        f"  {review.reason or review.error or ''}",
        f"  daily recipe: {review.switch.reason if review.switch else ''}",
        f"  report: {review.report['markdown']}",
    ]
    return CommandResult(summary=review, text="\n".join(lines))
