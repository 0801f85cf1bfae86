"""Identifiers that reach paths, and their one definition.

Patterns are anchored with ``\\A...\\Z`` and ASCII-only (``$`` would accept a trailing newline,
``\\d`` would accept non-ASCII digits). The Airflow environment cannot import ``ranking``: where a
DAG checks an id itself it uses the same pattern string, and a test compares the two.
"""

from __future__ import annotations

import re

from ranking.core.errors import RankerError

# a model version in the registry: v + 4 to 9 digits (v0001 ... v999999999)
VERSION_ID_PATTERN = r"\Av([0-9]{4,9})\Z"
# a pipeline / training run id: a safe alphabet, no '/', max 128 characters
RUN_ID_PATTERN = r"\A[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}\Z"

VERSION_ID = re.compile(VERSION_ID_PATTERN, re.ASCII)
RUN_ID = re.compile(RUN_ID_PATTERN, re.ASCII)


def is_version_id(value: object) -> bool:
    return isinstance(value, str) and VERSION_ID.fullmatch(value) is not None


def version_number(version: str) -> int:
    """The integer of a version id (``v0012`` -> 12); a ValueError for anything else."""
    match = VERSION_ID.fullmatch(version) if isinstance(version, str) else None
    if match is None:
        raise ValueError(f"not a version id (v followed by 4-9 digits, e.g. v0003): {version!r}")
    return int(match.group(1))


def validate_run_id(run_id: str) -> str:
    """Run ids reach paths: allow only a safe alphabet (no '/', no '..', no newline)."""
    if not isinstance(run_id, str) or RUN_ID.fullmatch(run_id) is None or ".." in run_id:
        raise RankerError(f"invalid run id {run_id!r}: use letters, digits and _.:+- (max 128)")
    return run_id
