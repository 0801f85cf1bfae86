"""``ranker`` — one CLI for every step of the pipeline; the Airflow DAG calls the same commands.

Command groups register themselves from the module that owns them (see ``_GROUPS``); each
module's ``register(subparsers)`` adds its commands with ``set_defaults(handler=..., step=...)``.
"""

from __future__ import annotations

import argparse
import importlib
import logging
import os
import sys

from ranking.cli.common import emit
from ranking.cli.config import RankerParser
from ranking.core.errors import RankerError

# (module, what it provides) — order is the order of `ranker --help`
_GROUPS = [
    ("ranking.cli.data", "data synth|import"),
    ("ranking.cli.features", "features apply|materialize|window|freshness"),
    ("ranking.cli.train", "train"),
    ("ranking.cli.evaluate", "evaluate"),
    ("ranking.cli.gate", "gate"),
    ("ranking.cli.promote", "promote"),
    ("ranking.cli.reject", "reject"),
    ("ranking.cli.rollback", "rollback"),
    ("ranking.cli.models", "models list|show"),
    ("ranking.cli.run", "run"),
    ("ranking.cli.metrics", "metrics publish|show"),
    ("ranking.cli.study", "study"),
    ("ranking.cli.backtest", "backtest"),
    ("ranking.cli.config", "config show"),
]


def build_parser() -> argparse.ArgumentParser:
    parser = RankerParser(
        prog="ranker",
        description="Home-feed ranker retraining pipeline. Command groups:\n"
        + "\n".join(f"  {what}" for _, what in _GROUPS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--log-level", default=os.environ.get("RANKER_LOG_LEVEL", "INFO"))
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name, _ in _GROUPS:
        importlib.import_module(module_name).register(sub)
    return parser


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    try:
        args = parser.parse_args(argv)
    except RankerError as exc:  # the pipeline config is read while parsing a step
        print(f"ranker: {exc}", file=sys.stderr)
        return exc.exit_code
    logging.basicConfig(
        level=args.log_level.upper(),
        stream=sys.stderr,
        format="%(asctime)s %(levelname)s %(name)s %(message)s",
    )
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    try:
        result = handler(args)
    except RankerError as exc:
        print(f"ranker {args.command}: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        print(f"ranker {args.command}: interrupted", file=sys.stderr)
        return 130
    emit(args, args.step, result)
    return result.exit_code


if __name__ == "__main__":
    sys.exit(main())
