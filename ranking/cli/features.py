"""``ranker features apply|materialize|window|validate|accept|freshness``: the Feast repository,
training windows and their data validation.

Handlers import pandas/feast inside their bodies so that ``ranker --help`` stays fast. The Feast
store (offline duckdb | spark, online sqlite | redis) is the pipeline config's ``[features]``
section (environment layer: $RANKER_OFFLINE_STORE, $RANKER_ONLINE_STORE, $RANKER_REDIS_URL),
handed to ``features`` as a ``StoreSettings`` argument.
"""

from __future__ import annotations

import argparse
import os
from typing import TYPE_CHECKING

from ranking.cli.common import (
    CommandResult,
    add_common,
    config_type,
    effective_config,
    parse_date,
    text_arg,
    workspace,
)
from ranking.cli.options import reason_arg
from ranking.core.errors import RankerError

if TYPE_CHECKING:
    from features.feast_repo import StoreSettings


def _env_lag_hours() -> float | None:
    raw = os.environ.get("RANKER_MAX_SOURCE_LAG_HOURS", "").strip()
    if not raw:
        return None
    try:
        return config_type("window.max_source_lag_hours")(raw)
    except argparse.ArgumentTypeError as exc:
        raise RankerError(f"RANKER_MAX_SOURCE_LAG_HOURS: {exc}") from None


def store_settings(args: argparse.Namespace) -> StoreSettings:
    """The step's Feast store: the effective config's ``[features]`` section."""
    from ranking.cli.config import effective_config

    return effective_config(args).config.features.store_settings()


def _apply(args: argparse.Namespace) -> CommandResult:
    from features.feast_repo import apply

    summary = apply(workspace(args), store_settings(args))
    return CommandResult(summary, text=f"applied Feast repo (feature version {summary.feature_version})")


def _materialize(args: argparse.Namespace) -> CommandResult:
    from ranking.pipeline.steps import MaterializeRequest, materialize

    return materialize(MaterializeRequest(workspace(args), args.end, store_settings(args)))


def _window(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import window_request
    from ranking.pipeline.steps import window

    # --days and the checks are bound to [window]: given flags are in the effective config
    return window(window_request(effective_config(args).config, workspace(args), args.end))


def _validate(args: argparse.Namespace) -> CommandResult:
    from ranking.config.requests import validation_request
    from ranking.pipeline.steps import validate

    return validate(validation_request(effective_config(args).config, workspace(args), args.end))


def _accept(args: argparse.Namespace) -> CommandResult:
    from features.validation.step import accept
    from ranking.registry import current_actor

    acceptance = accept(workspace(args), args.anomaly, args.reason, current_actor())
    summary = {
        "anomaly": acceptance.key,
        "reason": acceptance.reason,
        "who": acceptance.who,
        "when": acceptance.when,
    }
    text = (
        f"accepted {acceptance.key} ({acceptance.reason}) as {acceptance.who}: run"
        " `ranker features validate` (or the retrain) again"
    )
    return CommandResult(summary, text=text)


def _freshness(args: argparse.Namespace) -> CommandResult:
    from features.window import FreshnessRequest, freshness

    max_lag = args.max_lag_hours if args.max_lag_hours is not None else _env_lag_hours()
    summary = freshness(FreshnessRequest(workspace(args), args.end, max_lag))
    text = f"latest source day {summary.latest_source_date}, lag {summary.lag_seconds / 3600:.1f} h"
    return CommandResult(summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``features`` to ``ranker``."""
    feats = sub.add_parser(
        "features",
        help="Feast repo, training windows and their data validation:"
        " apply | materialize | window | validate | accept | freshness",
    )
    fsub = feats.add_subparsers(dest="features_command", metavar="SUBCOMMAND", required=True)

    p = add_common(
        fsub.add_parser("apply", help="register the Feast repository (features/repo) in the workspace")
    )
    p.set_defaults(handler=_apply, step="apply")

    p = add_common(fsub.add_parser("materialize", help="load the online store (first run: full range)"))
    p.add_argument("--end", type=parse_date, default=None, help="features as of the end of this day")
    p.set_defaults(handler=_materialize, step="materialize")

    p = add_common(fsub.add_parser("window", help="build the training window [end-days, end) + eval day end"))
    p.add_argument(
        "--end", type=parse_date, required=True, help="eval day; training days are [end-days, end)"
    )
    # bound flags (ranking.cli.config.bindings): an unset one takes the config's value
    p.add_argument("--days", type=config_type("window.days"), default=None, help="window length in days")
    p.add_argument(
        "--min-coverage",
        type=config_type("window.min_coverage"),
        default=None,
        help="fraction of training days required",
    )
    p.set_defaults(handler=_window, step="window")

    p = add_common(
        fsub.add_parser(
            "validate",
            help="validate a built window's data against its kept schema and its history (exit 2 on a"
            " failing anomaly); thresholds and policies: the [validation] config section",
        )
    )
    p.add_argument("--end", type=parse_date, required=True, help="the window's eval day")
    p.add_argument("--days", type=config_type("window.days"), default=None, help="window length in days")
    p.set_defaults(handler=_validate, step="validate")

    p = add_common(
        fsub.add_parser(
            "accept",
            help="accept one anomaly of one day with a reason (recorded with who and when); the next"
            " validation lets it pass",
        )
    )
    p.add_argument(
        "--anomaly",
        type=text_arg,
        required=True,
        help="KIND[:FEATURE]@YYYY-MM-DD as the validation report and its error line name it",
    )
    p.add_argument(
        "--reason", type=reason_arg, required=True, help="why this day's anomaly is accepted (one line)"
    )
    p.set_defaults(handler=_accept, step="accept")

    p = add_common(fsub.add_parser("freshness", help="newest source day and its lag"))
    p.add_argument("--end", type=parse_date, default=None, help="require this day; measure lag from its end")
    p.add_argument(
        "--max-lag-hours",
        type=config_type("window.max_source_lag_hours"),
        default=None,
        help="fail when the lag is larger (default: $RANKER_MAX_SOURCE_LAG_HOURS, else report only)",
    )
    p.set_defaults(handler=_freshness, step="freshness")
