"""Anomalies of a window, read from its days' statistics (pure: no I/O).

Each anomaly names its kind, the feature and day, the statistic, its value, the threshold it
crossed and what it was compared with (the schema, the days of history, the training window). A
day is judged against the schema, against itself (duplicates, its event times, leaks) and against
its own history: the days before it in the same deployment (or the same weekday of the weeks
before, where the data has a weekly cycle; :mod:`features.validation.reference`) — a rate that
jumps, a distribution that drifts, a feature that became constant. The eval day is also judged
against the training window (skew). Whether an anomaly stops the run is its kind's policy
(``fail`` | ``warn``, :class:`ValidationConfig`); a history-based kind only warns until it has
``min_history_days`` of history, and an operator may accept a day's anomaly with a reason.

Thresholds take the sampling noise into account (a 200-row day is noisier than a 25,000-row one):
rates by a z-score over the history's own day-to-day spread and the binomial noise, with a floor
on the absolute change; drift by the Jensen-Shannon divergence (numeric, on the statistics' fixed
histogram bins) and the L-infinity distance (categorical) above what two samples of those sizes
from one distribution would show.
"""

from __future__ import annotations

import datetime as dt
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Literal

import numpy as np

from features.schema import REQUEST_KEY, entity_of
from features.validation.data_schema import DataSchema
from features.validation.statistics import (
    CategoricalStatistics,
    DayStatistics,
    NumericStatistics,
    merge,
    sketch_jaccard,
)
from ranking.core.errors import RankerError
from ranking.core.summaries import Anomaly

Policy = Literal["fail", "warn"]
POLICIES: tuple[str, ...] = ("fail", "warn")
WEEKLY_CHOICES: tuple[str, ...] = ("auto", "on", "off")

# kind -> what it means, in one line (the report, the docs' runbook and the CLI's help read these)
KINDS: dict[str, str] = {
    "window_incomplete": "the window is not the one asked for: its end, length, days or rows do not add up",
    "empty_day": "a day of the window has no rows",
    "schema_type": "a column is missing, unexpected, or of another type than the kept schema says",
    "schema_presence": "a feature the schema requires has nulls",
    "schema_domain": "a numeric feature has values outside the schema's domain (a rate above 1, a negative count)",
    "schema_vocabulary": "a categorical feature holds values outside the schema's vocabulary",
    "feature_all_null": "a feature became null on every row",
    "feature_all_zero": "a numeric feature became 0 on every row",
    "feature_constant": "a feature became one value on every row",
    "null_rate_jump": "a feature's null rate left its own history (a lost join)",
    "zero_rate_jump": "a numeric feature's share of zeros left its own history",
    "label_rate_jump": "the label rate left its own history (positives lost or joined twice)",
    "row_count_jump": "the day's row count left its own history",
    "drift": "a feature's distribution moved away from the days before it (Jensen-Shannon / L-infinity)",
    "skew": "the eval day's distribution of a feature differs from the training window's",
    "duplicate_rows": "an impression (request, pin) appears more than once in a day",
    "day_repeated": "two days of the window hold the same requests (a day loaded twice)",
    "event_time_outside_day": "a day holds impressions timed outside that day",
    "leakage_event_time": "a training row is timed at or after the eval day's start",
    "leakage_snapshot_date": "a row joined a feature snapshot dated after its impression",
    "inconsistent_join": "an entity's rows of one day disagree on a feature of its daily snapshot (a join that lost or mixed rows)",
    "label_rate_bounds": "the label rate is outside the absolute bounds [min_label_rate, max_label_rate]",
    "null_rate_cap": "a feature's null rate is above the absolute cap max_null_rate",
}
# judged against the deployment's own history: `warn` until there are min_history_days of it
HISTORY_KINDS = frozenset(
    {
        "feature_all_null",
        "feature_all_zero",
        "feature_constant",
        "null_rate_jump",
        "zero_rate_jump",
        "label_rate_jump",
        "row_count_jump",
        "drift",
    }
)
# kinds that say the world changed rather than that the pipeline broke: a busy or quiet day, a
# distribution that moved (real logs are not stationary: on MovieLens-100K every eval day drifts,
# docs/data.md "On a real log"); TFDV too leaves drift and skew thresholds to the operator
_WARN_BY_DEFAULT = ("row_count_jump", "drift", "skew")
DEFAULT_POLICY: dict[str, Policy] = {kind: "warn" if kind in _WARN_BY_DEFAULT else "fail" for kind in KINDS}
# the leak checks the gate reads (a large lift is judged by them, not by its size alone)
LEAK_KINDS = ("leakage_event_time", "leakage_snapshot_date")
# with a weekly cycle, the same-weekday days a day needs before its history-based kinds can fail
WEEKLY_MIN_REFERENCE = 3
_LN2 = math.log(2.0)
_NOISE_Z = 3.0  # sampling noise allowed for: mean + 3 standard deviations
_DEGENERATE_CHANCE = 1e-3  # a feature degenerate by chance on a day less likely than this is news


