"""``ranker data synth|import``: the source interaction log (synthetic or imported)."""

from __future__ import annotations

import argparse
from pathlib import Path

from features.synth import MAX_RETURN_AFFINITY, MAX_RETURN_DAYS, SynthConfig, generate
from ranking.cli.common import (
    CALENDAR_DAYS,
    MAX_DATE,
    CommandResult,
    Text,
    add_common,
    finite,
    float_in,
    fraction,
    int_in,
    non_negative,
    parse_date,
    path_str,
    seed_int,
    shown,
    workspace,
)
from ranking.core.errors import RankerError
from ranking.core.limits import MAX_INT64


def _column_name(value: str) -> str:
    if not value or any(c in value for c in "\0\n"):
        raise argparse.ArgumentTypeError(f"not a column name: {shown(value)}")
    return value


_column = Text(128, _column_name)


def _synth(args: argparse.Namespace) -> CommandResult:
    # compared in days: start + a huge --days would overflow the calendar before the check
    if args.days > (MAX_DATE - args.start).days:
        raise RankerError(f"--start {args.start} + --days {args.days} runs past {MAX_DATE}")
    knobs = {
        k: getattr(args, k)
        for k in (
            *("users", "pins", "new_pins_per_day", "requests_per_day", "slate_size", "seed"),
            *("id_effect_scale", "label_noise", "user_exponent", "pin_exponent", "affinity_scale"),
            *("returning_user_share", "catalogue_churn"),
            *("return_share", "return_affinity", "return_days"),
        )
        if getattr(args, k) is not None
    }
    summary = generate(workspace(args), SynthConfig(start=args.start, days=args.days, **knobs))
    text = (
        f"wrote {summary.impressions:,} impressions ({summary.save_rate:.2%} saved),"
        f" {summary.start}..{summary.end}, into {summary.source}"
    )
    return CommandResult(summary, text=text)


def _import(args: argparse.Namespace) -> CommandResult:
    from features.importer import ImportConfig, import_events

    cfg = ImportConfig(
        events=Path(args.events),
        user_col=args.user_col,
        item_col=args.item_col,
        time_col=args.time_col,
        label_col=args.label_col,
        rating_col=args.rating_col,
        label_threshold=args.label_threshold,
        request_col=args.request_col,
        user_attribute_col=args.user_attribute_col,
        item_attribute_col=args.item_attribute_col,
        replace=args.replace,
        time_unit=args.time_unit,
    )
    summary = import_events(workspace(args), cfg)
    text = f"imported {summary.impressions:,} impressions over {summary.days} days into {summary.source}"
    return CommandResult(summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``data`` to ``ranker``."""
    data = sub.add_parser("data", help="source data: synth | import")
    data_sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    p = add_common(
        data_sub.add_parser("synth", help="generate a synthetic home-feed log (deterministic by seed)")
    )
    p.add_argument("--start", type=parse_date, required=True, help="first day (YYYY-MM-DD)")
    p.add_argument("--days", type=int_in(1, CALENDAR_DAYS), required=True)
    # counts numpy sizes arrays by; what the generator holds in memory (their sums and products)
    # is checked by features.synth, which names the knobs to lower
    p.add_argument("--users", type=int_in(1, MAX_INT64), default=None)
    p.add_argument(
        "--pins", type=int_in(1, MAX_INT64), default=None, help="pins in the catalogue on the first day"
    )
    p.add_argument("--new-pins-per-day", type=int_in(0, MAX_INT64), default=None)
    p.add_argument("--requests-per-day", type=int_in(1, MAX_INT64), default=None)
    p.add_argument("--slate-size", type=int_in(1, MAX_INT64), default=None)
    p.add_argument("--seed", type=seed_int, default=None, help="random seed (0 .. 2**32-1; default 0)")
    p.add_argument("--id-effect-scale", type=non_negative, default=None, help="std of per-ID logit offsets")
    p.add_argument("--label-noise", type=non_negative, default=None, help="std of per-impression logit noise")
    p.add_argument("--user-exponent", type=non_negative, default=None, help="power law of user activity")
    p.add_argument("--pin-exponent", type=non_negative, default=None, help="power law of pin popularity")
    p.add_argument("--affinity-scale", type=non_negative, default=None, help="weight of user x pin taste")
    p.add_argument(
        "--returning-user-share",
        type=fraction,
        default=None,
        help="share of a day's requests from recurring users; the rest from first-seen users (default 1)",
    )
    p.add_argument(
        "--catalogue-churn",
        type=fraction,
        default=None,
        help="share of the first day's catalogue arriving new every day (default: --new-pins-per-day)",
    )
    p.add_argument(
        "--return-share",
        type=fraction,
        default=None,
        help="users come back to pins they saved, as shoppers rebuy: each slot of a recurring user's"
        " slate is, with this probability, one of the pins the user saved in the last --return-days"
        " days (as many as it has; default: no returns)",
    )
    p.add_argument(
        "--return-affinity",
        type=float_in(-MAX_RETURN_AFFINITY, MAX_RETURN_AFFINITY),
        default=None,
        help="extra save logit of a pin its user saved in the last --return-days days, shown again"
        " (default 0 with --return-share; exp(A) is about the odds ratio)",
    )
    p.add_argument(
        "--return-days",
        type=int_in(1, MAX_RETURN_DAYS, "the history features' longest horizon"),
        default=None,
        help=f"how far back a user's saves come back (default {MAX_RETURN_DAYS}; with --return-share"
        " or --return-affinity)",
    )
    p.set_defaults(handler=_synth, step="synth")

    p = add_common(data_sub.add_parser("import", help="import a real interaction log (.parquet or .csv)"))
    p.add_argument("--events", type=path_str, required=True, help="interaction log file (.parquet or .csv)")
    p.add_argument("--user-col", type=_column, default="user_id")
    p.add_argument("--item-col", type=_column, default="item_id")
    p.add_argument("--time-col", type=_column, default="timestamp")
    label = p.add_mutually_exclusive_group()
    label.add_argument("--label-col", type=_column, default=None, help="0/1 label column (default: 'label')")
    label.add_argument(
        "--rating-col", type=_column, default=None, help="rating column; label = rating >= threshold"
    )
    p.add_argument("--label-threshold", type=finite, default=None, help="with --rating-col: positive at >= X")
    p.add_argument(
        "--request-col", type=_column, default=None, help="request id column (default: user x day)"
    )
    p.add_argument(
        "--user-attribute-col", type=_column, default=None, help="categorical user attribute -> country"
    )
    p.add_argument(
        "--item-attribute-col", type=_column, default=None, help="categorical item attribute -> category"
    )
    p.add_argument(
        "--time-unit",
        choices=("auto", "s", "ms", "us", "ns"),
        default="auto",
        help="unit of numeric timestamps (default auto: from the column's median magnitude)",
    )
    p.add_argument(
        "--replace",
        action="store_true",
        help="replace the workspace's source data (the new data is staged, then swapped in whole)",
    )
    p.set_defaults(handler=_import, step="import")
