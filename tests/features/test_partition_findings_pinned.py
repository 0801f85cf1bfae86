"""The partition checks' findings pinned, in the order they are looked for (issue 22: the checks
split into one function per concern without a change): which finding wins when several apply, and
the exact message of each."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from features.partitions import partition_problem, record_problem
from ranking.core.hashing import sha256_file

GOOD: dict[str, Any] = {"rows": 10, "bytes": 100, "sha256": "ab", "label_rate": 0.1, "null_rates": {"x": 0.0}}


@pytest.mark.parametrize(
    ("record", "problem"),
    [
        ([1, 2], "is not a JSON object"),
        ("text", "is not a JSON object"),
        # a bad size or row count is named before anything missing
        ({"bytes": -1}, "has a 'bytes' that is not a whole number: -1"),
        ({**GOOD, "rows": True, "bytes": 2.5}, "has a 'rows' that is not a whole number: True"),
        ({**GOOD, "bytes": 2.5}, "has a 'bytes' that is not a whole number: 2.5"),
        ({"bytes": 1, "label_rate": None}, "has no 'rows'"),
        ({**GOOD, "label_rate": True}, "has no finite 'label_rate': True"),
        ({**GOOD, "label_rate": math.nan}, "has no finite 'label_rate': nan"),
        ({**GOOD, "label_rate": "0.1", "null_rates": None}, "has no finite 'label_rate': '0.1'"),
        ({k: v for k, v in GOOD.items() if k != "label_rate"}, "has no finite 'label_rate': None"),
        ({**GOOD, "null_rates": [], "sha256": 5}, "has no 'null_rates' object of numbers"),
        ({**GOOD, "null_rates": {"x": False}}, "has no 'null_rates' object of numbers"),
        ({**GOOD, "null_rates": {"x": "0"}}, "has no 'null_rates' object of numbers"),
        ({**GOOD, "sha256": 5}, "has a 'sha256' that is not text"),
        (GOOD, None),
        ({**GOOD, "label_rate": 1, "null_rates": {}}, None),
        ({k: v for k, v in GOOD.items() if k not in ("bytes", "sha256")}, None),
    ],
)
def test_record_problem_names_the_first_finding(record: Any, problem: str | None) -> None:
    assert record_problem(record) == problem


def _parquet(path: Path, rows: int) -> dict[str, Any]:
    pq.write_table(pa.table({"x": list(range(rows))}), path)
    return {"rows": rows, "bytes": path.stat().st_size, "sha256": sha256_file(path)}


def test_partition_problem_names_the_first_finding(tmp_path: Path) -> None:
    path = tmp_path / "examples.parquet"
    older = "its record has no size/checksum (written by an older builder)"
    assert partition_problem(path, {"rows": 3}) == older  # before the file is looked at
    assert partition_problem(path, {"rows": 3, "bytes": 1}) == older
    assert partition_problem(path, {"rows": 3, "sha256": "ab"}) == older
    assert partition_problem(path, {"bytes": 1, "sha256": "ab"}) == "examples.parquet is missing"
    path.mkdir()
    assert partition_problem(path, {"bytes": 1, "sha256": "ab"}) == "examples.parquet is missing"
    path.rmdir()

    stats = _parquet(path, 4)
    size = stats["bytes"]
    assert partition_problem(path, stats) is None
    assert partition_problem(path, {**stats, "rows": "4", "bytes": str(size)}) is None  # as recorded
    assert (
        partition_problem(path, {**stats, "bytes": size + 1, "sha256": "ab"})
        == f"examples.parquet holds {size} bytes, recorded {size + 1}"
    )
    assert (
        partition_problem(path, {**stats, "sha256": "ab"})
        == "examples.parquet has another sha256 than recorded"
    )
    assert partition_problem(path, {**stats, "rows": 5}) == "examples.parquet holds 4 rows, recorded 5"

    path.write_bytes(b"not parquet at all")
    junk = {"rows": 5, "bytes": path.stat().st_size, "sha256": sha256_file(path)}
    assert partition_problem(path, junk) == (
        "examples.parquet is not readable parquet (Parquet magic bytes not found in footer."
        " Either the file is corrupted or this is not a parquet file.)"
    )

    path.write_bytes(b"")
    empty = {"rows": 0, "bytes": 0, "sha256": sha256_file(path)}
    assert (
        partition_problem(path, empty)
        == "examples.parquet is not readable parquet (Parquet file size is 0 bytes)"
    )
