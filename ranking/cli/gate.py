"""``ranker gate``: judge a candidate version against the champion (exit 0 pass, 1 reject)."""

from __future__ import annotations

import argparse
from typing import Any

from ranking.cli.common import CommandResult, add_common, parse_date, workspace
from ranking.cli.options import add_gate_options, add_registry_option, gate_config, version_arg


def _text(summary: dict[str, Any]) -> str:
    champion = (summary.get("champion") or {}).get("version")
    lines = [
        f"gate {summary['decision']}: {summary['candidate']['version']} vs "
        f"{champion or 'no champion (first run)'} on {summary['eval_date']}"
    ]
    lines += [f"  [{'ok' if c['passed'] else 'FAIL'}] {c['name']}: {c['detail']}" for c in summary["checks"]]
    return "\n".join(lines)


def handle_gate(args: argparse.Namespace) -> CommandResult:
    from ranking.gate.run import GateRequest, gate_candidate

    result = gate_candidate(
        GateRequest(
            ws=workspace(args),
            candidate=args.candidate,
            registry=args.registry,
            end=args.end,
            config=gate_config(args),
            run_id=args.run_id,
        )
    )
    return CommandResult(result.summary, exit_code=0 if result.passed else 1, text=_text(result.summary))


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``gate`` to ``ranker``."""
    p = sub.add_parser("gate", help="judge a candidate version against the champion (exit 0 pass, 1 reject)")
    p.add_argument("--candidate", type=version_arg, required=True, metavar="VERSION")
    p.add_argument("--end", type=parse_date, default=None, help="eval day (default: the candidate's own)")
    add_gate_options(p)
    add_registry_option(p)
    add_common(p)
    p.set_defaults(handler=handle_gate, step="gate")