@dataclass(frozen=True)
class ValidationConfig:
    """Thresholds and policies of the data validation (the ``[validation]`` config section)."""

    # history: each day is compared with up to history_days days before it (or, with a weekly
    # cycle, the same weekday of the weekly_history_weeks weeks before)
    history_days: int = 14
    min_history_days: int = 7  # fewer: the history-based kinds only warn
    weekly: str = "auto"  # auto: use the weekday when the history shows a weekly cycle | on | off
    weekly_history_weeks: int = 4
    # rate jumps (null, zero, label rate): |change| above min_change AND above rate_max_z times
    # the history's spread combined with the day's binomial noise
    rate_max_z: float = 6.0
    null_rate_min_change: float = 0.05
    zero_rate_min_change: float = 0.05
    label_rate_min_change: float = 0.01
    row_count_max_change: float = 0.5  # relative change of the day's rows vs the history's median
    # drift (day vs its history) and skew (eval day vs training window), above the sampling noise
    drift_max_js: float = 0.1  # Jensen-Shannon divergence, bits (numeric)
    drift_max_linf: float = 0.1  # L-infinity distance of value frequencies (categorical)
    skew_max_js: float = 0.1
    skew_max_linf: float = 0.1
    # rows with a value outside a bounded vocabulary: a re-hashed column moves them all, a new
    # country a few (the schema is inferred from what the first window saw: the operator adds it)
    max_unknown_share: float = 0.1
    max_inconsistent_share: float = 0.001  # rows of entities that disagree on a feature of the day
    day_repeated_min_jaccard: float = 0.5  # share of requests two days have in common
    # absolute caps (the window checks before data validation): off by default, history judges
    max_null_rate: float = 1.0
    min_label_rate: float = 0.0
    max_label_rate: float = 1.0
    policy: Mapping[str, Policy] = field(default_factory=lambda: dict(DEFAULT_POLICY))

    def __post_init__(self) -> None:
        problems = [f"policy of unknown kind {k!r}" for k in self.policy if k not in KINDS]
        problems += [
            f"policy of {k} must be fail or warn, got {v!r}"
            for k, v in self.policy.items()
            if v not in POLICIES
        ]
        if self.weekly not in WEEKLY_CHOICES:
            problems.append(f"weekly must be one of {', '.join(WEEKLY_CHOICES)}, got {self.weekly!r}")
        if not 0 <= self.min_label_rate <= self.max_label_rate <= 1:
            problems.append("label-rate bounds must satisfy 0 <= min_label_rate <= max_label_rate <= 1")
        if problems:
            raise RankerError("invalid validation configuration: " + "; ".join(problems))

    def policy_of(self, kind: str) -> str:
        return self.policy.get(kind, DEFAULT_POLICY[kind])


@dataclass(frozen=True)
class DayUnderTest:
    """One day of the window with the history it is judged against."""

    stats: DayStatistics
    role: Literal["train", "eval"]
    reference: Sequence[DayStatistics]
    reference_label: str  # "14 days 2026-01-01..2026-01-14", "same weekday: ..."


def _rate(numerator: float, denominator: float) -> float | None:
    return numerator / denominator if denominator > 0 else None


# ------------------------------------------------------------------------------ schema


