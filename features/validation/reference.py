"""Which earlier days a day is judged against (pure).

The history of a day D is the days before D whose statistics the deployment has: the last
``history_days`` of them, or, where the data has a weekly cycle, D's weekday in each of the
``weekly_history_weeks`` weeks before (a Monday is compared with Mondays). A weekly cycle is
read from the history itself: the share of the day-to-day variance of the row count and of the
label rate that the weekday explains (one-way ANOVA's eta squared) over at least four weeks.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence

import numpy as np

from features.validation.anomalies import WEEKLY_MIN_REFERENCE, ValidationConfig
from features.validation.statistics import DayStatistics

WEEKLY_MIN_DAYS = 28  # four weeks before a weekly cycle is believed
WEEKLY_MIN_SHARE = 0.6  # eta squared of the weekday: 6/27 ~ 0.22 is what 28 days of noise show


def weekday_share(series: Mapping[dt.date, float]) -> float | None:
    """Eta squared of the weekday in ``series`` (None: fewer than WEEKLY_MIN_DAYS days, or flat)."""
    if len(series) < WEEKLY_MIN_DAYS:
        return None
    values = np.array(list(series.values()), dtype=np.float64)
    if np.ptp(values) <= 1e-9 * max(1.0, abs(float(values.mean()))):
        return None  # flat (a fixed number of requests a day): rounding is not a cycle
    total = float(np.sum((values - values.mean()) ** 2))
    by_day: dict[int, list[float]] = {}
    for day, value in series.items():
        by_day.setdefault(day.weekday(), []).append(value)
    between = sum(len(v) * (np.mean(v) - values.mean()) ** 2 for v in by_day.values())
    return float(between / total)


def has_weekly_cycle(history: Sequence[DayStatistics]) -> bool:
    """Whether the row counts or the label rates vary with the weekday (see the module)."""
    rows = {d.date: math.log(d.rows) for d in history if d.rows > 0}
    labels = {d.date: d.label_rate for d in history if d.rows > 0}
    shares = [s for s in (weekday_share(rows), weekday_share(labels)) if s is not None]
    return bool(shares) and max(shares) >= WEEKLY_MIN_SHARE


def history_of(
    day: dt.date, available: Mapping[dt.date, DayStatistics], config: ValidationConfig, weekly: bool
) -> tuple[list[DayStatistics], str]:
    """The days ``day`` is judged against, oldest first, and how the report names them."""
    if weekly:
        same = [
            available[d]
            for k in range(config.weekly_history_weeks, 0, -1)
            if (d := day - dt.timedelta(days=7 * k)) in available
        ]
        if len(same) >= WEEKLY_MIN_REFERENCE:
            return same, f"{len(same)} {day.strftime('%A')}s {same[0].date}..{same[-1].date}"
    before = sorted(d for d in available if d < day)[-config.history_days :]
    found = [available[d] for d in before]
    if not found:
        return [], "no history"
    return found, f"{len(found)} days {found[0].date}..{found[-1].date}"
