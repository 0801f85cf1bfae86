"""``ranker`` — one CLI for every step of the pipeline; the Airflow DAG calls the same commands.

Command groups register themselves from the module that owns them (see ``_GROUPS``); each
module's ``register(subparsers)`` adds its commands with ``set_defaults(handler=..., step=...)``.
"""

from __future__ import annotations

import argparse
import importlib
import json
import logging
import os
import re
import sys
import traceback
from pathlib import Path
from typing import NoReturn

from pydantic import JsonValue

from ranking.cli.common import emit, reader_may_leave, silence_stdout, stdout_reader_gone
from ranking.cli.config import RankerParser
from ranking.core.errors import EXIT_CRASH, RankerError, as_user_error
from ranking.core.lifetime import die_with_parent
from ranking.core.noise import install as demote_library_noise

# (module, what it provides) — order is the order of `ranker --help`
_GROUPS = [
    ("ranking.cli.data", "data synth|import"),
    ("ranking.cli.features", "features apply|materialize|window|freshness"),
    ("ranking.cli.train", "train"),
    ("ranking.cli.evaluate", "evaluate"),
    ("ranking.cli.gate", "gate"),
    ("ranking.cli.decide", "decide"),
    ("ranking.cli.promote", "promote"),
    ("ranking.cli.reject", "reject"),
    ("ranking.cli.rollback", "rollback"),
    ("ranking.cli.models", "models list|show|diff"),
    ("ranking.cli.runs", "runs list"),
    ("ranking.cli.gc", "gc"),
    ("ranking.cli.tracking", "tracking replay|status|sync"),
    ("ranking.cli.run", "run"),
    ("ranking.cli.step", "step"),
    ("ranking.cli.pretrain", "pretrain"),
    ("ranking.cli.metrics", "metrics publish|show"),
    ("ranking.cli.report", "report"),
    ("ranking.cli.study", "study"),
    ("ranking.cli.backtest", "backtest"),
    ("ranking.cli.review", "review"),
    ("ranking.cli.config", "config show"),
]


class UsageError(RankerError):
    """The command line itself is wrong (unknown option, a value its type refuses)."""


MAX_ERROR_CHARS = 220
LOG_LEVELS = tuple(logging.getLevelNamesMapping())  # DEBUG, INFO, WARN, ... (upper case)


class _Parser(RankerParser):
    """argparse that reports a bad command line as one line (raised, so the caller decides
    how to print it and in-process callers are not exited)."""

    def error(self, message: str) -> NoReturn:
        # argparse quotes a refused value whole ("invalid choice: '<100 kB>' (choose from ...)")
        message = re.sub(r"\S{80,}", lambda m: f"{m[0][:40]}… ({len(m[0]):,} characters)", message)
        if len(message) > MAX_ERROR_CHARS:
            message = f"{message[:MAX_ERROR_CHARS]}… ({len(message):,} characters)"
        raise UsageError(f"{message} (see `{self.prog} --help`)")


def _fail(command: str | None, error: RankerError, want_json: bool) -> int:
    print(f"{' '.join(['ranker', *([command] if command else [])])}: error: {error}", file=sys.stderr)
    if want_json:  # the summary says what failed, as a success's says what was done
        body: dict[str, JsonValue] = {
            "step": command,
            "exit_code": error.exit_code,
            "error": str(error),
            "error_type": type(error).__name__,
        }
        with reader_may_leave():
            print(json.dumps(body, sort_keys=True, default=str))
            sys.stdout.flush()
    return error.exit_code


def _command_word(words: list[str], parser: argparse.ArgumentParser | None = None) -> str | None:
    """The command a failed parse was for, with its subcommand (``data synth``, not ``data``)."""
    plain = [w for w in words if not w.startswith("-")]
    commands = _subcommands(parser)
    # the first word that names a command (an option's value before it is not one)
    at = next((i for i, w in enumerate(plain) if w in commands), None) if parser is not None else 0
    if not plain or at is None:
        return None
    subcommands = commands.get(plain[at])
    group = _subcommands(subcommands) if subcommands is not None else {}
    return f"{plain[at]} {plain[at + 1]}" if len(plain) > at + 1 and plain[at + 1] in group else plain[at]