def schema_anomalies(day: DayStatistics, schema: DataSchema, config: ValidationConfig) -> list[Anomaly]:
    """The day against the kept schema: columns and types, presence, domains, vocabularies."""
    compared = f"data schema {schema.key}"
    out: list[Anomaly] = []
    expected = {n: t for n, t in schema.columns.items() if n in schema.features}
    for name, kind_type in expected.items():
        stats = day.features.get(name)
        if stats is None:
            out.append(_schema_type(day, name, f"the column {name} is missing", compared))
        elif stats.type != kind_type:
            out.append(
                _schema_type(day, name, f"{name} is {stats.type}, the schema says {kind_type}", compared)
            )
    for name in sorted(set(day.features) - set(expected)):
        out.append(_schema_type(day, name, f"the column {name} is not in the schema", compared))
    for name, spec in schema.features.items():
        stats = day.features.get(name)
        if stats is None or day.rows == 0:
            continue
        presence = stats.count / day.rows
        if presence < spec.min_presence:
            out.append(
                Anomaly(
                    kind="schema_presence",
                    feature=name,
                    day=day.date,
                    statistic="presence",
                    value=presence,
                    threshold=spec.min_presence,
                    compared=compared,
                    detail=f"{name} holds a value on {presence:.2%} of the rows; the schema requires {spec.min_presence:.0%}",
                )
            )
        if isinstance(stats, NumericStatistics):
            out += _domain(day, name, stats, spec.domain_min, spec.domain_max, compared)
        elif isinstance(stats, CategoricalStatistics) and spec.vocabulary is not None:
            out += _vocabulary(day, name, stats, spec.vocabulary, config, compared)
    return out


def _schema_type(day: DayStatistics, name: str, detail: str, compared: str) -> Anomaly:
    return Anomaly(
        kind="schema_type",
        feature=name,
        day=day.date,
        statistic="type",
        value=None,
        threshold=None,
        compared=compared,
        detail=detail,
    )


def _domain(
    day: DayStatistics,
    name: str,
    stats: NumericStatistics,
    low: float | None,
    high: float | None,
    compared: str,
) -> list[Anomaly]:
    out = []
    if low is not None and stats.min is not None and stats.min < low:
        out.append(
            Anomaly(
                kind="schema_domain",
                feature=name,
                day=day.date,
                statistic="min",
                value=stats.min,
                threshold=low,
                compared=compared,
                detail=f"{name} has values down to {stats.min:g}, below the domain's {low:g}",
            )
        )
    if high is not None and stats.max is not None and stats.max > high:
        out.append(
            Anomaly(
                kind="schema_domain",
                feature=name,
                day=day.date,
                statistic="max",
                value=stats.max,
                threshold=high,
                compared=compared,
                detail=f"{name} has values up to {stats.max:g}, above the domain's {high:g}",
            )
        )
    return out


def _vocabulary(
    day: DayStatistics,
    name: str,
    stats: CategoricalStatistics,
    vocabulary: Sequence[str],
    config: ValidationConfig,
    compared: str,
) -> list[Anomaly]:
    if stats.count == 0:
        return []
    known = set(vocabulary)
    unknown = {v: n for v, n in stats.values.items() if v not in known}
    # a day whose values were too many to keep all: at least the kept ones are unknown
    share = sum(unknown.values()) / stats.count
    if share <= config.max_unknown_share and stats.complete:
        return []
    if not stats.complete and share <= config.max_unknown_share:
        share = max(share, 1.0 - sum(n for v, n in stats.values.items() if v in known) / stats.count)
        if share <= config.max_unknown_share:
            return []
    shown = ", ".join(sorted(unknown, key=lambda v: -unknown[v])[:5])
    return [
        Anomaly(
            kind="schema_vocabulary",
            feature=name,
            day=day.date,
            statistic="unknown_share",
            value=share,
            threshold=config.max_unknown_share,
            compared=compared,
            detail=f"{share:.1%} of {name}'s values are outside its vocabulary of {len(known)} (e.g. {shown})",
        )
    ]


# ------------------------------------------------------------------------------ the day itself


def day_anomalies(
    day: DayStatistics, eval_day: dt.date, role: str, config: ValidationConfig
) -> list[Anomaly]:
    """What one day shows by itself: emptiness, duplicates, event times, leaks, absolute caps."""
    out: list[Anomaly] = []
    if day.rows == 0:
        return [
            Anomaly(
                kind="empty_day",
                feature=None,
                day=day.date,
                statistic="rows",
                value=0.0,
                threshold=1.0,
                compared="the day itself",
                detail=f"the {role} day {day.date} has no rows",
            )
        ]
    if day.duplicate_impressions:
        out.append(
            Anomaly(
                kind="duplicate_rows",
                feature=None,
                day=day.date,
                statistic="duplicate_impressions",
                value=float(day.duplicate_impressions),
                threshold=0.0,
                compared="the day itself",
                detail=f"{day.duplicate_impressions} of {day.rows} rows repeat an impression (request, pin) of the same day",
            )
        )
    out += _event_times(day, eval_day, role)
    for view, snap in sorted(day.snapshots.items()):
        if snap.after_impression:
            out.append(
                Anomaly(
                    kind="leakage_snapshot_date",
                    feature=f"{view}__as_of",
                    day=day.date,
                    statistic="rows_with_later_snapshot",
                    value=float(snap.after_impression),
                    threshold=0.0,
                    compared="each row's impression time",
                    detail=f"{snap.after_impression} rows joined a {view} snapshot dated after their impression",
                )
            )
    out += _inconsistent_joins(day, config)
    out += _caps(day, config)
    return out


