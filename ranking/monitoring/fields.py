"""Reading fields of step summaries, with errors that name the summary, the field and the value."""

from __future__ import annotations

import datetime as dt
import re
from typing import Any

from ranking.core.errors import RankerError

# Prometheus label values taken from summaries (check names, stages, schedules): bounded and safe
_LABEL_VALUE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.:,+-]{0,63}$")


class MetricsInputError(RankerError):
    """A step summary or failure record cannot be turned into metrics (malformed field)."""


def as_float(value: object, key: str, where: str) -> float | None:
    """Field ``key``'s ``value`` as a number (a field no model declares), or None when absent/null.
    Booleans count as 0/1."""
    if value is None:
        return None
    if isinstance(value, bool):
        return float(value)
    if isinstance(value, int | float):
        return float(value)
    raise MetricsInputError(f"{where}: field {key!r} must be a number, got {value!r}")


def label(value: Any, what: str) -> str:
    text = str(value)
    if not _LABEL_VALUE.match(text):
        raise MetricsInputError(f"{what} {text!r} is not a safe label value (letters, digits, _.:,+-)")
    return text


def free_label(value: str) -> str:
    """A label value made from free text (a slice's category value from the data): characters
    outside the safe set become ``_``, cut to the length limit."""
    text = re.sub(r"[^A-Za-z0-9_.:,+-]", "_", value)[:64]
    return text if text[:1].isalnum() else f"x{text}"[:64]


def day_timestamp(day: dt.date, plus_days: int = 0) -> float:
    """UTC epoch seconds of midnight ``plus_days`` after ``day``."""
    moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
    return (moment + dt.timedelta(days=plus_days)).timestamp()


def date_timestamp(value: Any, where: str, plus_days: int = 0) -> float | None:
    """UTC epoch seconds of a YYYY-MM-DD date (midnight) or an ISO datetime (naive = UTC)."""
    if value is None:
        return None
    text = str(value)
    try:
        if len(text) == 10:
            day = dt.date.fromisoformat(text)
            moment = dt.datetime(day.year, day.month, day.day, tzinfo=dt.UTC)
        else:
            moment = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
            if moment.tzinfo is None:
                moment = moment.replace(tzinfo=dt.UTC)
    except ValueError:
        raise MetricsInputError(f"{where}: {value!r} is not an ISO date or datetime") from None
    return (moment + dt.timedelta(days=plus_days)).timestamp()
