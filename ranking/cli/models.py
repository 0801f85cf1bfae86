"""``ranker models list|show``: registered versions, their status and the champion's history."""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common
from ranking.cli.options import add_registry_option, registry_of, version_arg
from ranking.registry.operations import (
    ListRequest,
    ModelShown,
    ModelsListing,
    ShowRequest,
    list_models,
    show_model,
)
from ranking.registry.records import escape_text


def _list_text(summary: ModelsListing) -> str:
    lines = [
        f"registry {summary.registry}  champion: {summary.champion or '(none)'}"
        f"  base: {summary.base or '(none)'}",
        "versions:  (what each status means: docs/registry.md, 'Statuses')",
    ]
    width = max((len(r.status) for r in summary.versions), default=0)
    for r in summary.versions:
        hit = r.eval.get("save_hit_at_3")
        window = r.train
        created = r.created_at if "created_at" in r.model_fields_set else "-"
        lines.append(
            f"  {r.version}{'*' if r.base else ' '} {r.status:<{width}} HIT@3={hit if hit is None else f'{hit:.4f}'}  "
            f"train=[{window.get('train_start', '?')}, {window.get('train_end', '?')})  "
            f"created={created}  run={r.run_id or '-'}"
        )
    for alias, events in (("champion", summary.history), ("base", summary.base_history)):
        if not events and alias == "base":
            continue
        lines.append(f"history ({alias}):")
        for e in events:
            forced = " FORCED" if e.get("forced") else ""
            lines.append(
                f"  #{e['seq']} {e['when']} {e['action']}{forced}: {e.get('from') or '(none)'} -> {e['to']}"
                f"  by {e.get('who')}  run={e.get('run_id') or '-'}  reason: {e.get('reason')}"
            )
    if summary.base:
        lines.append("(* = the base model)")
    # every line escaped: stored text (a reason, who) cannot print as extra, forged lines
    return "\n".join(escape_text(line) for line in lines)


def handle_models_list(args: argparse.Namespace) -> CommandResult[ModelsListing]:
    summary = list_models(ListRequest(registry=registry_of(args)))
    return CommandResult(summary, text=_list_text(summary))


def handle_models_show(args: argparse.Namespace) -> CommandResult[ModelShown]:
    return CommandResult(
        show_model(ShowRequest(registry=registry_of(args), version=args.version, verify=args.verify))
    )


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``models`` to ``ranker``."""
    models = sub.add_parser("models", help="registered model versions").add_subparsers(
        dest="models_command", metavar="SUBCOMMAND"
    )
    p = models.add_parser("list", help="versions, their status and the champion's history")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_models_list, step="models_list")
    p = models.add_parser("show", help="one version's record, checksums and gate verdict")
    p.add_argument("version", type=version_arg)
    p.add_argument("--verify", action="store_true", help="recompute every file's checksum")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_models_show, step="models_show")