def _event_times(day: DayStatistics, eval_day: dt.date, role: str) -> list[Anomaly]:
    out: list[Anomaly] = []
    start = dt.datetime.combine(day.date, dt.time(), dt.UTC)
    end = start + dt.timedelta(days=1)
    low, high = day.event_time_min, day.event_time_max
    if low is None or high is None:
        return out
    if low < start or high >= end:
        out.append(
            Anomaly(
                kind="event_time_outside_day",
                feature=None,
                day=day.date,
                statistic="event_time_range",
                value=None,
                threshold=None,
                compared=f"[{start.isoformat()}, {end.isoformat()})",
                detail=f"the day {day.date} holds impressions timed {low.isoformat()} .. {high.isoformat()}",
            )
        )
    eval_start = dt.datetime.combine(eval_day, dt.time(), dt.UTC)
    if role == "train" and high >= eval_start:
        out.append(
            Anomaly(
                kind="leakage_event_time",
                feature=None,
                day=day.date,
                statistic="event_time_max",
                value=high.timestamp(),
                threshold=eval_start.timestamp(),
                compared=f"the eval day {eval_day} starts {eval_start.isoformat()}",
                detail=f"training rows of {day.date} are timed up to {high.isoformat()}, at or after the eval day's start",
            )
        )
    return out


def _inconsistent_joins(day: DayStatistics, config: ValidationConfig) -> list[Anomaly]:
    """Features whose entity rows of the day disagree (one snapshot a day per entity)."""
    out = []
    for name, stats in sorted(day.features.items()):
        share = stats.inconsistent_rows / day.rows if day.rows else 0.0
        if share > config.max_inconsistent_share:
            out.append(
                Anomaly(
                    kind="inconsistent_join",
                    feature=name,
                    day=day.date,
                    statistic="inconsistent_share",
                    value=share,
                    threshold=config.max_inconsistent_share,
                    compared="each entity's rows of the day (one snapshot a day per entity)",
                    detail=f"{stats.inconsistent_rows} rows ({share:.1%}) belong to entities whose rows of the day"
                    f" disagree on {name} (a null on some and a value on others, or two values)",
                )
            )
    return out


def _caps(day: DayStatistics, config: ValidationConfig) -> list[Anomaly]:
    out: list[Anomaly] = []
    if not config.min_label_rate <= day.label_rate <= config.max_label_rate:
        out.append(
            Anomaly(
                kind="label_rate_bounds",
                feature=None,
                day=day.date,
                statistic="label_rate",
                value=day.label_rate,
                threshold=config.min_label_rate
                if day.label_rate < config.min_label_rate
                else config.max_label_rate,
                compared="[validation] min_label_rate, max_label_rate",
                detail=f"label rate {day.label_rate:.4%} outside [{config.min_label_rate:.4%}, {config.max_label_rate:.4%}]",
            )
        )
    for name, stats in sorted(day.features.items()):
        null_rate = stats.nulls / day.rows
        if null_rate > config.max_null_rate:
            out.append(
                Anomaly(
                    kind="null_rate_cap",
                    feature=name,
                    day=day.date,
                    statistic="null_rate",
                    value=null_rate,
                    threshold=config.max_null_rate,
                    compared="[validation] max_null_rate",
                    detail=f"{name} is null on {null_rate:.1%} of the rows (cap {config.max_null_rate:.0%})",
                )
            )
    return out


