"""Issue 32, "Deliver 4": every flag of the `ranker` parser tree and every key of the pipeline
config refuses what lies outside its declared bounds (-1, 2**64, nan, inf, a 100 kB string,
wherever out of range) in one short line and exit 2 before anything runs, and accepts the bounds
themselves. Flags and keys are found by walking the parser and the config models, so one added
later is covered as it is; a flag whose value type declares no bounds (a plain int, float or str)
fails `test_every_flag_that_takes_a_value_declares_its_bounds`."""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import re
import sys
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from types import UnionType
from typing import Any, Literal, Union, get_args, get_origin

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from ranking.cli.common import Bounded, DateIn, FloatIn, IntIn, ListOf, OneOf, Text, workers_int
from ranking.cli.main import build_parser, main
from ranking.config.loader import ConfigFileError, load, parse_params
from ranking.config.model import PipelineConfig
from ranking.core.limits import MAX_THREADS, MAX_THREADS_WHY

JUNK = {"-1": "-1", "2**64": str(2**64), "nan": "nan", "inf": "inf", "100kB": "x" * 100_000}
# a refusal is one line a person reads, whatever the size of what was refused (a config error
# also names the key and where its value came from)
MAX_LINE = 300
MAX_CONFIG_LINE = 400
# flags that start threads or processes: bounded by the machine's cores (ranking/core/limits.py)
WORKER_FLAGS = ("threads", "nproc", "parallel", "workers")


# ------------------------------------------------------------------ the flags


@dataclass(frozen=True)
class Flag:
    path: tuple[str, ...]  # the subcommand words: ("data", "synth")
    action: argparse.Action
    before: tuple[str, ...] = ()  # valid values of the positionals before this one (`models diff A B`)

    @property
    def name(self) -> str:
        return self.action.option_strings[0] if self.action.option_strings else self.action.dest

    @property
    def id(self) -> str:
        return " ".join([*self.path, self.name])

    def argv(self, value: str, home: Path) -> list[str]:
        given = [self.name, value] if self.action.option_strings else [*self.before, value]
        if not self.path:  # an option of `ranker` itself, before a command that takes --home
            return [*given, "config", "show", "--home", str(home)]
        return [*self.path, *given, "--home", str(home)]