def _subcommands(parser: argparse.ArgumentParser | None) -> dict[str, argparse.ArgumentParser]:
    for action in parser._actions if parser is not None else []:
        if isinstance(action, argparse._SubParsersAction):
            return dict(action.choices)
    return {}


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="ranker",
        description="Home-feed ranker retraining pipeline. Command groups:\n"
        + "\n".join(f"  {what}" for _, what in _GROUPS),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--log-level", type=str.upper, choices=LOG_LEVELS, default=os.environ.get("RANKER_LOG_LEVEL", "INFO")
    )
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for module_name, _ in _GROUPS:
        importlib.import_module(module_name).register(sub)
    return parser


def configure_logging(level: str) -> None:
    """Log records to stderr (stdout is the JSON summary's), without native-library load chatter;
    third-party lines an operator cannot act on only at DEBUG (``ranking.core.noise``)."""
    logging.basicConfig(
        level=level.upper(), stream=sys.stderr, format="%(asctime)s %(levelname)s %(name)s %(message)s"
    )
    for handler in logging.getLogger().handlers:
        handler.addFilter(_not_library_chatter)
    demote_library_noise()


def _not_library_chatter(record: logging.LogRecord) -> bool:
    # fbgemm_gpu logs each native library it loads at INFO on the root logger ("Successfully
    # loaded: ..."), about 15 lines per process that bury a step's own log and an Airflow task's
    return record.levelno >= logging.WARNING or "fbgemm_gpu" not in Path(record.pathname).parts


def main(argv: list[str] | None = None) -> int:
    if argv is None:  # a process of its own (not a call in-process): die with a replay that started it
        die_with_parent()
    words = list(sys.argv[1:] if argv is None else argv)
    parser = build_parser()
    try:
        args = parser.parse_args(words)
    except UsageError as exc:  # exits as argparse would (status 2), in one line
        sys.exit(_fail(_command_word(words, parser), exc, "--json" in words))
    except RankerError as exc:  # the pipeline config is read while a step's flags are parsed
        return _fail(_command_word(words, parser), exc, "--json" in words)
    try:
        configure_logging(args.log_level)
    except ValueError as exc:
        return _fail(getattr(args, "command", None), UsageError(f"--log-level: {exc}"), "--json" in words)
    handler = getattr(args, "handler", None)
    if handler is None:
        parser.print_help()
        return 2
    name = " ".join(w for w in (args.command, getattr(args, f"{args.command}_command", None)) if w)
    result = None
    try:
        result = handler(args)
        emit(args, args.step, result)  # writes the step summary: a full disk fails here too
    except (RankerError, OSError) as exc:
        error = as_user_error(exc)
        if error is None:
            raise
        if result is not None and result.failure:
            # the step failed first (a full disk during a checkpoint), then its summary could not
            # be written either: the line names the cause, not only the last write that failed
            error = RankerError(f"{result.failure} (and its summary could not be written: {error})")
        return _fail(name, error, bool(getattr(args, "json", False)))
    except KeyboardInterrupt:
        print(f"ranker {args.command}: interrupted", file=sys.stderr)
        return 130
    if result.failure:
        # a step that failed with a summary of its own (the validation's anomalies, a run's steps)
        # still says why in one line on stderr, as every other failure does
        print(f"ranker {name}: error: {result.failure}", file=sys.stderr)
    return result.exit_code


def entry() -> int:
    """The ``ranker`` console script: ``main``, with a crash of ours printed as a traceback and
    returned as ``EXIT_CRASH`` (Python's default for an uncaught exception would be 1).

    stdout's reader going away (``ranker metrics show | head -20``) is not a crash: exit 0 quietly,
    as ``head`` users expect, wherever the write was (a summary's, --help's)."""
    try:
        try:
            return main()
        finally:  # flushed here, where a closed pipe is handled, not in the interpreter's exit
            with reader_may_leave():
                sys.stdout.flush()
    except BrokenPipeError:
        if not stdout_reader_gone():
            traceback.print_exc()
            return EXIT_CRASH
        silence_stdout()
        return 0
    except Exception:  # the last resort: the traceback is the report (SystemExit passes)
        traceback.print_exc()
        return EXIT_CRASH


if __name__ == "__main__":
    sys.exit(entry())