def repeated_days(days: Sequence[DayStatistics], config: ValidationConfig) -> list[Anomaly]:
    """Pairs of days whose requests are largely the same ones (bottom-k sketch Jaccard)."""
    out = []
    for i, later in enumerate(days):
        for earlier in days[:i]:
            similarity = sketch_jaccard(earlier.request_sketch, later.request_sketch)
            if similarity is not None and similarity >= config.day_repeated_min_jaccard:
                out.append(
                    Anomaly(
                        kind="day_repeated",
                        feature=None,
                        day=later.date,
                        statistic="request_jaccard",
                        value=similarity,
                        threshold=config.day_repeated_min_jaccard,
                        compared=f"the day {earlier.date}",
                        detail=f"{later.date} and {earlier.date} share {similarity:.0%} of their requests",
                    )
                )
    return out


# ------------------------------------------------------------------------------ history


def _robust_center(values: Sequence[float]) -> tuple[float, float]:
    """Median and the MAD's normal-equivalent spread."""
    arr = np.asarray(values, dtype=np.float64)
    center = float(np.median(arr))
    spread = 1.4826 * float(np.median(np.abs(arr - center)))
    return center, spread


def _rate_jump(
    kind: str,
    feature: str | None,
    day: DayUnderTest,
    today: float | None,
    history: Sequence[float],
    sizes: tuple[float, float],
    min_change: float,
    config: ValidationConfig,
    statistic: str,
) -> Anomaly | None:
    """A rate that left its history: ``|change|`` above ``min_change`` and ``rate_max_z`` times
    the history's day-to-day spread combined with a two-proportion test's noise at the effective
    sizes (today's, the history's), on the pooled rate (a history at exactly 0 % is no certainty
    that a small day cannot hold one row)."""
    if today is None or not history:
        return None
    center, spread = _robust_center(history)
    change = today - center
    size, history_size = max(sizes[0], 1.0), max(sizes[1], 1.0)
    pooled = (today * size + center * history_size) / (size + history_size)
    binomial = pooled * (1 - pooled) * (1 / size + 1 / history_size)
    noise = math.sqrt(spread**2 + max(binomial, 0.0))
    allowed = max(min_change, config.rate_max_z * noise)
    if abs(change) <= allowed:
        return None
    label = f"{feature}'s {statistic}" if feature else statistic
    return Anomaly(
        kind=kind,
        feature=feature,
        day=day.stats.date,
        statistic=statistic,
        value=today,
        threshold=center + math.copysign(allowed, change),
        compared=day.reference_label,
        detail=f"{label} {today:.2%} vs {center:.2%} in its history (allowed ±{allowed:.2%})",
        history_days=len(day.reference),
    )


def history_anomalies(day: DayUnderTest, schema: DataSchema, config: ValidationConfig) -> list[Anomaly]:
    """The day against its own history: rates that jumped, features that became degenerate,
    distributions that drifted, the row count."""
    stats, ref = day.stats, day.reference
    if stats.rows == 0:
        return []
    out: list[Anomaly] = []
    jump = _rate_jump(
        "label_rate_jump",
        None,
        day,
        stats.label_rate,
        [r.label_rate for r in ref if r.rows],
        # the rows: the history's own day-to-day spread carries what slates share
        (stats.rows, sum(r.rows for r in ref)),
        config.label_rate_min_change,
        config,
        "label_rate",
    )
    out += [jump] if jump else []
    out += _row_count(day, config)
    merged = merge(ref) if ref else {}
    for name, feat in sorted(stats.features.items()):
        history = [(r.features[name], r.rows) for r in ref if name in r.features and r.rows]
        size = _size(stats.rows, effective_size([stats], name))
        history_size = _size(sum(n for _, n in history), effective_size(ref, name)) if history else 1.0
        out += _degenerate(day, name, feat, history, size)
        nulls = _rate_jump(
            "null_rate_jump",
            name,
            day,
            feat.nulls / stats.rows,
            [h.nulls / n for h, n in history],
            (size, history_size),
            config.null_rate_min_change,
            config,
            "null_rate",
        )
        out += [nulls] if nulls else []
        if isinstance(feat, NumericStatistics):
            zeros = _rate_jump(
                "zero_rate_jump",
                name,
                day,
                _rate(feat.zeros, feat.count),
                [
                    z
                    for h, _ in history
                    if isinstance(h, NumericStatistics) and (z := _rate(h.zeros, h.count)) is not None
                ],
                (min(size, feat.count), history_size),
                config.zero_rate_min_change,
                config,
                "zero_rate",
            )
            out += [zeros] if zeros else []
        spec = schema.features.get(name)
        if name in merged and (spec is None or spec.drift):
            sizes = (effective_size([stats], name), effective_size(ref, name))
            found = distance_anomaly(
                "drift", name, day.stats.date, feat, merged[name], day.reference_label, config, sizes
            )
            if found is not None:
                out.append(found.model_copy(update={"history_days": len(ref)}))
    return out


