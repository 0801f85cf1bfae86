"""Statistics of one window partition (one day of examples), computed once when the partition is
built and kept beside it as ``statistics.json``, so a 20-day window reuses 19 days of them.

Per day: rows, requests, rows per request, label rate, the event-time range, duplicated
impressions, a bottom-k sketch of the request ids (two days holding the same requests are one
day repeated) and the effective number of independent rows per key (Kish's rows^2 / sum of
squared rows per user, pin or request): a user's features repeat on every row of theirs, so a day
of 25,000 rows from a few heavy users is a small sample of user features, and the drift
thresholds must know it. Per numeric feature: count, nulls, NaNs, zeros, min/max/mean/std and a
histogram on fixed bins (quarter octaves of a signed log scale, the same for every feature and
day, so days merge by adding counts). Per categorical feature: count, nulls, distinct values and
the count of every value when there are at most ``VOCABULARY_LIMIT`` (else, and for the entity
ids, the top ``TOP_K``).
Snapshot timestamp columns (``<view>__as_of``) give the feature age at the impression and the
rows whose snapshot is dated after their impression (a leak read from the data); every column of
a feature view, the rows of entities whose rows of the day disagree on it (a lost or mixed join).

Statistics are facts about one file: they record the sha256 of the parquet they describe and are
recomputed (backfilled) when that no longer matches. Pure functions of a pyarrow table here; the
file edge is :func:`load_or_compute`.
"""

from __future__ import annotations

import datetime as dt
import logging
import math
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Annotated, Literal

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
from pydantic import BaseModel, ConfigDict, Field, ValidationError

from features.schema import ENTITY_KEYS, LABEL, REQUEST_KEY, SNAPSHOT_TIME, SPARSE_FEATURES, entity_of
from ranking.core.atomic import atomic_write_text
from ranking.core.errors import DataValidationError
from ranking.core.hashing import sha256_file

log = logging.getLogger(__name__)

STATISTICS = "statistics.json"
# 2: snapshot timestamps (as_of) and the feature age; 3: rows of entities that disagree on a feature
FORMAT = 3
TOP_K = 20
VOCABULARY_LIMIT = 1000  # a categorical column with at most this many values keeps them all
SKETCH_SIZE = 256  # bottom-k request-id sketch: Jaccard estimates to about ±1/sqrt(k)
BINS_PER_OCTAVE = 4
_LOWEST_BIN, _HIGHEST_BIN = -160, 256  # 2^-40 .. 2^64: anything beyond lands in the end bins
AS_OF_SUFFIX = f"__{SNAPSHOT_TIME}"  # a feature view's snapshot time, joined with its features
_NOT_FEATURES = (REQUEST_KEY, "event_timestamp", LABEL)


class _Model(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, ser_json_inf_nan="constants")


class NumericStatistics(_Model):
    kind: Literal["numeric"] = "numeric"
    type: str
    count: int = Field(ge=0)  # non-null, non-NaN values
    nulls: int = Field(ge=0)
    nans: int = Field(ge=0)
    zeros: int = Field(ge=0)
    inconsistent_rows: int = Field(default=0, ge=0)  # see inconsistent_rows(); 0 for non-view columns
    min: float | None
    max: float | None
    mean: float | None
    std: float | None
    histogram: dict[str, int]  # bin key (:func:`bin_keys`) -> values in it


class CategoricalStatistics(_Model):
    kind: Literal["categorical"] = "categorical"
    type: str
    count: int = Field(ge=0)
    nulls: int = Field(ge=0)
    distinct: int = Field(ge=0)
    inconsistent_rows: int = Field(default=0, ge=0)
    values: dict[str, int]  # every value's count when complete, else the top TOP_K
    complete: bool


FeatureStatistics = Annotated[NumericStatistics | CategoricalStatistics, Field(discriminator="kind")]


class SnapshotStatistics(_Model):
    """A feature view's snapshot timestamp (``<view>__as_of``) against the impression's time."""

    joined: int = Field(ge=0)  # rows with a snapshot (as_of not null)
    after_impression: int = Field(ge=0)  # rows whose snapshot is dated after the impression
    max_age_seconds: float | None  # the oldest snapshot served (impression time - as_of)


