"""Gate replay and regret (pure): which model a gate would have served, day by day, given every
day's candidate, and what that cost against an oracle and against always promoting.

Timeline of eval day ``D``: the served model ``M_D`` is the champion before day D's decision; the
day's candidate ``c_D`` (trained on ``[D - window, D)``) is judged against it on day D's
impressions and, if the gate passes it, serves from ``D + 1``. So on day D:

- *always promote* serves ``c_{D-1}`` (the fresh candidate);
- the *oracle* serves the better, on day D's impressions, of the two models the gate chose
  between the day before (the fresh candidate and the champion it would have kept or replaced);
- a *rejected better candidate* is a day where the gate kept ``M_D`` and ``c_{D-1}`` beat it;
  a *promoted worse one* a day where it served ``c_{D-1}`` and the replaced champion beat it.
"""

from __future__ import annotations

import datetime as dt
import math
import statistics
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field

from pydantic import BaseModel

from ranking.gate.checks import GateConfig, GateReport, PastComparison


@dataclass(frozen=True)
class Crowned:
    """A model that became champion: its key and the eval day it was trained for (not the
    trainer's lineage, full or incremental: ``ranking.core.summaries.Lineage``)."""

    key: str
    trained_for: dt.date


@dataclass(frozen=True)
class GateState:
    """What the gate sees on an eval day besides the candidate."""

    champion: Crowned | None
    references: tuple[str, ...]  # former champions, newest first (the current one excluded)
    anchors: tuple[str, ...]  # the last N distinct champions, newest first (the current one included)
    trend: str | None  # the champion served trend_days before the eval day (None: the current one)
    history: tuple[PastComparison, ...]


@dataclass
class ReplayDay:
    day: str
    candidate: str | None
    champion: str | None  # served on this day (before its decision)
    champion_trained_for: str | None
    decision: str | None  # pass | reject | None (no candidate)
    failed_checks: list[str] = field(default_factory=list)
    relative_change: float | None = None
    ci: list[float] | None = None


Judge = Callable[[dt.date, str, GateState], GateReport]


def state_on(
    day: dt.date, champions: Sequence[Crowned], history: Sequence[PastComparison], config: GateConfig
) -> GateState:
    champion = champions[-1] if champions else None
    distinct: list[str] = []
    for entry in reversed(champions):
        if entry.key not in distinct:
            distinct.append(entry.key)
    trend = None
    if config.trend_days > 0:
        cutoff = day - dt.timedelta(days=config.trend_days)
        older = [e for e in champions if e.trained_for < cutoff]
        if older and champion is not None and older[-1].key != champion.key:
            trend = older[-1].key
    return GateState(
        champion=champion,
        references=tuple(distinct[1 : max(1, config.reference_champions)]),
        anchors=tuple(distinct[: config.anchor_champions]),
        trend=trend,
        history=tuple(history),
    )


def replay(
    days: Sequence[dt.date],
    candidates: Mapping[dt.date, str | None],
    config: GateConfig,
    judge: Judge,
) -> tuple[list[ReplayDay], list[GateState]]:
    """The gate ``config`` over ``days``: each day's candidate judged (``judge``) against the state
    the earlier decisions left; a pass promotes. Returns the days and the state each day saw."""
    champions: list[Crowned] = []
    history: list[PastComparison] = []
    out: list[ReplayDay] = []
    states: list[GateState] = []
    for day in days:
        state = state_on(day, champions, history, config)
        states.append(state)
        champion = state.champion
        record = ReplayDay(
            day.isoformat(),
            candidates.get(day),
            champion.key if champion else None,
            champion.trained_for.isoformat() if champion else None,
            None,
        )
        cand = candidates.get(day)
        if cand is not None:
            report = judge(day, cand, state)
            record.decision = report.decision
            record.failed_checks = report.failed_checks
            record.relative_change = report.relative_change
            record.ci = report.ci
            if report.relative_change is not None and report.ci:
                history.append(PastComparison(day, report.relative_change, (report.ci[0], report.ci[1])))
            if report.passed:
                champions.append(Crowned(cand, day))
        out.append(record)
    return out, states


