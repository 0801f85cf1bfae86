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
import os
import select
import sys
from abc import ABC, abstractmethod
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import TYPE_CHECKING, Any, Literal, Union, get_args, get_origin

from ranking.core.errors import RankerError
from ranking.core.limits import (
    MAX_NAME_LEN,
    MAX_PATH_LEN,
    MAX_SEED,
    MAX_TEXT_LEN,
    MAX_THREADS,
    MAX_THREADS_WHY,
)
from ranking.core.results import CommandResult, record_summary
from ranking.core.workspace import Workspace, validate_run_id

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig


Handler = Callable[[argparse.Namespace], CommandResult]


# ------------------------------------------------------------------ bounded argparse types
#
# Every flag that takes a value has a Bounded type (or argparse choices): its accepted range is
# declared on the type, where tests/reliability/test_bounds_everywhere.py reads it for every flag
# of the parser tree, so a flag added with a plain int, float or str type fails that test.

# a refused value as an error line echoes it: a 100 kB value made a 100 kB line
SHOWN_CHARS = 40


def shown(value: str) -> str:
    """``value`` as an error line quotes it: repr, cut to :data:`SHOWN_CHARS` characters."""
    text = repr(value)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(value):,} characters)"


class Bounded(ABC):
    """An argparse type that declares the range it accepts."""

    @abstractmethod
    def __call__(self, value: str) -> Any: ...


def _number(n: int) -> str:
    text = str(n)
    return text if len(text) <= SHOWN_CHARS else f"{text[:SHOWN_CHARS]}… ({len(text):,} digits)"