class DayStatistics(_Model):
    format: int = FORMAT
    date: dt.date
    sha256: str | None  # of the examples.parquet described (None: computed from a table in memory)
    rows: int = Field(ge=0)
    requests: int = Field(ge=0)
    positives: int = Field(ge=0)
    label_rate: float
    rows_per_request: float
    event_time_min: dt.datetime | None
    event_time_max: dt.datetime | None
    duplicate_impressions: int = Field(ge=0)
    request_sketch: list[int]
    effective_rows: dict[str, float]  # key column -> Kish's effective sample size of its clusters
    features: dict[str, FeatureStatistics]
    snapshots: dict[str, SnapshotStatistics] = {}


# ------------------------------------------------------------------------------------- compute


def _bin_codes(values: np.ndarray) -> np.ndarray:
    """Integer bin codes of finite values: 0 for zero, else the quarter-octave index shifted to
    start at 1, negated for negative values (vectorised; keys are made for the distinct codes)."""
    codes = np.zeros(values.shape, dtype=np.int64)
    nonzero = values != 0
    if nonzero.any():
        magnitude = np.floor(BINS_PER_OCTAVE * np.log2(np.abs(values[nonzero])))
        index = np.clip(magnitude, _LOWEST_BIN, _HIGHEST_BIN).astype(np.int64) - _LOWEST_BIN + 1
        codes[nonzero] = np.where(values[nonzero] > 0, index, -index)
    return codes


def _key(code: int) -> str:
    if code == 0:
        return "0"
    return f"{'+' if code > 0 else '-'}{abs(code) - 1 + _LOWEST_BIN}"


def bin_keys(values: np.ndarray) -> np.ndarray:
    """The fixed histogram bin of each finite value: ``0`` for zero, else the sign and the
    quarter-octave ``floor(4 log2 |x|)`` (clipped to the end bins), as text ("+5", "-12")."""
    return np.array([_key(int(c)) for c in _bin_codes(values)], dtype=object)


def histogram(values: np.ndarray) -> dict[str, int]:
    """Counts of finite values per fixed bin (:func:`bin_keys`), keyed as there."""
    codes, counts = np.unique(_bin_codes(values), return_counts=True)
    return {_key(int(c)): int(n) for c, n in zip(codes, counts, strict=True)}


def bin_range(key: str) -> tuple[float, float]:
    """The values a bin key holds, [low, high) in magnitude (for plots and reports)."""
    if key == "0":
        return 0.0, 0.0
    sign = -1.0 if key[0] == "-" else 1.0
    i = int(key[1:])
    low, high = 2.0 ** (i / BINS_PER_OCTAVE), 2.0 ** ((i + 1) / BINS_PER_OCTAVE)
    return (sign * low, sign * high) if sign > 0 else (sign * high, sign * low)


def _numeric(column: pa.ChunkedArray) -> NumericStatistics:
    kind = str(column.type)
    nulls = column.null_count
    values = column.drop_null().to_numpy(zero_copy_only=False).astype(np.float64)
    nan = np.isnan(values)
    values = values[~nan]
    if not len(values):
        return NumericStatistics(
            type=kind,
            count=0,
            nulls=nulls,
            nans=int(nan.sum()),
            zeros=0,
            min=None,
            max=None,
            mean=None,
            std=None,
            histogram={},
        )
    finite = values[np.isfinite(values)]
    return NumericStatistics(
        type=kind,
        count=len(values),
        nulls=nulls,
        nans=int(nan.sum()),
        zeros=int((values == 0).sum()),
        min=float(values.min()),
        max=float(values.max()),
        mean=float(finite.mean()) if len(finite) else None,
        std=float(finite.std()) if len(finite) else None,
        histogram=histogram(values),
    )


