"""Shared CLI plumbing: common options, JSON summaries, step-summary files, error handling.

Every command handler takes the parsed args, turns them into one typed request, calls one
function of the package that owns the command and returns a :class:`CommandResult`; argparse's
Namespace never leaves ``ranking.cli``. Handlers import heavy modules (torch, feast) inside their
bodies, so ``ranker --help`` stays fast.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from ranking.core.errors import RankerError
from ranking.core.limits import MAX_SEED
from ranking.core.results import CommandResult, record_summary
from ranking.core.workspace import Workspace, validate_run_id

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig


Handler = Callable[[argparse.Namespace], CommandResult]


def run_id_arg(value: str) -> str:
    """argparse type for --run-id: the id check's RankerError as argparse's own type error."""
    try:
        return validate_run_id(value)
    except RankerError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def add_common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options every command takes: --home, --config, --params, --json, --run-id."""
    parser.add_argument("--home", default=None, help="workspace folder (default: $RANKER_HOME, else ./var)")
    parser.add_argument(
        "--config",
        default=None,
        metavar="FILE",
        help="pipeline config (default: $RANKER_CONFIG, else <home>/ranker.toml if present)",
    )
    parser.add_argument(
        "--params",
        default=None,
        metavar="JSON",
        help='config values set by the caller, e.g. a DAG run\'s Params: {"recipe.epochs": 2} '
        "(above the config file and the flags: the operator's choice for this run; recorded as source"
        " 'param')",
    )
    parser.add_argument("--json", action="store_true", help="print one JSON object summarising what was done")
    parser.add_argument(
        "--run-id",
        type=run_id_arg,
        default=None,
        help="pipeline run id: also write the summary to <home>/pipeline/<run-id>/<step>.json",
    )
    return parser


def workspace(args: argparse.Namespace) -> Workspace:
    return Workspace.resolve(getattr(args, "home", None))


def effective_config(args: argparse.Namespace) -> EffectiveConfig:
    """The step's effective config: the one its parser loaded (``ranking.cli.config.RankerParser``),
    else loaded here from ``--home``, ``--config`` and ``--params`` (e.g. a handler test)."""
    found = getattr(args, "pipeline_config", None)
    if found is not None:
        return found  # type: ignore[no-any-return]
    from ranking.config.loader import load, parse_params

    return load(
        workspace(args).root,
        getattr(args, "config", None),
        params=parse_params(getattr(args, "params", None)),
    )


# dates a command line may name: windows, snapshots and lags are computed around them, and
# dates near year 1 or 9999 overflow the calendar a few days away
MIN_DATE, MAX_DATE = dt.date(1970, 1, 1), dt.date(2999, 12, 31)


def parse_date(value: str) -> dt.date:
    """argparse type for YYYY-MM-DD dates in [1970-01-01, 2999-12-31], with a clear error."""
    try:
        day = dt.date.fromisoformat(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {value!r}") from None
    if not MIN_DATE <= day <= MAX_DATE:
        raise argparse.ArgumentTypeError(f"date out of range ({MIN_DATE}..{MAX_DATE}): {value}")
    return day


def float_in(low: float, high: float = math.inf, *, high_inclusive: bool = True) -> Callable[[str], float]:
    """argparse type factory: a float in [low, high] (or [low, high)), with a clear error."""

    def parse(value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {value!r}") from None
        in_range = low <= x <= high if high_inclusive else low <= x < high
        if not in_range or not math.isfinite(x):  # also rejects NaN and infinities
            bound = (
                f">= {low:g}"
                if high == math.inf
                else f"in [{low:g}, {high:g}{']' if high_inclusive else ')'}"
            )
            raise argparse.ArgumentTypeError(f"must be {bound}: {x}")
        return x

    return parse


non_negative = float_in(0.0)
finite = float_in(-math.inf)  # any finite number
fraction = float_in(0.0, 1.0)  # a share, both ends allowed
fraction_below_one = float_in(0.0, 1.0, high_inclusive=False)


def int_in(low: int, high: int) -> Callable[[str], int]:
    """argparse type factory: an integer in [low, high], with a clear error."""

    def parse(value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
        if not low <= n <= high:
            raise argparse.ArgumentTypeError(f"must be in [{low}, {high}]: {n}")
        return n

    return parse


seed_int = int_in(0, MAX_SEED)


def positive_int(value: str) -> int:
    try:
        n = int(value)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not an integer: {value!r}") from None
    if n <= 0:
        raise argparse.ArgumentTypeError(f"must be > 0: {n}")
    return n


def emit(args: argparse.Namespace, step: str, result: CommandResult) -> None:
    """Print the result and, with --run-id, record it as this pipeline run's step summary."""
    if result.quiet:
        return
    summary = record_summary(workspace(args), getattr(args, "run_id", None), step, result)
    if getattr(args, "json", False):
        print(json.dumps(summary, sort_keys=True, default=str))
    elif result.text:
        print(result.text)
    else:
        print(json.dumps(summary, indent=2, sort_keys=True, default=str))
    sys.stdout.flush()


def progress_printer(what: str, *, unit: str, label: str) -> Callable[[str, int, int, float], None]:
    """A progress callback ``(item, done, total, elapsed seconds)`` for long commands: a tqdm bar
    on a terminal, else one ``<what>_progress`` log event per item (with ``<label>=item`` and an
    ETA), so a scheduler's log shows how far a run got."""
    from ranking.trainer.reports.progress import log_event

    bar = None
    if sys.stderr.isatty():
        from tqdm import tqdm

        bar = tqdm(unit=unit, desc=what, file=sys.stderr)

    def show(item: str, done: int, total: int, elapsed: float) -> None:
        if bar is not None:
            bar.total = total
            bar.set_postfix_str(item)
            bar.update(1)
            return
        fields: dict[str, Any] = {label: item, "done": done, "total": total, "elapsed_s": round(elapsed, 1)}
        fields["eta_s"] = round(elapsed / done * (total - done)) if done else None
        log_event(f"{what}_progress", **fields)

    return show
