"""Options shared by the registry commands: version ids, reasons, --registry and the gate thresholds."""

from __future__ import annotations

import argparse
from typing import Any

from ranking.cli.common import Text, config_type, path_str, shown, workspace
from ranking.config.model import GateSection
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


# gate keys set in the config file or --params only: no operator tunes them per run
GATE_CONFIG_ONLY = ("min_score_std", "seed", "slice_guard", "slice_guard_partial")
# flags named otherwise than their key (older than the config file); every other is --<key>
_GATE_FLAG_NAMES = {"min_save_hit_at_3": "--min-hit", "rule": "--gate-rule"}


def _gate_flag(name: str) -> str:
    return _GATE_FLAG_NAMES.get(name, "--" + name.replace("_", "-"))


def _gate_help(name: str) -> str:
    return (GateSection.model_fields[name].description or "").replace("%", "%%")  # argparse %-formats help


_GATE_FLAGGED = [name for name in GateSection.model_fields if name not in GATE_CONFIG_ONLY]
# the gate's flags, from the [gate] section's fields: (option, key gate.<name>, argparse type: the
# key's own bounds, help: the field's description); a bool key is a store_true flag in GATE_FLAGS
GATE_OPTIONS: tuple[tuple[str, str, Any, str], ...] = tuple(
    (_gate_flag(name), name, config_type(f"gate.{name}"), _gate_help(name))
    for name in _GATE_FLAGGED
    if GateSection.model_fields[name].annotation is not bool
)
GATE_FLAGS: tuple[tuple[str, str, str], ...] = tuple(
    (_gate_flag(name), name, _gate_help(name))
    for name in _GATE_FLAGGED
    if GateSection.model_fields[name].annotation is bool
)


def flag_dest(option: str) -> str:
    return option.lstrip("-").replace("-", "_")


def add_gate_options(parser: argparse.ArgumentParser) -> None:
    """Gate thresholds (defaults and limits: ranking.core.summaries.GateThresholds, rationale in
    docs/registry.md)."""
    for option, _, kind, text in GATE_OPTIONS:
        parser.add_argument(option, type=kind, default=None, help=text)
    for option, _, text in GATE_FLAGS:
        parser.add_argument(option, action="store_true", help=text)


def registry_of(args: argparse.Namespace) -> str:
    """The registry root URL: --registry, else $RANKER_REGISTRY, else <home>/registry."""
    from ranking.registry import registry_url

    return registry_url(workspace(args), getattr(args, "registry", None))