def _categorical(column: pa.ChunkedArray, is_id: bool) -> CategoricalStatistics:
    counted = pc.value_counts(column.drop_null())
    counts = np.asarray(counted.field("counts").to_numpy(zero_copy_only=False))
    complete = not is_id and len(counts) <= VOCABULARY_LIMIT
    if complete:
        chosen = np.arange(len(counts))
    else:  # the top TOP_K, ties included at the cut, then ordered as below
        cut = np.sort(counts)[-TOP_K] if len(counts) > TOP_K else 0
        chosen = np.flatnonzero(counts >= cut)
    values = counted.field("values").take(pa.array(chosen, pa.int64())).cast(pa.string()).to_pylist()
    pairs = sorted(zip(values, counts[chosen].tolist(), strict=True), key=lambda kv: (-kv[1], kv[0]))
    return CategoricalStatistics(
        type=str(column.type),
        count=len(column) - column.null_count,
        nulls=column.null_count,
        distinct=len(counts),
        values={str(v): int(c) for v, c in (pairs if complete else pairs[:TOP_K])},
        complete=complete,
    )


def _stable_hashes(values: np.ndarray) -> np.ndarray:
    """64-bit hashes of text that are the same in every process (pandas' siphash, fixed key)."""
    import pandas as pd

    return np.asarray(pd.util.hash_array(np.asarray(values, dtype=object)), dtype=np.uint64)


def request_sketch(request_ids: pa.ChunkedArray | Iterable[str], size: int = SKETCH_SIZE) -> list[int]:
    """The ``size`` smallest hashes of the distinct request ids (a bottom-k MinHash sketch)."""
    if isinstance(request_ids, pa.ChunkedArray):
        distinct = pc.unique(request_ids.drop_null().cast(pa.string())).to_numpy(zero_copy_only=False)
    else:
        distinct = np.asarray(sorted(set(request_ids)), dtype=object)
    if not len(distinct):
        return []
    hashes = np.unique(_stable_hashes(distinct))
    return [int(h) for h in hashes[:size]]


def sketch_jaccard(a: Sequence[int], b: Sequence[int]) -> float | None:
    """Estimated Jaccard similarity of the two sets the sketches were taken of (None: empty)."""
    size = min(len(a), len(b))
    if size == 0:
        return None
    union = sorted(set(a) | set(b))[:size]
    both = set(a) & set(b)
    return sum(1 for h in union if h in both) / size


def effective_rows(column: pa.ChunkedArray) -> float:
    """Kish's effective sample size when rows sharing a value of ``column`` move together:
    rows^2 / sum over values of (rows with it)^2 (nulls: one row each)."""
    counted = pc.value_counts(column.drop_null())
    counts = np.asarray(counted.field("counts").to_numpy(zero_copy_only=False), dtype=np.float64)
    nulls = float(column.null_count)
    squares = float(np.sum(counts**2)) + nulls
    total = float(counts.sum()) + nulls
    return total**2 / squares if squares else 0.0


def _timestamp_bounds(column: pa.ChunkedArray) -> tuple[dt.datetime | None, dt.datetime | None]:
    if column.null_count == len(column):
        return None, None
    bounds = pc.min_max(column)
    low, high = bounds["min"].as_py(), bounds["max"].as_py()
    return _utc(low), _utc(high)


def _utc(value: dt.datetime | None) -> dt.datetime | None:
    if value is None:
        return None
    return value if value.tzinfo is not None else value.replace(tzinfo=dt.UTC)


def inconsistent_rows(table: pa.Table, key: str, columns: Sequence[str]) -> dict[str, int]:
    """Per column, the rows of entities (``key``) whose rows of the day disagree on it (a null on
    some and a value on others, or two values): one group-by for all of a view's columns. A
    feature view has one snapshot a day per entity, so every row of an entity joins the same
    values: only a join that lost or mixed rows disagrees."""
    if not columns:
        return {}
    counts = (
        table.select([key, *columns])
        .group_by(key)
        .aggregate(
            [(key, "count", pc.CountOptions(mode="all"))]
            + [(c, "count_distinct", pc.CountOptions(mode="all")) for c in columns]
        )
    )
    rows = counts.column(f"{key}_count")
    return {
        c: int(pc.sum(pc.filter(rows, pc.greater(counts.column(f"{c}_count_distinct"), 1))).as_py() or 0)
        for c in columns
    }