# ---------------------------------------------------------------- regret


@dataclass(frozen=True)
class ForwardDay:
    """Day D's save HIT@3 of the served model, the fresh candidate c_{D-1} and the other model of
    the day before's choice (None where there is none), whether c_{D-1} was promoted, the served
    model's age, and whether day D-1's candidate was an injected bad one."""

    day: str
    served: float | None
    fresh: float | None
    alternative: float | None
    promoted_fresh: bool | None
    age_days: int | None
    injected: bool = False


def _mean(values: Sequence[float]) -> float | None:
    return sum(values) / len(values) if values else None


def _rel(a: float | None, b: float | None) -> float | None:
    return None if a is None or b is None or b == 0 else a / b - 1.0


class Regret(BaseModel):
    """A gate's regret over the days with a served model and a fresh candidate (``regret_summary``)."""

    days: int
    served_mean: float | None
    oracle_mean: float | None
    always_promote_mean: float | None
    regret_vs_oracle: float | None
    """(oracle - served) / served: the share of served save HIT@3 the gate's choices cost"""
    vs_always_promote: float | None
    clean_days: int
    """the days whose fresh candidate was not an injected bad one"""
    vs_always_promote_clean_days: float | None
    # the median of whole days is a whole day when their count is odd (JSON 1, not 1.0)
    staleness_median_days: float | int | None
    staleness_max_days: int | None
    rejected_a_better_candidate: int
    rejected_a_better_candidate_sizes: list[float]
    promoted_a_worse_one: int
    promoted_a_worse_one_sizes: list[float]


def regret_summary(days: Sequence[ForwardDay]) -> Regret:
    """Served vs oracle and always-promote (means over the days with a served model and a fresh
    candidate), staleness, and the gate's misses with their sizes."""
    scored = [d for d in days if d.served is not None and d.fresh is not None]
    served = [d.served for d in scored if d.served is not None]
    oracle = [max(x for x in (d.served, d.alternative) if x is not None) for d in scored]
    always = [d.fresh for d in scored if d.fresh is not None]
    clean = [d for d in scored if not d.injected]
    ages = [d.age_days for d in days if d.age_days is not None]
    rejected_better = [
        d.fresh / d.served - 1.0
        for d in scored
        if d.promoted_fresh is False and d.fresh is not None and d.served and d.fresh > d.served
    ]
    promoted_worse = [
        d.served / d.alternative - 1.0
        for d in scored
        if d.promoted_fresh and d.alternative and d.served is not None and d.alternative > d.served
    ]
    served_mean, oracle_mean = _mean(served), _mean(oracle)
    clean_served = _mean([d.served for d in clean if d.served is not None])
    clean_always = _mean([d.fresh for d in clean if d.fresh is not None])
    return Regret(
        days=len(scored),
        served_mean=served_mean,
        oracle_mean=oracle_mean,
        always_promote_mean=_mean(always),  # type: ignore[arg-type]
        regret_vs_oracle=None
        if served_mean is None or oracle_mean is None
        else oracle_mean / served_mean - 1.0,
        vs_always_promote=_rel(served_mean, _mean(always)),  # type: ignore[arg-type]
        clean_days=len(clean),
        vs_always_promote_clean_days=_rel(clean_served, clean_always),
        staleness_median_days=statistics.median(ages) if ages else None,
        staleness_max_days=max(ages) if ages else None,
        rejected_a_better_candidate=len(rejected_better),
        rejected_a_better_candidate_sizes=sorted(rejected_better, reverse=True),
        promoted_a_worse_one=len(promoted_worse),
        promoted_a_worse_one_sizes=sorted(promoted_worse),
    )


def finite(value: float | None) -> float | None:
    return value if value is not None and math.isfinite(value) else None
