"""``ranker data synth|import`` and ``ranker features apply|materialize|window|freshness``.

Handlers import pandas/feast inside their bodies so that ``ranker --help`` stays fast.
"""

from __future__ import annotations

import argparse
import os
from pathlib import Path

from ranking.cli_common import (
    CommandResult,
    add_common,
    fraction,
    non_negative,
    parse_date,
    positive_int,
    workspace,
)
from ranking.errors import RankerError

DEFAULT_WINDOW_DAYS = 20


def _env_lag_hours() -> float | None:
    raw = os.environ.get("RANKER_MAX_SOURCE_LAG_HOURS", "").strip()
    if not raw:
        return None
    try:
        return non_negative(raw)
    except argparse.ArgumentTypeError as exc:
        raise RankerError(f"RANKER_MAX_SOURCE_LAG_HOURS: {exc}") from None


def _column(value: str) -> str:
    if not value or len(value) > 128 or any(c in value for c in "\0\n"):
        raise argparse.ArgumentTypeError(f"not a column name: {value!r}")
    return value


def _synth(args: argparse.Namespace) -> CommandResult:
    from features.synth import SynthConfig, generate

    knobs = {
        k: getattr(args, k)
        for k in (
            *("users", "pins", "new_pins_per_day", "requests_per_day", "slate_size", "seed"),
            *("id_effect_scale", "label_noise", "user_exponent", "pin_exponent", "affinity_scale"),
        )
        if getattr(args, k) is not None
    }
    summary = generate(workspace(args), SynthConfig(start=args.start, days=args.days, **knobs))
    text = (
        f"wrote {summary['impressions']:,} impressions ({summary['save_rate']:.2%} saved),"
        f" {summary['start']}..{summary['end']}, into {summary['source']}"
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
    )
    summary = import_events(workspace(args), cfg)
    text = f"imported {summary['impressions']:,} impressions over {summary['days']} days into {summary['source']}"
    return CommandResult(summary, text=text)


def _apply(args: argparse.Namespace) -> CommandResult:
    from features.feast_repo import apply

    summary = apply(workspace(args))
    return CommandResult(summary, text=f"applied Feast repo (feature version {summary['feature_version']})")


def _materialize(args: argparse.Namespace) -> CommandResult:
    from features.feast_repo import materialize

    summary = materialize(workspace(args), args.end)
    return CommandResult(summary, text=f"materialized ({summary['mode']}) up to {summary['end']}")


def _window(args: argparse.Namespace) -> CommandResult:
    from features.validation import WindowChecks
    from features.window import build_window, manifest_path

    ws = workspace(args)
    checks = WindowChecks(
        min_coverage=args.min_coverage,
        min_label_rate=args.min_label_rate,
        max_label_rate=args.max_label_rate,
        max_null_rate=args.max_null_rate,
    )
    m = build_window(ws, args.end, args.days, checks)
    summary = {
        k: m[k]
        for k in (
            "window_id",
            "end",
            "days",
            "rows_train",
            "rows_eval",
            "label_rate",
            "days_built",
            "days_reused",
            "missing_days",
            "feature_version",
            "duration_seconds",
        )
    }
    summary["manifest"] = str(manifest_path(ws, args.end, args.days))
    text = (
        f"window {m['end']} ({m['days']}d): {m['rows_train']:,} train rows, {m['rows_eval']:,} eval rows,"
        f" {m['days_built']} days built, {m['days_reused']} reused -> {summary['manifest']}"
    )
    return CommandResult(summary, text=text)


def _freshness(args: argparse.Namespace) -> CommandResult:
    from features.window import freshness

    max_lag = args.max_lag_hours if args.max_lag_hours is not None else _env_lag_hours()
    summary = freshness(workspace(args), args.end, max_lag)
    text = f"latest source day {summary['latest_source_date']}, lag {summary['lag_seconds'] / 3600:.1f} h"
    return CommandResult(summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add this component's commands to ``ranker``."""
    data = sub.add_parser("data", help="source data: synth | import")
    data_sub = data.add_subparsers(dest="data_command", metavar="SUBCOMMAND", required=True)

    p = add_common(
        data_sub.add_parser("synth", help="generate a synthetic home-feed log (deterministic by seed)")
    )
    p.add_argument("--start", type=parse_date, required=True, help="first day (YYYY-MM-DD)")
    p.add_argument("--days", type=positive_int, required=True)
    p.add_argument("--users", type=positive_int, default=None)
    p.add_argument("--pins", type=positive_int, default=None, help="pins in the catalogue on the first day")
    p.add_argument("--new-pins-per-day", type=int, default=None)
    p.add_argument("--requests-per-day", type=positive_int, default=None)
    p.add_argument("--slate-size", type=positive_int, default=None)
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--id-effect-scale", type=non_negative, default=None, help="std of per-ID logit offsets")
    p.add_argument("--label-noise", type=non_negative, default=None, help="std of per-impression logit noise")
    p.add_argument("--user-exponent", type=non_negative, default=None, help="power law of user activity")
    p.add_argument("--pin-exponent", type=non_negative, default=None, help="power law of pin popularity")
    p.add_argument("--affinity-scale", type=non_negative, default=None, help="weight of user x pin taste")
    p.set_defaults(handler=_synth, step="synth")

    p = add_common(data_sub.add_parser("import", help="import a real interaction log (.parquet or .csv)"))
    p.add_argument("--events", required=True, help="interaction log file (.parquet or .csv)")
    p.add_argument("--user-col", type=_column, default="user_id")
    p.add_argument("--item-col", type=_column, default="item_id")
    p.add_argument("--time-col", type=_column, default="timestamp")
    label = p.add_mutually_exclusive_group()
    label.add_argument("--label-col", type=_column, default=None, help="0/1 label column (default: 'label')")
    label.add_argument(
        "--rating-col", type=_column, default=None, help="rating column; label = rating >= threshold"
    )
    p.add_argument("--label-threshold", type=float, default=None, help="with --rating-col: positive at >= X")
    p.add_argument(
        "--request-col", type=_column, default=None, help="request id column (default: user x day)"
    )
    p.add_argument(
        "--user-attribute-col", type=_column, default=None, help="categorical user attribute -> country"
    )
    p.add_argument(
        "--item-attribute-col", type=_column, default=None, help="categorical item attribute -> category"
    )
    p.add_argument("--replace", action="store_true", help="delete the workspace's existing source data first")
    p.set_defaults(handler=_import, step="import")

    feats = sub.add_parser(
        "features", help="Feast repo and training windows: apply | materialize | window | freshness"
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
    p.add_argument("--days", type=positive_int, default=DEFAULT_WINDOW_DAYS)
    p.add_argument("--min-coverage", type=fraction, default=0.9, help="fraction of training days required")
    p.add_argument("--min-label-rate", type=fraction, default=0.001)
    p.add_argument("--max-label-rate", type=fraction, default=0.5)
    p.add_argument("--max-null-rate", type=fraction, default=0.5, help="per feature column and day")
    p.set_defaults(handler=_window, step="window")

    p = add_common(fsub.add_parser("freshness", help="newest source day and its lag"))
    p.add_argument("--end", type=parse_date, default=None, help="require this day; measure lag from its end")
    p.add_argument(
        "--max-lag-hours",
        type=non_negative,
        default=None,
        help="fail when the lag is larger (default: $RANKER_MAX_SOURCE_LAG_HOURS, else report only)",
    )
    p.set_defaults(handler=_freshness, step="freshness")