def _row_count(day: DayUnderTest, config: ValidationConfig) -> list[Anomaly]:
    rows = [r.rows for r in day.reference if r.rows]
    if not rows:
        return []
    center = float(np.median(rows))
    change = day.stats.rows / center - 1.0
    allowed_low = -config.row_count_max_change
    allowed_high = (
        1.0 / (1.0 - config.row_count_max_change) - 1.0 if config.row_count_max_change < 1 else math.inf
    )
    if allowed_low <= change <= allowed_high:
        return []
    return [
        Anomaly(
            kind="row_count_jump",
            feature=None,
            day=day.stats.date,
            statistic="rows",
            value=float(day.stats.rows),
            threshold=center * (1 + (allowed_low if change < 0 else allowed_high)),
            compared=day.reference_label,
            detail=f"{day.stats.rows} rows vs a median of {center:.0f} in its history ({change:+.0%})",
            history_days=len(day.reference),
        )
    ]


def _chance_share(
    kind: str, history: Sequence[tuple[NumericStatistics | CategoricalStatistics, int]]
) -> float | None:
    """The share of a history's rows that were already in the state (null, zero, the most common
    value): the chance one independent row is; None without history."""
    rows = sum(n for _, n in history)
    if not rows:
        return None
    if kind == "feature_all_null":
        return sum(h.nulls for h, _ in history) / rows
    counted = sum(h.count for h, _ in history)
    if not counted:
        return 1.0
    if kind == "feature_all_zero":
        return sum(h.zeros for h, _ in history if isinstance(h, NumericStatistics)) / counted
    common: dict[str, int] = {}
    for h, _ in history:
        values = h.histogram if isinstance(h, NumericStatistics) else h.values
        for key, n in values.items():
            common[key] = common.get(key, 0) + n
    return max(common.values(), default=0) / counted


def _degenerate(
    day: DayUnderTest,
    name: str,
    feat: NumericStatistics | CategoricalStatistics,
    history: Sequence[tuple[NumericStatistics | CategoricalStatistics, int]],
    size: float,
) -> list[Anomaly]:
    """All null, all zero, or constant today, when the history was not (or there is none), and
    the day is too large for that to be chance: the history's share of rows in that state to the
    power of the day's effective rows below ``_DEGENERATE_CHANCE`` (a 117-row day of two new
    users has every user feature at 0 by nature; 25,000 rows of a 28-day save rate do not)."""
    rows = day.stats.rows

    def state(s: NumericStatistics | CategoricalStatistics) -> str | None:
        if s.count == 0:
            return "feature_all_null"
        if isinstance(s, NumericStatistics):
            if s.zeros == s.count:
                return "feature_all_zero"
            return "feature_constant" if s.min == s.max else None
        return "feature_constant" if s.distinct == 1 else None

    kind = state(feat)
    # "became": not already so on at least half of the history (a few bad days do not hide it)
    if kind is None or (history and 2 * sum(1 for h, _ in history if state(h) == kind) >= len(history)):
        return []
    share = _chance_share(kind, history)
    if share is not None and share**size >= _DEGENERATE_CHANCE:
        return []
    what = {"feature_all_null": "null", "feature_all_zero": "0", "feature_constant": "one value"}[kind]
    return [
        Anomaly(
            kind=kind,
            feature=name,
            day=day.stats.date,
            statistic="rows",
            value=float(rows),
            threshold=None,
            compared=day.reference_label,
            detail=f"{name} is {what} on all {rows} rows"
            + (", and was not in its history" if history else " (no history to compare with)"),
            history_days=len(day.reference),
        )
    ]


# ------------------------------------------------------------------------------ distances


