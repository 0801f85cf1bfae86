"""Options shared by the registry commands: version ids, reasons, --registry and the gate thresholds."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ranking.cli.common import (
    fraction_below_one,
    non_negative,
    positive_int,
    workspace,
)
from ranking.core.ids import is_version_id

if TYPE_CHECKING:
    pass


def version_arg(value: str) -> str:
    """argparse type for version ids (they reach registry paths)."""
    if not is_version_id(value):
        raise argparse.ArgumentTypeError(f"not a version id (v followed by digits, e.g. v0003): {value!r}")
    return value


def reason_arg(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the reason must not be empty")
    return value.strip()


def add_registry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        default=None,
        metavar="URL",
        help="registry root: a folder or fsspec URL (default: $RANKER_REGISTRY, else <home>/registry)",
    )


def add_promotion_options(parser: argparse.ArgumentParser, dry_run_help: str) -> None:
    """--dry-run, --force-promote, --reason: the run's flags the promotion policy reads."""
    parser.add_argument("--dry-run", action="store_true", help=dry_run_help)
    parser.add_argument(
        "--force-promote", action="store_true", help="promote even if the gate rejects (needs --reason)"
    )
    parser.add_argument(
        "--reason", type=reason_arg, default=None, help="why (recorded with a forced promotion)"
    )


def gate_rule(value: str) -> str:
    from ranking.gate.checks import RULES

    if value not in RULES:
        raise argparse.ArgumentTypeError(f"choose from {', '.join(RULES)}, got {value!r}")
    return value


def non_negative_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n < 0:
        raise argparse.ArgumentTypeError(f"must be >= 0, got {n}")
    return n


# the gate's flags: (option, GateConfig field = gate.<key>, argparse type, help); every GateConfig
# field is a flag here or in GATE_FLAGS, or config-only (tests/config/test_config_drift.py)
GATE_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    ("--tolerance", "tolerance", fraction_below_one, "max relative save HIT@3 drop vs the champion"),
    ("--min-hit", "min_save_hit_at_3", non_negative, "absolute floor on save HIT@3"),
    (
        "--min-lift-over-random",
        "min_lift_over_random",
        non_negative,
        "HIT@3 must beat random ranking by this",
    ),
    ("--max-auc-drop", "max_auc_drop", non_negative, "max AUC drop vs the champion (absolute)"),
    ("--max-ne-rise", "max_ne_rise", non_negative, "max normalized-entropy rise vs the champion"),
    ("--calibration-low", "calibration_low", non_negative, "lowest mean prediction / base rate"),
    ("--calibration-high", "calibration_high", non_negative, "highest mean prediction / base rate"),
    ("--bootstrap-samples", "bootstrap_samples", positive_int, "bootstrap resamples for the CIs"),
    (
        "--gate-rule",
        "rule",
        gate_rule,
        "ci: non-inferiority on the paired bootstrap CIs | point: on point estimates",
    ),
    (
        "--ci-level",
        "ci_level",
        fraction_below_one,
        "two-sided level of the bootstrap CIs (0.9: one-sided 95%%)",
    ),
    (
        "--anchor-champions",
        "anchor_champions",
        non_negative_int,
        "anchor: best of the last N champions (0: off)",
    ),
    (
        "--anchor-tolerance",
        "anchor_tolerance",
        fraction_below_one,
        "max relative save HIT@3 drop vs the anchor",
    ),
    (
        "--reference-champions",
        "reference_champions",
        non_negative_int,
        "reference: mean of the champion and the N-1 before it (0: off)",
    ),
    (
        "--reference-tolerance",
        "reference_tolerance",
        fraction_below_one,
        "max relative save HIT@3 drop vs the reference",
    ),
    ("--trend-days", "trend_days", non_negative_int, "trend: vs the champion served N days ago (0: off)"),
    ("--trend-tolerance", "trend_tolerance", fraction_below_one, "max relative save HIT@3 drop vs it"),
    (
        "--pool-days",
        "pool_days",
        positive_int,
        "pool the change over N eval days when a CI is wide (1: never)",
    ),
    ("--pool-ci-width", "pool_ci_width", non_negative, "a day's CI wider than this is pooled"),
    ("--max-lift", "max_lift", non_negative, "leakage: max lift over the best recent model (0: off)"),
    (
        "--max-window-lag-days",
        "max_window_lag_days",
        non_negative_int,
        "the candidate's window ends at most N days before the eval day (0: off)",
    ),
    (
        "--slice-min-requests",
        "slice_min_requests",
        positive_int,
        "slice guard: judge slices with at least N requests with a save",
    ),
    (
        "--slice-tolerance",
        "slice_tolerance",
        fraction_below_one,
        "slice guard: max relative save HIT@3 loss of a slice",
    ),
)

GATE_FLAGS: tuple[tuple[str, str, str], ...] = (
    ("--allow-unfair", "allow_unfair", "compare even if a model was trained on the eval day (recorded)"),
)
# set in the config file or --params only: no operator tunes them per run
GATE_CONFIG_ONLY = ("min_score_std", "seed", "slice_guard", "slice_guard_partial")


def flag_dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """Gate thresholds (defaults: ranking.gate.checks.GateConfig, rationale in docs/registry.md)."""
    for option, _, kind, text in GATE_OPTIONS:
        parser.add_argument(option, type=kind, default=None, help=text)
    for option, _, text in GATE_FLAGS:
        parser.add_argument(option, action="store_true", help=text)


def registry_of(args: argparse.Namespace) -> str:
    """The registry root URL: --registry, else $RANKER_REGISTRY, else <home>/registry."""
    from ranking.registry import registry_url

    return registry_url(workspace(args), getattr(args, "registry", None))
