"""A window partition's record (``partition.json``) and whether the file still matches it.

The window builder writes the record beside each ``examples.parquet`` (rows, label and null rates,
the file's ``bytes`` and ``sha256``) and copies ``bytes``/``sha256`` into the window manifest; it
reuses a partition, and ``ranker train`` trains on one, only while the file matches. Light on
purpose (pyarrow, no pandas or Feast): the trainer imports it.
"""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import NotRequired, TypedDict, cast

import pyarrow as pa
import pyarrow.parquet as pq

from ranking.core.hashing import sha256_file

RECORD = "partition.json"
_ABSENT = object()  # a field the record does not hold (null is a value, and not a valid one)


class RecordedFile(TypedDict):
    """What a partition's ``examples.parquet`` must still match: its row count, size and sha256
    (records of an older builder hold no size or sha256)."""

    rows: int
    bytes: NotRequired[int]
    sha256: NotRequired[str]


class PartitionRecord(RecordedFile):
    """``partition.json`` as the window builder writes it: the fields the window and the data
    validation read back (:func:`record_problem` checks them), and the provenance it adds."""

    label_rate: float
    null_rates: dict[str, float]
    zero_filled: NotRequired[dict[str, float]]  # column -> share of rows filled with 0 (issue 34)
    date: NotRequired[str]
    rows_in: NotRequired[int]
    feature_version: NotRequired[str]
    source_version: NotRequired[str]
    schema: NotRequired[dict[str, str]]
    offline_store: NotRequired[str]
    build_seconds: NotRequired[float]


def read_record(path: Path) -> tuple[PartitionRecord | None, str | None]:
    """``(record, None)``, or ``(None, why it cannot be used)`` when the record is not valid JSON or
    lacks a field the window reads (a torn or edited file: the partition is rebuilt, not trusted).
    OSError (a missing or unreadable file) propagates: the caller decides what absent means."""
    try:
        record = json.loads(path.read_bytes())
    except (ValueError, UnicodeDecodeError) as exc:
        return None, f"its record {path.name} is not valid JSON ({_first_line(exc)})"
    problem = record_problem(record)
    if problem is not None:
        return None, f"its record {path.name} {problem}"
    # record_problem checked every field read back (the provenance fields are only recorded)
    return cast(PartitionRecord, record), None


def record_problem(record: object) -> str | None:
    """What makes a parsed record unusable, or None (the first finding, in the checks' order)."""
    if not isinstance(record, dict):
        return "is not a JSON object"
    return (
        _counts_problem(record.get("rows", _ABSENT), record.get("bytes", _ABSENT))
        or _label_rate_problem(record.get("label_rate"))
        or _null_rates_problem(record.get("null_rates"))
        or _sha256_problem(record.get("sha256", _ABSENT))
    )


def _counts_problem(rows: object, size: object) -> str | None:
    """A size or row count that is not a whole number (named first), or no row count."""
    for key, value in (("rows", rows), ("bytes", size)):
        if value is not _ABSENT and not _whole(value):
            return f"has a {key!r} that is not a whole number: {value!r}"
    if rows is _ABSENT:
        return "has no 'rows'"
    return None


def _label_rate_problem(rate: object) -> str | None:
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        return f"has no finite 'label_rate': {rate!r}"
    return None


def _null_rates_problem(rates: object) -> str | None:
    if not isinstance(rates, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in rates.values()
    ):
        return "has no 'null_rates' object of numbers"
    return None


def _sha256_problem(sha256: object) -> str | None:
    if sha256 is not _ABSENT and not isinstance(sha256, str):
        return "has a 'sha256' that is not text"
    return None


def partition_problem(path: Path, stats: RecordedFile) -> str | None:
    """Why a partition's file differs from what was recorded at write (size, sha256, parquet row
    count), or None when it matches."""
    if "bytes" not in stats or "sha256" not in stats:
        return "its record has no size/checksum (written by an older builder)"
    problem = _file_problem(path, stats)
    if problem is None:
        problem = _parquet_problem(path, stats)
    return problem


def _file_problem(path: Path, stats: RecordedFile) -> str | None:
    """The file missing, or its bytes not the recorded ones (size first: no hashing of a file
    whose size already differs)."""
    if not path.is_file():
        return f"{path.name} is missing"
    size = path.stat().st_size
    if size != int(stats["bytes"]):
        return f"{path.name} holds {size} bytes, recorded {stats['bytes']}"
    if sha256_file(path) != stats["sha256"]:
        return f"{path.name} has another sha256 than recorded"
    return None


def _parquet_problem(path: Path, stats: RecordedFile) -> str | None:
    """The file not readable as parquet, or its row count not the recorded one."""
    try:
        rows = pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException) as exc:
        return f"{path.name} is not readable parquet ({_first_line(exc)})"
    if rows != int(stats["rows"]):
        return f"{path.name} holds {rows} rows, recorded {stats['rows']}"
    return None


def _whole(value: object) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
