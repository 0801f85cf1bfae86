"""Checks of the window build itself: pure checks that raise DataValidationError naming the
problem (a join that lost rows, an input of another schema, duplicated impressions, too few days).

Every check here runs before anything that looks complete (a partition's record, the window
manifest) is published, so a build that fails is never mistaken for a good one. What the data
says (rates, distributions, drift, leaks) is the data validation step's (features/validation/).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd
import pyarrow as pa

from ranking.core.errors import DataValidationError

# a window's training days when none are given (the config's [window] days reads it: the one place)
DEFAULT_DAYS = 20


@dataclass(frozen=True)
class WindowChecks:
    """What a window build requires (``[window]``; configurable from `ranker features window`)."""

    min_coverage: float = 0.9  # fraction of training days that must have impressions

    def validate(self) -> None:
        if not 0.0 <= self.min_coverage <= 1.0:
            raise DataValidationError(f"min_coverage must be in [0, 1], got {self.min_coverage}")


def check_coverage(train_days: Sequence[dt.date], missing: Sequence[dt.date], min_coverage: float) -> None:
    present = len(train_days) - len(missing)
    coverage = present / len(train_days) if train_days else 0.0
    if coverage < min_coverage:
        shown = ", ".join(d.isoformat() for d in missing[:10]) + (" ..." if len(missing) > 10 else "")
        raise DataValidationError(
            f"window covers {present}/{len(train_days)} training days ({coverage:.0%} < {min_coverage:.0%});"
            f" missing: {shown}"
        )


def check_schema(day: dt.date, actual: pa.Schema, expected: pa.Schema, what: str) -> None:
    """Exact column names and types (order free): drift fails instead of silently casting."""
    want = {f.name: f.type for f in expected}
    have = {f.name: f.type for f in actual}
    missing = sorted(set(want) - set(have))
    extra = sorted(set(have) - set(want))
    changed = sorted(
        f"{n}: {have[n]} != {want[n]}" for n in set(want) & set(have) if not have[n].equals(want[n])
    )
    if missing or extra or changed:
        parts = []
        if missing:
            parts.append(f"missing {missing}")
        if extra:
            parts.append(f"unexpected {extra}")
        if changed:
            parts.append(f"changed types {changed}")
        raise DataValidationError(f"schema drift in {what} of {day.isoformat()}: " + "; ".join(parts))


def check_unique_impressions(day: dt.date, frame: pd.DataFrame, key: Sequence[str]) -> None:
    dup = frame.duplicated(list(key), keep=False)
    if dup.any():
        example = frame.loc[dup, list(key)].iloc[0].to_dict()
        raise DataValidationError(
            f"{int(dup.sum())} impressions of {day.isoformat()} share an impression id {tuple(key)};"
            f" e.g. {example}"
        )


def check_rows_conserved(day: dt.date, stage: str, rows_in: int, rows_out: int) -> None:
    if rows_in != rows_out:
        raise DataValidationError(
            f"{stage} of {day.isoformat()} returned {rows_out} rows for {rows_in} in ({rows_out - rows_in:+d}):"
            " refusing a window with lost or duplicated impressions"
        )
