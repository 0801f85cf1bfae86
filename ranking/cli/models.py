"""``ranker models list|show|diff``: registered versions, their status and the champion's history."""

from __future__ import annotations

import argparse
import json

from ranking.cli.common import CommandResult, add_common
from ranking.cli.options import add_registry_option, registry_of, version_arg
from ranking.registry.diff import CheckSide, DiffRequest, ModelsDiff, Row, diff_models
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


def _shown(value: object) -> str:
    if value is None:
        return "-"
    if isinstance(value, float):
        return f"{value:.6g}"
    if isinstance(value, list | dict):
        return json.dumps(value, separators=(",", ":"))
    return str(value)


def _signed(value: float | None, pattern: str) -> str:
    return "-" if value is None else format(value, pattern)


def _table(header: list[str], rows: list[list[str]]) -> list[str]:
    widths = [max(len(r[i]) for r in [header, *rows]) for i in range(len(header))]
    return [
        "  " + "  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip() for r in [header, *rows]
    ]


def _row_table(summary: ModelsDiff, rows: list[Row]) -> list[str]:
    return _table(
        ["", summary.a, summary.b, ""],
        [[r.key, _shown(r.a), _shown(r.b), "" if r.same else "differs"] for r in rows],
    )


def _check_cells(side: CheckSide | None) -> list[str]:
    if side is None:
        return ["-", "-", "-"]
    verdict = {True: "pass", False: "FAIL", None: "-"}[side.passed]
    return [_shown(side.value), _shown(side.threshold), verdict]


def _diff_text(summary: ModelsDiff) -> str:
    a, b = summary.a, summary.b
    lines = [f"registry {summary.registry}  A: {a}  B: {b}"]
    for side, version in (("a", a), ("b", b)):
        if summary.missing[side]:
            lines.append(f"{version} lacks {', '.join(summary.missing[side])} (shown as -)")
    cfg = summary.config
    lines.append(f"config: {len(cfg.differing)} keys differ, {cfg.equal} equal")
    if cfg.differing:
        lines += _table(
            ["", a, b],
            [
                [
                    r.key,
                    _shown(r.a) + (f" ({r.a_source})" if r.a_source else ""),
                    _shown(r.b) + (f" ({r.b_source})" if r.b_source else ""),
                ]
                for r in cfg.differing
            ],
        )
    lines.append("data:")
    lines += _row_table(summary, summary.data)
    lines.append("metrics:  (delta = B - A)")
    lines += _table(
        ["", a, b, "delta", "relative"],
        [
            [m.name, _shown(m.a), _shown(m.b), _signed(m.delta, "+.6g"), _signed(m.relative, "+.2%")]
            for m in summary.metrics
        ],
    )
    lines.append("gate:")
    lines += _row_table(summary, summary.gate.verdict)
    if summary.gate.checks:
        lines += _table(
            ["check", f"{a} value", "threshold", "", f"{b} value", "threshold", ""],
            [[c.name, *_check_cells(c.a), *_check_cells(c.b)] for c in summary.gate.checks],
        )
    lines.append("lineage:")
    lines += _row_table(summary, summary.lineage)
    return "\n".join(escape_text(line) for line in lines)


def handle_models_diff(args: argparse.Namespace) -> CommandResult[ModelsDiff]:
    summary = diff_models(DiffRequest(registry=registry_of(args), a=args.a, b=args.b))
    return CommandResult(summary, text=_diff_text(summary))


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
    p = models.add_parser(
        "diff", help="two versions side by side: config, data, metrics (B - A), gate checks, lineage"
    )
    p.add_argument("a", type=version_arg, help="the version compared from")
    p.add_argument("b", type=version_arg, help="the version compared with a (metrics: b - a)")
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_models_diff, step="models_diff")