def _snapshot(as_of: pa.ChunkedArray, event_time: pa.ChunkedArray) -> SnapshotStatistics:
    """Rows whose snapshot (``as_of``) is later than the impression, and the oldest one served."""
    unit = "us"
    joined = as_of.drop_null()
    if not len(joined):
        return SnapshotStatistics(joined=0, after_impression=0, max_age_seconds=None)
    present = pc.is_valid(as_of)
    snap = pc.filter(as_of, present).cast(pa.timestamp(unit, tz="UTC")).cast(pa.int64()).to_numpy()
    event = pc.filter(event_time, present).cast(pa.timestamp(unit, tz="UTC")).cast(pa.int64()).to_numpy()
    age = (event - snap) / 1e6
    return SnapshotStatistics(
        joined=len(snap),
        after_impression=int((age < 0).sum()),
        max_age_seconds=float(age.max()),
    )


def _feature(field: pa.Field, column: pa.ChunkedArray) -> NumericStatistics | CategoricalStatistics | None:
    """A column's statistics as the kind of feature it is (None: not a feature, e.g. a time)."""
    if (
        field.name in SPARSE_FEATURES
        or pa.types.is_string(field.type)
        or pa.types.is_large_string(field.type)
    ):
        return _categorical(column, field.name in ENTITY_KEYS)
    if pa.types.is_integer(field.type) or pa.types.is_floating(field.type) or pa.types.is_boolean(field.type):
        return _numeric(column)
    return None


def compute(table: pa.Table, date: dt.date, sha256: str | None = None) -> DayStatistics:
    """The statistics of one day's examples (a partition as the window builder writes it)."""
    rows = table.num_rows
    labels = table.column(LABEL).drop_null().cast(pa.int64())
    positives = int(pc.sum(labels).as_py() or 0)
    request_ids = table.column(REQUEST_KEY)
    requests = int(pc.count_distinct(request_ids).as_py())
    distinct_impressions = (
        table.select([REQUEST_KEY, "pin_id"]).group_by([REQUEST_KEY, "pin_id"]).aggregate([])
    )
    low, high = _timestamp_bounds(table.column("event_timestamp"))
    features: dict[str, NumericStatistics | CategoricalStatistics] = {}
    snapshots: dict[str, SnapshotStatistics] = {}
    for field in table.schema:
        if field.name in _NOT_FEATURES:
            continue
        column = table.column(field.name)
        if field.name.endswith(AS_OF_SUFFIX):
            snapshots[field.name.removesuffix(AS_OF_SUFFIX)] = _snapshot(
                column, table.column("event_timestamp")
            )
        found = _feature(field, column)
        if found is not None:
            features[field.name] = found
    for key in ENTITY_KEYS:
        of_view = [n for n in features if n not in ENTITY_KEYS and entity_of(n) == key]
        if key in table.schema.names:
            for name, disagreeing in inconsistent_rows(table, key, of_view).items():
                features[name] = features[name].model_copy(update={"inconsistent_rows": disagreeing})
    return DayStatistics(
        date=date,
        sha256=sha256,
        rows=rows,
        requests=requests,
        positives=positives,
        label_rate=positives / rows if rows else 0.0,
        rows_per_request=rows / requests if requests else 0.0,
        event_time_min=low,
        event_time_max=high,
        duplicate_impressions=rows - distinct_impressions.num_rows,
        request_sketch=request_sketch(request_ids),
        effective_rows={
            key: effective_rows(table.column(key))
            for key in (REQUEST_KEY, *ENTITY_KEYS)
            if key in table.schema.names
        },
        features=features,
        snapshots=snapshots,
    )


# --------------------------------------------------------------------------------------- merge


def merge(days: Sequence[DayStatistics]) -> dict[str, NumericStatistics | CategoricalStatistics]:
    """The features' statistics of several days taken together (a reference, a training window):
    counts and histograms add; mean and std are pooled; categorical counts add (a merged top-k is
    complete only when every day's was)."""
    names: list[str] = []
    for day in days:
        names += [n for n in day.features if n not in names]
    out: dict[str, NumericStatistics | CategoricalStatistics] = {}
    for name in names:
        parts = [d.features[name] for d in days if name in d.features]
        if all(isinstance(p, NumericStatistics) for p in parts):
            out[name] = _merge_numeric([p for p in parts if isinstance(p, NumericStatistics)])
        elif all(isinstance(p, CategoricalStatistics) for p in parts):
            out[name] = _merge_categorical([p for p in parts if isinstance(p, CategoricalStatistics)])
    return out


