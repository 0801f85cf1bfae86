"""``ranker models list|show``: registered versions, their status and the champion's history."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, Any

from ranking.cli.common import (
    CommandResult,
    add_common,
)
from ranking.cli.options import add_registry_option, open_registry, version_arg

if TYPE_CHECKING:
    from ranking.registry.store import Registry


def _version_row(reg: Registry, version: str, champion: str | None) -> dict[str, Any]:
    status = reg.status(version, champion)
    row: dict[str, Any] = {"version": version, "status": status}
    if status != "incomplete":
        rec = reg.record(version)
        metrics = ("save_hit_at_3", "auc", "ne", "calibration")
        row.update(
            created_at=rec.created_at,
            run_id=rec.run_id,
            eval={k: rec.eval[k] for k in metrics if k in rec.eval},
            train=rec.train,
        )
    return row


def handle_models_list(args: argparse.Namespace) -> CommandResult:
    _, reg = open_registry(args)
    champion = reg.champion()
    rows = [_version_row(reg, v, champion) for v in reg.version_ids()]
    history = [e.to_dict() for e in reg.history()]
    lines = [f"registry {reg.url}  champion: {champion or '(none)'}", "versions:"]
    for r in rows:
        hit = r.get("eval", {}).get("save_hit_at_3")
        window = r.get("train", {})
        lines.append(
            f"  {r['version']}  {r['status']:<13} HIT@3={hit if hit is None else f'{hit:.4f}'}  "
            f"train=[{window.get('train_start', '?')}, {window.get('train_end', '?')})  "
            f"created={r.get('created_at', '-')}  run={r.get('run_id') or '-'}"
        )
    lines.append("history (champion):")
    for e in history:
        forced = " FORCED" if e["forced"] else ""
        lines.append(
            f"  #{e['seq']} {e['when']} {e['action']}{forced}: {e['from'] or '(none)'} -> {e['to']}"
            f"  by {e['who']}  run={e['run_id'] or '-'}  reason: {e['reason']}"
        )
    summary = {"registry": reg.url, "champion": champion, "versions": rows, "history": history}
    return CommandResult(summary, text="\n".join(lines))


def handle_models_show(args: argparse.Namespace) -> CommandResult:
    _, reg = open_registry(args)
    champion = reg.champion()
    rec = reg.verify(args.version) if args.verify else reg.record(args.version)
    summary = {
        **rec.to_dict(),
        "status": reg.status(args.version, champion),
        "verdict": reg.verdict(args.version),
        "checksums_verified": bool(args.verify),
        "was_champion": any(e.to_version == args.version for e in reg.history()),
    }
    return CommandResult(summary)


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
