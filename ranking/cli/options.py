"""Options shared by the registry commands: version ids, reasons, --registry and the gate thresholds."""

from __future__ import annotations

import argparse
from typing import Any

from ranking.cli.common import Text, config_type, path_str, shown, workspace
from ranking.core.ids import is_version_id
from ranking.core.limits import MAX_TEXT_LEN


def _version(value: str) -> str:
    if not is_version_id(value):
        raise argparse.ArgumentTypeError(
            f"not a version id (v followed by digits, e.g. v0003): {shown(value)}"
        )
    return value


# version ids (they reach registry paths): v + 4 to 9 digits
version_arg = Text(10, _version, longest="v999999999")


def _reason(value: str) -> str:
    if not value.strip():
        raise argparse.ArgumentTypeError("the reason must not be empty")
    return value.strip()


reason_arg = Text(MAX_TEXT_LEN, _reason)


def add_registry_option(parser: argparse.ArgumentParser) -> None:
    parser.add_argument(
        "--registry",
        type=path_str,
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


# the gate's flags: (option, GateConfig field = gate.<key>, argparse type: the key's own bounds, help);
# every GateConfig field is a flag here or in GATE_FLAGS, or config-only (tests/config/test_config_drift.py)
def _gate(option: str, name: str, text: str) -> tuple[str, str, Any, str]:
    return option, name, config_type(f"gate.{name}"), text


GATE_OPTIONS: tuple[tuple[str, str, Any, str], ...] = (
    _gate("--tolerance", "tolerance", "max relative save HIT@3 drop vs the champion"),
    _gate("--min-hit", "min_save_hit_at_3", "absolute floor on save HIT@3"),
    _gate("--min-lift-over-random", "min_lift_over_random", "HIT@3 must beat random ranking by this"),
    _gate("--max-auc-drop", "max_auc_drop", "max AUC drop vs the champion (absolute)"),
    _gate("--max-ne-rise", "max_ne_rise", "max normalized-entropy rise vs the champion"),
    _gate("--calibration-low", "calibration_low", "lowest mean prediction / base rate"),
    _gate("--calibration-high", "calibration_high", "highest mean prediction / base rate"),
    _gate("--bootstrap-samples", "bootstrap_samples", "bootstrap resamples for the CIs"),
    _gate(
        "--gate-rule", "rule", "ci: non-inferiority on the paired bootstrap CIs | point: on point estimates"
    ),
    _gate("--ci-level", "ci_level", "two-sided level of the bootstrap CIs (0.9: one-sided 95%%)"),
    _gate("--anchor-champions", "anchor_champions", "anchor: best of the last N champions (0: off)"),
    _gate("--anchor-tolerance", "anchor_tolerance", "max relative save HIT@3 drop vs the anchor"),
    _gate(
        "--reference-champions",
        "reference_champions",
        "reference: mean of the champion and the N-1 before it (0: off)",
    ),
    _gate("--reference-tolerance", "reference_tolerance", "max relative save HIT@3 drop vs the reference"),
    _gate("--trend-days", "trend_days", "trend: vs the champion served N days ago (0: off)"),
    _gate("--trend-tolerance", "trend_tolerance", "max relative save HIT@3 drop vs it"),
    _gate("--pool-days", "pool_days", "pool the change over N eval days when a CI is wide (1: never)"),
    _gate("--pool-ci-width", "pool_ci_width", "a day's CI wider than this is pooled"),
    _gate("--max-lift", "max_lift", "leakage: max lift over the best recent model (0: off)"),
    _gate(
        "--max-window-lag-days",
        "max_window_lag_days",
        "the candidate's window ends at most N days before the eval day (0: off)",
    ),
    _gate(
        "--slice-min-requests",
        "slice_min_requests",
        "slice guard: judge slices with at least N requests with a save",
    ),
    _gate("--slice-tolerance", "slice_tolerance", "slice guard: max relative save HIT@3 loss of a slice"),
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