@dataclass(frozen=True)
class IntIn(Bounded):
    """An integer in [low, high]; ``why`` says where the bound comes from (the machine's cores)."""

    low: int
    high: int
    why: str = ""

    def __call__(self, value: str) -> int:
        try:
            n = int(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not an integer: {shown(value)}") from None
        if not self.low <= n <= self.high:
            why = f" ({self.why})" if self.why else ""
            raise argparse.ArgumentTypeError(f"must be in [{self.low}, {self.high}]: {_number(n)}{why}")
        return n


@dataclass(frozen=True)
class FloatIn(Bounded):
    """A finite float between low and high, each end included or not."""

    low: float = -math.inf
    high: float = math.inf
    low_inclusive: bool = True
    high_inclusive: bool = True

    def contains(self, x: float) -> bool:
        above = self.low <= x if self.low_inclusive else self.low < x
        below = x <= self.high if self.high_inclusive else x < self.high
        return math.isfinite(x) and above and below

    def describe(self) -> str:
        low = f"{'>=' if self.low_inclusive else '>'} {self.low:g}"
        high = f"{'<=' if self.high_inclusive else '<'} {self.high:g}"
        if self.low == -math.inf:
            return "a finite number" if self.high == math.inf else high
        if self.high == math.inf:
            return low
        brackets = ("[" if self.low_inclusive else "(", "]" if self.high_inclusive else ")")
        return f"in {brackets[0]}{self.low:g}, {self.high:g}{brackets[1]}"

    def __call__(self, value: str) -> float:
        try:
            x = float(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a number: {shown(value)}") from None
        if not self.contains(x):  # also refuses NaN and the infinities
            raise argparse.ArgumentTypeError(f"must be {self.describe()}: {x}")
        return x


@dataclass(frozen=True)
class Text(Bounded):
    """A string of at most ``max_len`` characters, then ``parse``d (checked, converted);
    ``longest`` is an accepted value of ``max_len`` characters (default ``"x" * max_len``)."""

    max_len: int
    parse: Callable[[str], Any] | None = None
    longest: str | None = None

    def __call__(self, value: str) -> Any:
        if len(value) > self.max_len:
            raise argparse.ArgumentTypeError(
                f"at most {self.max_len:,} characters, got {len(value):,}: {shown(value)}"
            )
        return self.parse(value) if self.parse is not None else value

    def at_bound(self) -> str:
        return self.longest if self.longest is not None else "x" * self.max_len


@dataclass(frozen=True)
class DateIn(Bounded):
    """A YYYY-MM-DD date in [low, high]."""

    low: dt.date
    high: dt.date

    def __call__(self, value: str) -> dt.date:
        try:
            day = dt.date.fromisoformat(value)
        except ValueError:
            raise argparse.ArgumentTypeError(f"not a date (YYYY-MM-DD): {shown(value)}") from None
        if not self.low <= day <= self.high:
            raise argparse.ArgumentTypeError(f"date out of range ({self.low}..{self.high}): {value}")
        return day


@dataclass(frozen=True)
class OneOf(Bounded):
    """One of ``choices`` (as a list's item; a flag of its own uses argparse's choices)."""

    choices: tuple[str, ...]

    def __call__(self, value: str) -> str:
        if value not in self.choices:
            raise argparse.ArgumentTypeError(f"choose from {', '.join(self.choices)}: {shown(value)}")
        return value


@dataclass(frozen=True)
class ListOf(Bounded):
    """A comma list of 1 to ``max_items`` items, each of type ``item``."""

    item: Bounded
    max_items: int

    def __call__(self, value: str) -> tuple[Any, ...]:
        words = [w.strip() for w in value.split(",") if w.strip()]
        if not words:
            raise argparse.ArgumentTypeError(f"an empty list: {shown(value)}")
        if len(words) > self.max_items:
            raise argparse.ArgumentTypeError(f"at most {self.max_items} items, got {len(words):,}")
        return tuple(self.item(w) for w in words)


def float_in(low: float, high: float = math.inf, *, high_inclusive: bool = True) -> FloatIn:
    """argparse type: a finite float in [low, high] (or [low, high))."""
    return FloatIn(low, high, high_inclusive=high_inclusive)


def int_in(low: int, high: int, why: str = "") -> IntIn:
    """argparse type: an integer in [low, high]."""
    return IntIn(low, high, why)


non_negative = float_in(0.0)
finite = float_in(-math.inf)  # any finite number
fraction = float_in(0.0, 1.0)  # a share, both ends allowed
fraction_below_one = float_in(0.0, 1.0, high_inclusive=False)
seed_int = int_in(0, MAX_SEED)
# threads, processes, replays at a time: within what the machine runs (ranking/core/limits.py)
workers_int = int_in(1, MAX_THREADS, MAX_THREADS_WHY)

# dates a command line may name: windows, snapshots and lags are computed around them, and
# dates near year 1 or 9999 overflow the calendar a few days away
MIN_DATE, MAX_DATE = dt.date(1970, 1, 1), dt.date(2999, 12, 31)
CALENDAR_DAYS = (MAX_DATE - MIN_DATE).days
parse_date = DateIn(MIN_DATE, MAX_DATE)


def _run_id(value: str) -> str:
    try:
        return validate_run_id(value)
    except RankerError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


# RUN_ID_PATTERN's length (ranking/core/ids.py): checked first, so a 100 kB id is not echoed whole
RUN_ID_MAX_LEN = 128
# --run-id, and names that become a folder the same way (a backtest's, a study's)
run_id_arg = Text(RUN_ID_MAX_LEN, _run_id, longest="r" * RUN_ID_MAX_LEN)


def _path(value: str) -> str:
    if "\0" in value:
        raise argparse.ArgumentTypeError(f"a path holds a NUL character: {shown(value)}")
    if len(os.fsencode(value)) > MAX_PATH_LEN:  # the Text bound counts characters
        raise argparse.ArgumentTypeError(f"a path over {MAX_PATH_LEN:,} bytes: {shown(value)}")
    long = [part for part in value.split("/") if len(os.fsencode(part)) > MAX_NAME_LEN]
    if long:
        raise argparse.ArgumentTypeError(f"a path component is over {MAX_NAME_LEN} bytes: {shown(long[0])}")
    return value


# a path of MAX_PATH_LEN characters, no component over MAX_NAME_LEN
_LONGEST_PATH = "/".join(["x" * MAX_NAME_LEN] * (MAX_PATH_LEN // (MAX_NAME_LEN + 1) + 1))[:MAX_PATH_LEN]
# a file or folder (kept a string: --home, --config, --out, fsspec URLs of --registry)
path_str = Text(MAX_PATH_LEN, _path, longest=_LONGEST_PATH)
# the same, as a Path
path_arg = Text(MAX_PATH_LEN, lambda value: Path(_path(value)), longest=_LONGEST_PATH)
# one line a person writes (a reason, who acts, a job's name)
text_arg = Text(MAX_TEXT_LEN)


def config_type(key: str) -> Bounded:
    """The argparse type of a flag for config key ``key`` (``"window.days"``): the key's own bounds,
    declared once on its field in ranking/config/model.py (ge/gt/le/lt, max_length, a Literal)."""
    from ranking.config.model import PATH_KEYS, SECTIONS

    section, name = key.split(".")
    field = SECTIONS[section].model_fields[name]
    kind = field.annotation
    if get_origin(kind) in (Union, UnionType):  # X | None: a flag gives X
        kind = next(a for a in get_args(kind) if a is not type(None))
    bounds: dict[str, float] = {}  # ge, gt, le, lt, max_length, as the field declares them
    for item in field.metadata:
        bounds.update(
            {k: getattr(item, k) for k in ("ge", "gt", "le", "lt", "max_length") if hasattr(item, k)}
        )
    if get_origin(kind) is Literal:
        return OneOf(tuple(str(c) for c in get_args(kind)))
    if kind is int and ("ge" in bounds or "gt" in bounds) and ("le" in bounds or "lt" in bounds):
        low = bounds["ge"] if "ge" in bounds else bounds["gt"] + 1
        return IntIn(int(low), int(bounds["le"] if "le" in bounds else bounds["lt"] - 1))
    if kind is float:
        return FloatIn(
            bounds.get("ge", bounds.get("gt", -math.inf)),
            bounds.get("le", bounds.get("lt", math.inf)),
            low_inclusive="gt" not in bounds,
            high_inclusive="lt" not in bounds,
        )
    if kind is str:
        limit = bounds.get("max_length") or SECTIONS[section].model_config.get("str_max_length")
        if limit:
            return path_str if key in PATH_KEYS and limit == MAX_PATH_LEN else Text(int(limit))
    raise TypeError(f"config key {key} has no bounds a flag could take ({field.annotation})")


# a DAG run's Params as JSON: a value for each of the config's ~100 keys fits many times over
params_arg = Text(64 * 1024)


def add_common(parser: argparse.ArgumentParser) -> argparse.ArgumentParser:
    """Options every command takes: --home, --config, --params, --json, --run-id."""
    parser.add_argument(
        "--home", type=path_str, default=None, help="workspace folder (default: $RANKER_HOME, else ./var)"
    )
    parser.add_argument(
        "--config",
        type=path_str,
        default=None,
        metavar="FILE",
        help="pipeline config (default: $RANKER_CONFIG, else <home>/ranker.toml if present)",
    )
    parser.add_argument(
        "--params",
        type=params_arg,
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


def emit(args: argparse.Namespace, step: str, result: CommandResult) -> None:
    """Print the result and, with --run-id, record it as this pipeline run's step summary."""
    if result.quiet:
        return
    summary = record_summary(workspace(args), getattr(args, "run_id", None), step, result)
    with reader_may_leave():  # the summary is recorded; `| head` may read only part of it
        if getattr(args, "json", False):
            print(json.dumps(summary, sort_keys=True, default=str))
        elif result.text:
            print(result.text)
        else:
            print(json.dumps(summary, indent=2, sort_keys=True, default=str))
        sys.stdout.flush()


def stdout_reader_gone() -> bool:
    """Whether stdout is a pipe or socket whose reader went away (``ranker ... | head``): the one
    broken pipe that is the reader's choice, not a failure (a broken pipe elsewhere still is)."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, OSError, ValueError):  # replaced by an in-memory stream, or closed
        return False
    poller = select.poll()
    poller.register(fd, select.POLLOUT)
    return any(events & (select.POLLERR | select.POLLHUP) for _, events in poller.poll(0))


def silence_stdout() -> None:
    """Point stdout's file descriptor at /dev/null, so what is still buffered (and the
    interpreter's flush at exit) goes nowhere instead of raising BrokenPipeError again."""
    devnull = os.open(os.devnull, os.O_WRONLY)
    try:
        os.dup2(devnull, sys.stdout.fileno())
    finally:
        os.close(devnull)


@contextmanager
def reader_may_leave() -> Iterator[None]:
    """Printing to stdout whose reader may go away (``| head``): the rest of the block is skipped
    and stdout silenced, and the command goes on to its own exit code; any other broken pipe raises."""
    try:
        yield
    except BrokenPipeError:
        if not stdout_reader_gone():
            raise
        silence_stdout()


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
        fields: dict[str, str | int | float | None] = {
            label: item,
            "done": done,
            "total": total,
            "elapsed_s": round(elapsed, 1),
        }
        fields["eta_s"] = round(elapsed / done * (total - done)) if done else None
        log_event(f"{what}_progress", None, **fields)  # None: the default stream, stderr

    return show