def js_divergence(
    p: Mapping[str, int], q: Mapping[str, int], n_eff: float | None = None, m_eff: float | None = None
) -> tuple[float, float] | None:
    """Jensen-Shannon divergence (bits) of two histograms on the same bins, and the most that two
    samples of their effective sizes (default: their counts) from one distribution would likely
    show, from (B - 1)/(8 ln 2) (1/n + 1/m) on average over the B occupied bins; None when either
    is empty."""
    n, m = sum(p.values()), sum(q.values())
    if n == 0 or m == 0:
        return None
    keys = sorted(set(p) | set(q))
    a = np.array([p.get(k, 0) / n for k in keys])
    b = np.array([q.get(k, 0) / m for k in keys])
    mid = (a + b) / 2

    def kl(x: np.ndarray) -> float:
        mask = x > 0
        return float(np.sum(x[mask] * np.log2(x[mask] / mid[mask])))

    js = 0.5 * kl(a) + 0.5 * kl(b)
    # under one distribution 8 ln2 JS / (1/n + 1/m) is about chi-squared with B - 1 degrees of
    # freedom: its mean plus _NOISE_Z standard deviations
    dof = len(keys) - 1
    noise = (dof + _NOISE_Z * math.sqrt(2 * dof)) / (8 * _LN2) * (1 / _size(n, n_eff) + 1 / _size(m, m_eff))
    return max(js, 0.0), noise


def linf_distance(
    p: Mapping[str, int], q: Mapping[str, int], n_eff: float | None = None, m_eff: float | None = None
) -> tuple[float, float] | None:
    """L-infinity distance of two value-frequency tables, and the largest change sampling alone
    would make likely (``_NOISE_Z`` binomial standard deviations of the pooled frequency, at
    the effective sizes)."""
    n, m = sum(p.values()), sum(q.values())
    if n == 0 or m == 0:
        return None
    keys = sorted(set(p) | set(q))
    a = np.array([p.get(k, 0) / n for k in keys])
    b = np.array([q.get(k, 0) / m for k in keys])
    pooled = (a * n + b * m) / (n + m)
    sd = np.sqrt(pooled * (1 - pooled) * (1 / _size(n, n_eff) + 1 / _size(m, m_eff)))
    i = int(np.argmax(np.abs(a - b)))
    return float(np.abs(a - b)[i]), float(_NOISE_Z * sd[i])


def _size(count: float, effective: float | None) -> float:
    """The sample size a noise bound uses: the effective one where known, never above the count."""
    return max(1.0, min(count, effective) if effective else count)


def effective_size(days: Sequence[DayStatistics], column: str) -> float | None:
    """The effective rows of ``column``'s values over ``days`` (independent days add): the
    smaller of its entity's and the requests' (a slate's rows come from one user and one moment:
    on a real log one user's burst of old movies is one event, not 36)."""
    keys = {entity_of(column), REQUEST_KEY}
    total = 0.0
    for day in days:
        sizes = [day.effective_rows[k] for k in keys if day.effective_rows.get(k)]
        total += min(sizes) if sizes else 0.0
    return total or None


def distance(
    today: NumericStatistics | CategoricalStatistics,
    other: NumericStatistics | CategoricalStatistics,
    sizes: tuple[float | None, float | None] = (None, None),
) -> tuple[str, float, float] | None:
    """(statistic, distance, sampling noise) of one feature's two distributions: Jensen-Shannon
    on a numeric feature's histogram, L-infinity on a categorical feature's value counts (only
    when both hold every value: top-k of ids are a popularity ranking, not a distribution)."""
    if isinstance(today, NumericStatistics) and isinstance(other, NumericStatistics):
        found = js_divergence(today.histogram, other.histogram, *sizes)
        return ("jensen_shannon", *found) if found else None
    if (
        isinstance(today, CategoricalStatistics)
        and isinstance(other, CategoricalStatistics)
        and today.complete
        and other.complete
    ):
        found = linf_distance(today.values, other.values, *sizes)
        return ("l_infinity", *found) if found else None
    return None


def distance_anomaly(
    kind: str,
    name: str,
    day: dt.date,
    today: NumericStatistics | CategoricalStatistics,
    other: NumericStatistics | CategoricalStatistics,
    compared: str,
    config: ValidationConfig,
    sizes: tuple[float | None, float | None] = (None, None),
) -> Anomaly | None:
    """``drift`` (against the history) or ``skew`` (the eval day against the training window);
    ``sizes``: the effective rows of each side."""
    found = distance(today, other, sizes)
    if found is None:
        return None
    statistic, value, noise = found
    numeric = statistic == "jensen_shannon"
    if kind == "drift":
        limit = config.drift_max_js if numeric else config.drift_max_linf
    else:
        limit = config.skew_max_js if numeric else config.skew_max_linf
    threshold = limit + noise
    if value <= threshold:
        return None
    return Anomaly(
        kind=kind,
        feature=name,
        day=day,
        statistic=statistic,
        value=value,
        threshold=threshold,
        compared=compared,
        detail=f"{name}: {statistic.replace('_', '-')} {value:.3f} above {threshold:.3f}"
        f" ({limit:g} + sampling noise {noise:.3f})",
    )


