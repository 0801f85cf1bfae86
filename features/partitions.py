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
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq

from ranking.core.hashing import sha256_file

RECORD = "partition.json"


def read_record(path: Path) -> tuple[dict[str, Any] | None, str | None]:
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
    return record, None


def record_problem(record: Any) -> str | None:
    """What makes a parsed record unusable, or None (the first finding, in the checks' order)."""
    if not isinstance(record, dict):
        return "is not a JSON object"
    for check in (_counts_problem, _label_rate_problem, _null_rates_problem, _sha256_problem):
        problem = check(record)
        if problem is not None:
            return problem
    return None


def _counts_problem(record: dict[str, Any]) -> str | None:
    """A size or row count that is not a whole number (named first), or no row count."""
    for key in ("rows", "bytes"):
        if key in record and not _whole(record[key]):
            return f"has a {key!r} that is not a whole number: {record[key]!r}"
    if "rows" not in record:
        return "has no 'rows'"
    return None


def _label_rate_problem(record: dict[str, Any]) -> str | None:
    rate = record.get("label_rate")
    if isinstance(rate, bool) or not isinstance(rate, int | float) or not math.isfinite(rate):
        return f"has no finite 'label_rate': {rate!r}"
    return None


def _null_rates_problem(record: dict[str, Any]) -> str | None:
    rates = record.get("null_rates")
    if not isinstance(rates, dict) or not all(
        isinstance(v, int | float) and not isinstance(v, bool) for v in rates.values()
    ):
        return "has no 'null_rates' object of numbers"
    return None


def _sha256_problem(record: dict[str, Any]) -> str | None:
    if "sha256" in record and not isinstance(record["sha256"], str):
        return "has a 'sha256' that is not text"
    return None


def partition_problem(path: Path, stats: dict[str, Any]) -> str | None:
    """Why a partition's file differs from what was recorded at write (size, sha256, parquet row
    count), or None when it matches."""
    if "bytes" not in stats or "sha256" not in stats:
        return "its record has no size/checksum (written by an older builder)"
    problem = _file_problem(path, stats)
    if problem is None:
        problem = _parquet_problem(path, stats)
    return problem


def _file_problem(path: Path, stats: dict[str, Any]) -> str | None:
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


def _parquet_problem(path: Path, stats: dict[str, Any]) -> str | None:
    """The file not readable as parquet, or its row count not the recorded one."""
    try:
        rows = pq.read_metadata(path).num_rows
    except (OSError, pa.ArrowException) as exc:
        return f"{path.name} is not readable parquet ({_first_line(exc)})"
    if rows != int(stats["rows"]):
        return f"{path.name} holds {rows} rows, recorded {stats['rows']}"
    return None


def _whole(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= 0


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