def _merge_numeric(parts: Sequence[NumericStatistics]) -> NumericStatistics:
    count = sum(p.count for p in parts)
    histogram: dict[str, int] = {}
    for p in parts:
        for key, n in p.histogram.items():
            histogram[key] = histogram.get(key, 0) + n
    with_values = [p for p in parts if p.count and p.mean is not None and p.std is not None]
    n = sum(p.count for p in with_values)
    mean = sum(p.count * (p.mean or 0.0) for p in with_values) / n if n else None
    std = None
    if n and mean is not None:
        second = sum(p.count * ((p.std or 0.0) ** 2 + (p.mean or 0.0) ** 2) for p in with_values) / n
        std = math.sqrt(max(0.0, second - mean**2))
    lows = [p.min for p in parts if p.min is not None]
    highs = [p.max for p in parts if p.max is not None]
    return NumericStatistics(
        type=parts[0].type,
        count=count,
        nulls=sum(p.nulls for p in parts),
        nans=sum(p.nans for p in parts),
        zeros=sum(p.zeros for p in parts),
        min=min(lows) if lows else None,
        max=max(highs) if highs else None,
        mean=mean,
        std=std,
        histogram=histogram,
    )


def _merge_categorical(parts: Sequence[CategoricalStatistics]) -> CategoricalStatistics:
    values: dict[str, int] = {}
    for p in parts:
        for key, n in p.values.items():
            values[key] = values.get(key, 0) + n
    complete = all(p.complete for p in parts)
    if not complete:
        values = dict(sorted(values.items(), key=lambda kv: (-kv[1], kv[0]))[:TOP_K])
    return CategoricalStatistics(
        type=parts[0].type,
        count=sum(p.count for p in parts),
        nulls=sum(p.nulls for p in parts),
        distinct=len(values) if complete else max(p.distinct for p in parts),
        values=values,
        complete=complete,
    )


# ------------------------------------------------------------------------------------ the file


def path_beside(parquet: Path) -> Path:
    return parquet.with_name(STATISTICS)


def write(path: Path, stats: DayStatistics) -> None:
    atomic_write_text(path, stats.model_dump_json(indent=1) + "\n")


def read(path: Path) -> DayStatistics | None:
    """The statistics in ``path``; None when it is missing, unreadable as this format, or torn
    (they are recomputed from the parquet then)."""
    try:
        stats = DayStatistics.model_validate_json(path.read_bytes())
    except FileNotFoundError:
        return None
    except (OSError, ValidationError, ValueError) as exc:
        log.warning("statistics %s cannot be used (%s): recomputing them", path, _first_line(exc))
        return None
    return stats if stats.format == FORMAT else None


def load_or_compute(parquet: Path, date: dt.date, sha256: str | None) -> tuple[DayStatistics, bool]:
    """The partition's statistics: ``statistics.json`` beside it when it describes this very file
    (its recorded sha256 is ``sha256``), else computed from the parquet and written beside it
    (a partition built before statistics existed, or changed since: the backfill). Returns the
    statistics and whether they were computed now. A folder that cannot be written (a read-only
    shared cache) keeps nothing, and the statistics are used all the same."""
    import pyarrow.parquet as pq

    beside = path_beside(parquet)
    found = read(beside)
    if found is not None and sha256 is not None and found.sha256 == sha256:
        return found, False
    try:
        actual = sha256_file(parquet)
        table = pq.read_table(parquet)
    except (OSError, pa.ArrowException) as exc:
        raise DataValidationError(
            f"the partition {parquet} of {date} cannot be read for its statistics ({_first_line(exc)})"
        ) from None
    if sha256 is not None and actual != sha256:
        raise DataValidationError(
            f"the partition {parquet} of {date} is not the file its window recorded (sha256 differs):"
            " rebuild the window"
        )
    stats = compute(table, date, actual)
    try:
        write(beside, stats)
    except OSError as exc:
        log.warning("statistics of %s not kept (%s)", parquet, exc)
    return stats, True


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__