def _walk(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> Iterator[Flag]:
    before: list[str] = []
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for word, child in action.choices.items():
                yield from _walk(child, (*path, word))
        elif action.nargs != 0:  # store_true, --help, --x/--no-x take no value
            yield Flag(path, action, tuple(before))
            if not action.option_strings:
                before.append(str(getattr(action.type, "longest", "")))


FLAGS = list(_walk(build_parser()))


def _int_out(kind: IntIn, value: str) -> bool:
    try:
        return not kind.low <= int(value) <= kind.high
    except ValueError:
        return True


def _float_out(kind: FloatIn, value: str) -> bool:
    try:
        x = float(value)
    except ValueError:
        return True
    above = kind.low <= x if kind.low_inclusive else kind.low < x
    below = x <= kind.high if kind.high_inclusive else x < kind.high
    return not (math.isfinite(x) and above and below)


def _date_out(kind: DateIn, value: str) -> bool:
    try:
        return not kind.low <= dt.date.fromisoformat(value) <= kind.high
    except ValueError:
        return True


def _list_out(kind: ListOf, value: str) -> bool:
    items = [w.strip() for w in value.split(",") if w.strip()]
    return not items or len(items) > kind.max_items or any(_out_of_bounds(kind.item, w) for w in items)


# each kind of bounded type: whether a value lies outside the bounds it declares (read here from
# its fields, not by calling it)
OUT_OF_BOUNDS: dict[type[Bounded], Callable[[Any, str], bool]] = {
    IntIn: _int_out,
    FloatIn: _float_out,
    Text: lambda kind, value: len(value) > kind.max_len,
    DateIn: _date_out,
    OneOf: lambda kind, value: value not in kind.choices,
    ListOf: _list_out,
}


def _out_of_bounds(kind: Bounded, value: str) -> bool:
    check = OUT_OF_BOUNDS.get(type(kind))
    assert check is not None, f"teach this test the bounds of {type(kind).__name__}"
    return check(kind, value)


def _declared_out(action: argparse.Action, value: str) -> bool:
    if action.choices is not None:
        try:
            converted = action.type(value) if callable(action.type) else value
        except (argparse.ArgumentTypeError, ValueError, TypeError):
            return True
        return converted not in action.choices
    assert isinstance(action.type, Bounded)
    return _out_of_bounds(action.type, value)


def _refuses(action: argparse.Action, value: str) -> bool:
    try:
        converted = action.type(value) if callable(action.type) else value
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return True
    return action.choices is not None and converted not in action.choices


def _bounded(flag: Flag) -> bool:
    return isinstance(flag.action.type, Bounded) or flag.action.choices is not None


def _refusals() -> list[Any]:
    return [
        pytest.param(flag, junk, id=f"{flag.id}={junk}")
        for flag in FLAGS
        if _bounded(flag)
        for junk, value in JUNK.items()
        if _declared_out(flag.action, value) or _refuses(flag.action, value)
    ]


def _exit_code(argv: list[str]) -> int:
    try:
        return main(argv)
    except SystemExit as exc:
        return int(exc.code or 0)


def test_the_walk_finds_the_whole_tree() -> None:
    ids = {flag.id for flag in FLAGS}
    assert len(FLAGS) > 150, len(FLAGS)
    for expected in ("--log-level", "train --threads", "data synth --seed", "models show version"):
        assert expected in ids
    assert {"gc --grace-hours", "config show --home", "metrics publish --push-attempts"} <= ids


def test_every_flag_that_takes_a_value_declares_its_bounds() -> None:
    unbounded = [flag.id for flag in FLAGS if not _bounded(flag)]
    assert unbounded == [], f"give these flags a Bounded type (ranking/cli/common.py): {unbounded}"
    # one value per flag: the argv of the refusals below gives it once
    assert [flag.id for flag in FLAGS if flag.action.nargs is not None] == []


def test_flags_that_start_threads_or_processes_are_bounded_by_the_cores() -> None:
    workers = [flag for flag in FLAGS if flag.action.dest in WORKER_FLAGS]
    assert {flag.id for flag in workers} >= {"train --threads", "train --nproc", "review --parallel"}
    assert [flag.id for flag in workers if flag.action.type is not workers_int] == []
    assert workers_int == IntIn(1, MAX_THREADS, MAX_THREADS_WHY)


@pytest.mark.parametrize(("flag", "junk"), _refusals())
def test_a_flag_refuses_what_is_out_of_its_bounds_in_one_line_before_anything_runs(
    flag: Flag, junk: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    value = JUNK[junk]
    assert _refuses(flag.action, value), f"{flag.id} accepts {junk}, outside its bounds"
    home = tmp_path / "home"
    assert _exit_code(flag.argv(value, home)) == 2
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1 and "Traceback" not in err, err[:2000]
    assert len(lines[0]) < MAX_LINE and flag.name in lines[0], lines[0]
    assert not home.exists()  # nothing started


def _edges(kind: Bounded) -> tuple[list[str], list[str]]:
    """(the bounds themselves, values just past them) of ``kind``."""
    if isinstance(kind, IntIn):
        return [str(kind.low), str(kind.high)], [str(kind.low - 1), str(kind.high + 1)]
    if isinstance(kind, FloatIn):
        inside: list[str] = []
        outside: list[str] = []
        for bound, inclusive in ((kind.low, kind.low_inclusive), (kind.high, kind.high_inclusive)):
            if math.isfinite(bound):
                (inside if inclusive else outside).append(repr(bound))
            else:  # open-ended: the largest finite number is inside
                inside.append(repr(math.copysign(sys.float_info.max, bound)))
        return inside, outside
    if isinstance(kind, Text):
        return [kind.at_bound()], [kind.at_bound() + "x"]
    if isinstance(kind, DateIn):
        day = dt.timedelta(days=1)
        return [str(kind.low), str(kind.high)], [str(kind.low - day), str(kind.high + day)]
    if isinstance(kind, OneOf):
        return list(kind.choices), []
    if isinstance(kind, ListOf):
        inside, _ = _edges(kind.item)
        items = (inside * kind.max_items)[: kind.max_items]
        return [",".join(items)], [",".join([*items, inside[0]])]
    raise AssertionError(f"teach this test the bounds of {type(kind).__name__}")


@pytest.mark.parametrize("flag", [pytest.param(f, id=f.id) for f in FLAGS if _bounded(f)])
def test_a_flag_accepts_its_bounds_themselves(flag: Flag) -> None:
    if flag.action.choices is not None:
        inside, outside = [str(c) for c in flag.action.choices], ["not-a-choice"]
    else:
        assert isinstance(flag.action.type, Bounded)
        inside, outside = _edges(flag.action.type)
    for value in inside:
        assert not _refuses(flag.action, value), f"{flag.id} refuses its bound {value[:80]!r}"
    for value in outside:
        assert _refuses(flag.action, value), f"{flag.id} accepts {value[:80]!r}, past its bound"


# ------------------------------------------------------------------ the config


@dataclass(frozen=True)
class Key:
    key: str  # dotted, as an error names it: "gate.seed", "recipe.table_optimizer.lr"
    kind: Any  # the annotation, without "| None"
    field: FieldInfo
    parent: type[BaseModel]

    def overrides(self, value: Any) -> dict[str, Any]:
        """``--params`` setting this key to ``value``; a nested table's other keys valid."""
        parts = self.key.split(".")
        if len(parts) == 2:
            return {self.key: value}
        return {".".join(parts[:2]): {**_valid(self.parent), parts[2]: value}}

    def bounds(self) -> dict[str, Any]:
        found: dict[str, Any] = {}
        for item in self.field.metadata:
            found.update({k: getattr(item, k) for k in ("ge", "gt", "le", "lt") if hasattr(item, k)})
        return found


def _plain(annotation: Any) -> Any:
    if get_origin(annotation) in (Union, UnionType):
        return next(a for a in get_args(annotation) if a is not type(None))
    return annotation


def _keys(model: type[BaseModel], prefix: str) -> Iterator[Key]:
    for name, field in model.model_fields.items():
        kind = _plain(field.annotation)
        if isinstance(kind, type) and issubclass(kind, BaseModel):
            yield from _keys(kind, f"{prefix}.{name}")
        else:
            yield Key(f"{prefix}.{name}", kind, field, model)


def _valid(model: type[BaseModel]) -> dict[str, Any]:
    """A nested table's required keys, each set to a value its bounds take."""
    values: dict[str, Any] = {}
    for key in _keys(model, "x"):
        if key.field.is_required():
            bounds = key.bounds()
            if get_origin(key.kind) is Literal:
                values[key.key.split(".")[-1]] = get_args(key.kind)[0]
            else:
                values[key.key.split(".")[-1]] = bounds.get("le", bounds.get("ge", bounds.get("gt", 0) + 1))
    return values


KEYS = [
    key for section, field in PipelineConfig.model_fields.items() for key in _keys(field.annotation, section)
]
BIG = "x" * 100_000


def _junk(key: Key) -> list[tuple[str, Any]]:
    """The out-of-range values of ``key``: -1 and 2**64 where past its bounds, nan and inf for a
    float, a 100 kB string wherever a string goes (the value, a list's item, a table's key)."""
    bounds = key.bounds()
    low = bounds.get("ge", bounds.get("gt"))
    high = bounds.get("le", bounds.get("lt"))
    if key.kind is int or key.kind is float:
        number = int if key.kind is int else float
        junk = [("-1", number(-1))] if low is not None and low > -1 else []
        junk += [("2**64", number(2**64))] if high is not None and high < 2**64 else []
        return junk + ([("nan", math.nan), ("inf", math.inf)] if key.kind is float else [])
    if key.kind is str or get_origin(key.kind) is Literal:
        return [("100kB", BIG)]
    if get_origin(key.kind) is list:
        return [("100kB item", [BIG])]
    if get_origin(key.kind) is dict:
        item = get_args(get_args(key.kind)[1])[0] if get_origin(get_args(key.kind)[1]) is Literal else 1
        return [("100kB key", {BIG: item})]
    assert key.kind is bool, f"teach this test the bounds of {key.key} ({key.kind})"
    return []


def _load(tmp_path: Path, overrides: dict[str, Any]) -> None:
    load(tmp_path, overrides=parse_params(json.dumps(overrides)), override_source="params")


def test_the_walk_finds_every_section_and_nested_table() -> None:
    keys = {key.key for key in KEYS}
    assert {f"{section}.{name}" for section, f in PipelineConfig.model_fields.items()
            for name in f.annotation.model_fields} - keys <= {"recipe.table_optimizer", "recipe.dense_optimizer"}  # fmt: skip
    assert {"recipe.table_optimizer.lr", "retention.window_extra_days", "review.parallel"} <= keys


def test_every_integer_key_has_both_bounds() -> None:
    unbounded = [
        key.key
        for key in KEYS
        if key.kind is int and not ({"ge", "gt"} & key.bounds().keys() and {"le", "lt"} & key.bounds().keys())
    ]
    assert unbounded == []


@pytest.mark.parametrize(
    ("key", "value"),
    [pytest.param(key, value, id=f"{key.key}={name}") for key in KEYS for name, value in _junk(key)],
)
def test_a_config_key_refuses_what_is_out_of_its_bounds_in_one_line(
    key: Key, value: Any, tmp_path: Path
) -> None:
    with pytest.raises(ConfigFileError) as found:
        _load(tmp_path, key.overrides(value))
    message = str(found.value)
    # the key, or its list's item / table's key below it: "slices.columns.0: ..."
    assert re.match(rf"config error: {re.escape(key.key)}[:.]", message) and "\n" not in message, message[
        :2000
    ]
    assert len(message) < MAX_CONFIG_LINE, message


# cross-key rules a bound alone can break: the keys set beside it so the bound is what is judged
COMPANIONS: dict[tuple[str, Any], dict[str, Any]] = {
    ("review.min_days", 365): {"review.days": 365},
    ("review.days", 1): {"review.min_days": 1},
}


def _bound_values(key: Key) -> Iterator[tuple[Any, bool]]:
    """(a bound, whether the key takes it) for every finite bound of a number key."""
    for name, value in key.bounds().items():
        yield value, name in ("ge", "le")


@pytest.mark.parametrize(
    ("key", "bound", "taken"),
    [
        pytest.param(key, bound, taken, id=f"{key.key}={bound}")
        for key in KEYS
        if key.kind in (int, float)
        for bound, taken in _bound_values(key)
    ],
)
def test_a_config_key_takes_its_bounds_themselves(key: Key, bound: Any, taken: bool, tmp_path: Path) -> None:
    value = bound if key.kind is int else float(bound)
    overrides = {**key.overrides(value), **COMPANIONS.get((key.key, bound), {})}
    if taken:
        _load(tmp_path, overrides)
    else:
        with pytest.raises(ConfigFileError, match=rf"{key.key}: must be "):
            _load(tmp_path, overrides)


def test_review_parallel_names_the_machines_bound(tmp_path: Path) -> None:
    with pytest.raises(ConfigFileError) as found:
        _load(tmp_path, {"review.parallel": MAX_THREADS + 1})
    assert f"review.parallel: must be <= {MAX_THREADS} ({MAX_THREADS_WHY})" in str(found.value)