def drift_scores(
    today: Sequence[DayStatistics], other: Sequence[DayStatistics], schema: DataSchema
) -> dict[str, float]:
    """Every judged feature's distance (JS or L-inf) of ``today``'s days from ``other``'s, minus
    its sampling noise: what the report plots and Prometheus exports, threshold or not."""
    out: dict[str, float] = {}
    merged_today, merged_other = merge(today), merge(other)
    for name, feat in merged_today.items():
        spec = schema.features.get(name)
        if name not in merged_other or (spec is not None and not spec.drift):
            continue
        sizes = (effective_size(today, name), effective_size(other, name))
        found = distance(feat, merged_other[name], sizes)
        if found is not None:
            out[name] = max(0.0, found[1] - found[2])
    return out


def skew_anomalies(
    eval_day: DayStatistics, train_days: Sequence[DayStatistics], schema: DataSchema, config: ValidationConfig
) -> list[Anomaly]:
    """The eval day's features against the training window's (TFDV's training/serving skew)."""
    if not train_days:
        return []
    merged = merge(train_days)
    label = f"the training window {train_days[0].date}..{train_days[-1].date} ({len(train_days)} days)"
    out = []
    for name, feat in sorted(eval_day.features.items()):
        spec = schema.features.get(name)
        if name not in merged or (spec is not None and not spec.drift):
            continue
        sizes = (effective_size([eval_day], name), effective_size(train_days, name))
        found = distance_anomaly("skew", name, eval_day.date, feat, merged[name], label, config, sizes)
        if found is not None:
            out.append(found.model_copy(update={"history_days": len(train_days)}))
    return out


# ------------------------------------------------------------------------------ policies


@dataclass(frozen=True)
class Acceptance:
    """An operator's acceptance of one anomaly of one day, with the reason (``ranker features
    accept``)."""

    key: str  # Anomaly.key: kind[:feature]@day
    reason: str
    who: str
    when: str


def with_policies(
    anomalies: Sequence[Anomaly], config: ValidationConfig, accepted: Mapping[str, Acceptance], weekly: bool
) -> list[Anomaly]:
    """Each anomaly with its effective policy: accepted (by an operator), else its kind's policy,
    where a history-based kind with fewer than ``min_history_days`` of history (``weekly``: fewer
    than WEEKLY_MIN_REFERENCE same-weekday days) only warns."""
    needed = WEEKLY_MIN_REFERENCE if weekly else config.min_history_days
    out = []
    for anomaly in anomalies:
        if anomaly.key in accepted:
            acceptance = accepted[anomaly.key]
            out.append(anomaly.model_copy(update={"policy": "accepted", "accepted": acceptance.reason}))
            continue
        policy = config.policy_of(anomaly.kind)
        if anomaly.kind in HISTORY_KINDS and (anomaly.history_days or 0) < needed:
            policy = "warn"
        out.append(anomaly.model_copy(update={"policy": policy}))
    return out


def window_anomalies(
    days: Sequence[DayUnderTest], eval_date: dt.date, schema: DataSchema, config: ValidationConfig
) -> list[Anomaly]:
    """Every anomaly of a window (training days and the eval day, each with its history), in a
    stable order: by day, then kind, then feature. Policies are not applied yet."""
    out: list[Anomaly] = []
    for day in days:
        out += schema_anomalies(day.stats, schema, config)
        out += day_anomalies(day.stats, eval_date, day.role, config)
        out += history_anomalies(day, schema, config)
    out += repeated_days([d.stats for d in days], config)
    evals = [d.stats for d in days if d.role == "eval"]
    if evals:
        out += skew_anomalies(evals[0], [d.stats for d in days if d.role == "train"], schema, config)
    order = {kind: i for i, kind in enumerate(KINDS)}
    return sorted(out, key=lambda a: (a.day or dt.date.min, order[a.kind], a.feature or "", a.statistic))
