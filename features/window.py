"""The sliding training window: per-day example partitions joined point-in-time through Feast.

Training days are ``[end - days, end)``, the eval day is ``end``. Each day becomes a partition
``<home>/windows/days/<date>/<key>/examples.parquet`` keyed by the day's source-data version and
the feature-definition version: built once, reused by every later window, rebuilt when either
changes. The manifest ``<home>/windows/<end>_<days>d/manifest.json`` is written last, atomically,
and only after every check passed (docs/architecture.md "Window manifest").
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pandas as pd
import pyarrow as pa
import pyarrow.parquet as pq
from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationError, model_validator

from features import build_checks, derive, feast_repo, sources
from features.build_checks import DEFAULT_DAYS, WindowChecks
from features.partitions import partition_problem, read_record
from features.schema import (
    EXAMPLE_COLUMNS,
    FEATURE_SERVICE,
    HISTORY_FEATURES,
    IMPRESSION_SCHEMA,
    LABEL,
    PIN_VIEW,
    SNAPSHOT_TIME,
    USER_CATEGORY_VIEW,
)
from features.validation import statistics as day_statistics
from ranking.core.atomic import atomic_dir, atomic_write_json, read_json
from ranking.core.errors import DataValidationError, RankerError
from ranking.core.hashing import sha256_file
from ranking.core.summaries import FreshnessSummary, WindowSummary
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from feast import FeatureService, FeatureStore

log = logging.getLogger(__name__)

IMPRESSION_KEY = ("request_id", "pin_id")  # one impression: a pin in a request's slate
# what identifies a point-in-time lookup (Feast's entity_row_id hashes exactly these): equal
# lookups are sent to Feast once and joined back many-to-one, both joins counted
LOOKUP_KEY = ("user_id", "pin_id", "event_timestamp")
# the second join: the user's history with the pin's category, as the first join read it
SECOND_STAGE_VIEWS = (USER_CATEGORY_VIEW,)
CATEGORY_KEY = "category"  # the category entity's join key
CATEGORY_COLUMN = f"{PIN_VIEW}__category"
CATEGORY_LOOKUP_KEY = ("user_id", CATEGORY_KEY, "event_timestamp")
SOURCE_TABLES = (sources.IMPRESSIONS, *sources.SNAPSHOTS)
_ARROW_TYPES = {
    "String": pa.string(),
    "Int64": pa.int64(),
    "Float64": pa.float64(),
    "Float32": pa.float32(),
    "Int32": pa.int32(),
    "Bool": pa.bool_(),
    "UnixTimestamp": pa.timestamp("us", tz="UTC"),
}
MAX_DAYS = 3660  # ten years: beyond it a window is a typo, and dates run out of range
ROW_GROUP_ROWS = 65_536


@dataclass(frozen=True)
class DayPartition:
    date: str
    path: str
    rows: int
    label_rate: float
    null_rates: dict[str, float]
    partition_key: str
    source_version: str
    built: bool  # built in this call (False: reused)
    # the file as recorded in partition.json: `ranker train` checks it against these
    bytes: int | None = None
    sha256: str | None = None
    repaired: str | None = None  # why an existing partition of this key was rebuilt
    zero_filled: dict[str, float] | None = None  # column -> share of rows filled with 0

    def recorded(self) -> WindowPartition:
        """The day as the window manifest records it."""
        return WindowPartition(
            date=dt.date.fromisoformat(self.date),
            path=Path(self.path),
            rows=self.rows,
            label_rate=self.label_rate,
            null_rates=self.null_rates,
            partition_key=self.partition_key,
            source_version=self.source_version,
            bytes=self.bytes,
            sha256=self.sha256,
            zero_filled=self.zero_filled,
        )


def example_schema(
    service: str = FEATURE_SERVICE, views: Sequence[feast_repo.ViewDef] | None = None
) -> pa.Schema:
    """Arrow schema of a partition: impression columns, then the service's features by full name
    (``views``: the service's views as applied; default: read from the definitions)."""
    fields = list(IMPRESSION_SCHEMA)
    for view in views if views is not None else feast_repo.service_views(service):
        fields += [pa.field(f"{view.name}__{f}", _ARROW_TYPES[t]) for f, t in view.fields.items()]
    schema = pa.schema(fields)
    if set(schema.names) != set(EXAMPLE_COLUMNS):
        raise DataValidationError(
            "feature definitions and features.schema.EXAMPLE_COLUMNS disagree:"
            f" only in definitions {sorted(set(schema.names) - set(EXAMPLE_COLUMNS))},"
            f" only in schema.py {sorted(set(EXAMPLE_COLUMNS) - set(schema.names))}"
        )
    return pa.schema([schema.field(c) for c in EXAMPLE_COLUMNS])


class WindowPartition(BaseModel):
    """One day of a window (a training day or the eval day) as its manifest records it. Manifests
    written before a field existed lack it (None)."""

    model_config = ConfigDict(frozen=True, extra="ignore")

    date: dt.date
    path: Path
    rows: int
    label_rate: float | None = None
    null_rates: dict[str, float] | None = None
    partition_key: str | None = None
    source_version: str | None = None
    # the file as recorded in partition.json: the trainer checks the file against them
    bytes: int | None = None
    sha256: str | None = None
    zero_filled: dict[str, float] | None = None
    """column -> share of the rows whose pair was absent from its snapshot, filled with 0"""


class WindowManifest(BaseModel):
    """A built window: ``<home>/windows/<end>_<days>d/manifest.json`` (docs/architecture.md
    "Window manifest"), written by :func:`build_window`, read with :func:`read_window_manifest`.
    What the trainer needs is required; the rest is None in manifests written before it existed.
    ``path`` is where it is written / was read from (not part of the file)."""

    model_config = ConfigDict(frozen=True, extra="ignore", populate_by_name=True)

    window_id: str
    end: dt.date
    """the eval day; training days are [end - days, end)"""
    days: int
    train: tuple[WindowPartition, ...]
    eval: WindowPartition
    missing_days: list[dt.date] | None = None
    columns: dict[str, str] | None = Field(
        default=None, validation_alias="schema", serialization_alias="schema"
    )
    """column -> arrow type of the partitions"""
    feature_service: str | None = None
    feature_version: str
    source_version: dict[str, str] | None = None
    """date -> the source-data version its partition was built from"""
    rows_train: int | None = None
    rows_eval: int | None = None
    label_rate: float | None = None
    days_built: int | None = None
    days_reused: int | None = None
    days_repaired: dict[str, str] | None = None
    checks: WindowChecks | None = None
    zero_filled: list[str] | None = None
    """the columns where a row absent from its view reads 0, not null (the history views' counts
    and rates: no impression of the pair in the horizon)"""
    created_at: str | None = None
    duration_seconds: float | None = None
    path: Path = Field(exclude=True)

    @model_validator(mode="before")
    @classmethod
    def _days_of_old_manifests(cls, raw: Any) -> Any:
        if isinstance(raw, dict) and "days" not in raw and isinstance(raw.get("train"), list):
            return {**raw, "days": len(raw["train"])}
        return raw

    @property
    def train_rows(self) -> int:
        """Rows of the training partitions held (all of the window's, or the days an incremental
        run kept: ``rows_train`` stays what the build recorded)."""
        return sum(p.rows for p in self.train)

    @property
    def train_label_rate(self) -> float | None:
        """Save rate over the training partitions held (None when one does not record it)."""
        if not self.train or any(p.label_rate is None for p in self.train) or not self.train_rows:
            return None
        return sum(p.rows * (p.label_rate or 0.0) for p in self.train) / self.train_rows

    def record(self) -> dict[str, JsonValue]:
        """The file's JSON (what is written)."""
        return self.model_dump(mode="json", by_alias=True, exclude_unset=True)


def read_window_manifest(path: Path) -> WindowManifest:
    """Parse the window manifest at ``path``; DataValidationError naming what is wrong."""
    if not path.is_file():
        raise DataValidationError(
            f"no window manifest at {path}: build the window first (ranker features window --end ... --days ...)"
        )
    try:
        raw = read_json(path)
    except ValueError as exc:
        raise DataValidationError(f"window manifest {path} is not valid JSON: {exc}") from None
    if not isinstance(raw, dict):
        raise DataValidationError(f"window manifest {path} does not hold a JSON object")
    for key in ("window_id", "train", "eval", "feature_version"):
        if key not in raw:
            raise DataValidationError(f"window manifest {path} lacks {key!r}")
    entries = [*(raw["train"] if isinstance(raw["train"], list) else [raw["train"]]), raw["eval"]]
    for where, entry in zip(["train"] * (len(entries) - 1) + ["eval"], entries, strict=True):
        if not isinstance(entry, dict) or "path" not in entry or "rows" not in entry:
            raise DataValidationError(f"window manifest: {where} entry needs 'path' and 'rows': {entry!r}")
    try:
        return WindowManifest.model_validate({**raw, "path": path})
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        raise DataValidationError(f"window manifest {path}: {where}: {first['msg']}") from None


def load_manifest(
    ws: Workspace, end: dt.date, days: int = DEFAULT_DAYS
) -> dict[str, Any]:  # as the file holds it
    """The manifest of the window ``(end, days)`` as the file holds it, unparsed: the data validation
    (features.validation.step.manifest_problems) reports what is wrong with a manifest rather than
    refusing it. Everything else reads :func:`read_window_manifest`."""
    path = ws.window_manifest(end, days)
    if not path.is_file():
        raise RankerError(
            f"no window manifest at {path}: run `ranker features window --end {end.isoformat()} --days {days}`"
        )
    try:
        return read_json(path)
    except ValueError as exc:
        raise DataValidationError(
            f"window manifest {path} is not valid JSON ({exc}): rebuild it with"
            f" `ranker features window --end {end.isoformat()} --days {days}`"
        ) from None


# bump when the join or the partition layout changes: every partition is rebuilt once
# 2: the key also hashes the day before's snapshots; partition.json records bytes and sha256
# 3: the history views (a second join by the pin's category; absent pairs filled with 0)
PARTITION_FORMAT = 3


def serving_version(ws: Workspace, day: dt.date) -> str:
    """Content hash of every source file that can serve day ``day``'s join: its impressions, its
    snapshots, and the day before's snapshots. Feast's TTL check is inclusive
    (``feature_ts >= event_ts - ttl``), so with a 24 h TTL an impression at exactly D 00:00:00 can
    be served by D-1's snapshot where D's lacks the entity; the key hashes those files too rather
    than narrowing the TTL (a 24 h - 1 us TTL would rest on how each offline store rounds)."""
    before = day - dt.timedelta(days=1)
    return hashlib.sha256(
        "\0".join(
            [
                sources.day_version(ws, SOURCE_TABLES, day),
                sources.day_version(ws, sources.SNAPSHOTS, before),
            ]
        ).encode()
    ).hexdigest()


def day_bounds(day: dt.date) -> tuple[pd.Timestamp, pd.Timestamp]:
    """[D 00:00, D+1 00:00) in UTC: the timestamps day D's impressions may have."""
    start = pd.Timestamp(dt.datetime.combine(day, dt.time(), dt.UTC))
    return start, start + pd.Timedelta(days=1)


def check_day_timestamps(day: dt.date, imp: pd.DataFrame) -> None:
    """Every impression of day D's partition has its timestamp inside [D, D+1): a row filed
    under the wrong day would be joined with the wrong day's snapshots (and keyed by them)."""
    start, end = day_bounds(day)
    ts = pd.to_datetime(imp["event_timestamp"], utc=True)
    bad = imp[(ts < start) | (ts >= end)]
    if len(bad):
        shown = ", ".join(
            f"{r.request_id}/{r.pin_id} at {pd.Timestamp(r.event_timestamp).isoformat()}"
            for r in bad.head(5).itertuples()
        )
        raise DataValidationError(
            f"{len(bad)} impressions filed under {day.isoformat()} have timestamps outside"
            f" [{start.isoformat()}, {end.isoformat()}): {shown}" + (" ..." if len(bad) > 5 else "")
        )


def _partition_key(feature_version: str, source_version: str) -> str:
    raw = f"{PARTITION_FORMAT}:{feature_version}:{source_version}"
    return hashlib.sha256(raw.encode()).hexdigest()[:16]


def _partition_stats(
    frame: pd.DataFrame, schema: pa.Schema
) -> tuple[float, dict[str, float], dict[str, float]]:
    """(label rate, null rate per feature, share of rows filled with 0 per zero-filled column:
    the rows whose view's snapshot time is null, i.e. whose pair was absent)."""
    n = len(frame)
    label_rate = float(frame[LABEL].mean()) if n else 0.0
    features = [c for c in schema.names if c not in IMPRESSION_SCHEMA.names]
    null_rates = {c: (float(frame[c].isna().mean()) if n else 0.0) for c in features}
    zero_filled = {
        c: null_rates.get(f"{c.split('__', 1)[0]}__{SNAPSHOT_TIME}", 0.0) for c in zero_filled_columns(schema)
    }
    return label_rate, null_rates, zero_filled


def _lookup(
    store: FeatureStore,
    day: dt.date,
    stage: str,
    lookups: pd.DataFrame,
    key: Sequence[str],
    features: list[str],
    columns: list[str],
) -> pd.DataFrame:
    """One Feast point-in-time join of ``lookups`` (unique on ``key``): one row per lookup, with
    ``columns`` (the features' full names)."""
    if lookups.empty:  # nothing to look up (no row has the key): Feast is not asked
        return pd.DataFrame({**{k: lookups[k] for k in key}, **{c: pd.Series(dtype=object) for c in columns}})
    try:
        with feast_repo.quiet_stdout():
            job = store.get_historical_features(entity_df=lookups, features=features, full_feature_names=True)
            feats = job.to_df()
    except Exception as exc:  # unreadable source files surface here, deep inside ibis/duckdb
        raise DataValidationError(
            f"{stage} of {day.isoformat()} failed: {type(exc).__name__}: {exc}"
        ) from exc
    build_checks.check_rows_conserved(day, stage, len(lookups), len(feats))
    feats["event_timestamp"] = pd.to_datetime(feats["event_timestamp"], utc=True).astype(
        "datetime64[ns, UTC]"
    )
    if feats.duplicated(list(key)).any():
        raise DataValidationError(f"{stage} of {day.isoformat()} returned duplicate lookups")
    missing = sorted(set(columns) - set(feats.columns))
    if missing:
        raise DataValidationError(f"{stage} of {day.isoformat()} did not return features {missing}")
    return feats[[*key, *columns]]


def _refs(
    service: FeatureService, views: Sequence[str], columns: Sequence[str]
) -> tuple[list[str], list[str]]:
    """The service's features of ``views`` that the partition holds: (Feast refs, full names)."""
    wanted = set(columns)
    refs, names = [], []
    for projection in service.feature_view_projections:
        if projection.name not in views:
            continue
        for feature in projection.features:
            if f"{projection.name}__{feature.name}" in wanted:
                refs.append(f"{projection.name}:{feature.name}")
                names.append(f"{projection.name}__{feature.name}")
    return refs, names


def join_day(store: FeatureStore, day: dt.date, impressions: pa.Table, schema: pa.Schema) -> pd.DataFrame:
    """Point-in-time join of one day's impressions with the feature service; every row counted.

    Two Feast joins, as serving looks features up: the user's, the pin's and the user x pin
    history by (user_id, pin_id, time); then the user x category history by (user_id, the pin's
    category as that first join read it, time). A pair absent from its snapshot had no impression
    in 28 days: its history counts and rates are 0 (HISTORY_FEATURES; their as_of stays null)."""
    build_checks.check_schema(day, impressions.schema, IMPRESSION_SCHEMA, "impressions")
    imp = impressions.to_pandas()
    build_checks.check_unique_impressions(day, imp, IMPRESSION_KEY)
    check_day_timestamps(day, imp)
    imp["event_timestamp"] = pd.to_datetime(imp["event_timestamp"], utc=True).astype("datetime64[ns, UTC]")
    feature_cols = [c for c in schema.names if c not in IMPRESSION_SCHEMA.names]
    service = store.get_feature_service(FEATURE_SERVICE)
    first_views = [p.name for p in service.feature_view_projections if p.name not in SECOND_STAGE_VIEWS]
    refs, names = _refs(service, first_views, feature_cols)
    lookups = imp[list(LOOKUP_KEY)].drop_duplicates(ignore_index=True)
    feats = _lookup(store, day, "the Feast point-in-time join", lookups, LOOKUP_KEY, refs, names)
    out = imp.merge(feats, on=list(LOOKUP_KEY), how="left", validate="many_to_one")
    build_checks.check_rows_conserved(day, "joining features back to impressions", len(imp), len(out))

    refs, names = _refs(service, SECOND_STAGE_VIEWS, feature_cols)
    if refs:
        by_category = out[["user_id", CATEGORY_COLUMN, "event_timestamp"]].rename(
            columns={CATEGORY_COLUMN: CATEGORY_KEY}
        )
        lookups = by_category.dropna(subset=[CATEGORY_KEY]).drop_duplicates(ignore_index=True)
        stage = "the Feast point-in-time join of the user x category history"
        feats = _lookup(store, day, stage, lookups, CATEGORY_LOOKUP_KEY, refs, names)
        joined = by_category.merge(feats, on=list(CATEGORY_LOOKUP_KEY), how="left", validate="many_to_one")
        build_checks.check_rows_conserved(
            day, "joining the user x category history back", len(out), len(joined)
        )
        for name in names:
            out[name] = joined[name].to_numpy()
    missing = sorted(set(feature_cols) - set(out.columns))
    if missing:
        raise DataValidationError(f"the Feast join of {day.isoformat()} did not return features {missing}")
    for name in zero_filled_columns(schema):
        filled = out[name].astype("float64").fillna(0.0)  # counts are far below 2**53
        out[name] = (
            filled.astype("int64")
            if pa.types.is_integer(schema.field(name).type)
            else filled.astype("float64")
        )
    return out.sort_values(["request_id", "position"], kind="stable", ignore_index=True)[list(schema.names)]


def zero_filled_columns(schema: pa.Schema) -> list[str]:
    """The partition columns a missing row fills with 0 (a pair with no impression in the horizon)."""
    return [c for c in HISTORY_FEATURES if c in schema.names]


class _Store:
    """Opens the Feast store on first use (only when a partition has to be built)."""

    def __init__(self, ws: Workspace, settings: feast_repo.StoreSettings | None) -> None:
        self.ws = ws
        self.settings = settings
        self._store: FeatureStore | None = None

    def get(self) -> FeatureStore:
        if self._store is None:
            self._store = feast_repo.open_store(self.ws, self.settings)
        return self._store


def _build_partition(
    ws: Workspace, store: _Store, day: dt.date, schema: pa.Schema, feature_version: str
) -> DayPartition:
    source_version = serving_version(ws, day)
    key = _partition_key(feature_version, source_version)
    target = ws.windows / "days" / day.isoformat() / key
    stats_path = target / "partition.json"
    problem = None
    if stats_path.is_file():
        record, problem = read_record(stats_path)
        if record is not None:
            problem = partition_problem(target / "examples.parquet", record)
        if record is not None and problem is None:
            return DayPartition(
                date=day.isoformat(),
                path=str(target / "examples.parquet"),
                rows=int(record["rows"]),
                label_rate=float(record["label_rate"]),
                null_rates=dict(record["null_rates"]),
                partition_key=key,
                source_version=source_version,
                built=False,
                bytes=int(record["bytes"]),
                sha256=str(record["sha256"]),
                zero_filled=record.get("zero_filled"),
            )
        log.warning("partition %s (%s) does not match its record: %s; rebuilding it", day, key, problem)
    started = time.perf_counter()
    impressions = sources.read_day(ws, sources.IMPRESSIONS, day)
    if impressions.num_rows == 0:
        raise DataValidationError(f"the source impressions of {day.isoformat()} are empty")
    frame = join_day(store.get(), day, impressions, schema)
    label_rate, null_rates, zero_filled = _partition_stats(frame, schema)
    table = pa.Table.from_pandas(frame, schema=schema, preserve_index=False)
    stats = {
        "date": day.isoformat(),
        "rows": table.num_rows,
        "rows_in": impressions.num_rows,
        "label_rate": label_rate,
        "null_rates": null_rates,
        "zero_filled": zero_filled,
        "feature_version": feature_version,
        "source_version": source_version,
        "schema": {f.name: str(f.type) for f in schema},
        "offline_store": feast_repo.offline_store_name(store.get().config.offline_store.type),
        "build_seconds": round(time.perf_counter() - started, 3),
    }
    with atomic_dir(target) as tmp:
        # row groups of 64k rows: the trainer streams partitions a row group at a time
        pq.write_table(table, tmp / "examples.parquet", compression="zstd", row_group_size=ROW_GROUP_ROWS)
        # what reuse verifies: a partition truncated or altered after this is rebuilt, not trusted
        stats["bytes"] = (tmp / "examples.parquet").stat().st_size
        stats["sha256"] = sha256_file(tmp / "examples.parquet")
        # the data validation's statistics of the day, computed once, from the table in memory
        day_statistics.write(
            day_statistics.path_beside(tmp / "examples.parquet"),
            day_statistics.compute(table, day, str(stats["sha256"])),
        )
        atomic_write_json(tmp / "partition.json", stats)
    log.info("built partition %s (%d rows) in %.1fs", day, table.num_rows, stats["build_seconds"])
    return DayPartition(
        date=day.isoformat(),
        path=str(target / "examples.parquet"),
        rows=table.num_rows,
        label_rate=label_rate,
        null_rates=null_rates,
        partition_key=key,
        source_version=source_version,
        built=True,
        bytes=int(stats["bytes"]),
        sha256=str(stats["sha256"]),
        repaired=problem,
        zero_filled=zero_filled,
    )


def build_window(
    ws: Workspace,
    end: dt.date,
    days: int = DEFAULT_DAYS,
    checks: WindowChecks | None = None,
    settings: feast_repo.StoreSettings | None = None,
) -> dict[str, Any]:  # the manifest's JSON: the backtest, the study and window_step's fakes index it
    """Build (or reuse) the partitions of the window ending at ``end`` and publish its manifest
    (``settings``: the Feast store the workspace was applied with; default from the environment).
    Returns the manifest as written (:class:`WindowManifest` parses it)."""
    checks = checks or WindowChecks()
    checks.validate()
    if not 0 < days <= MAX_DAYS:
        raise RankerError(f"window days must be in 1..{MAX_DAYS}, got {days}")
    try:
        end - dt.timedelta(days=days)
        end + dt.timedelta(days=1)
    except OverflowError:
        raise RankerError(
            f"a {days}-day window ending {end.isoformat()} runs outside the calendar (years 1..9999)"
        ) from None
    started = time.perf_counter()
    target = ws.window_manifest(end, days)
    try:
        manifest = _build(ws, end, days, checks, started, settings)
    except Exception:
        # a rebuild that fails must not leave an older manifest claiming the window is good
        target.unlink(missing_ok=True)
        raise
    record = manifest.record()
    atomic_write_json(target, record)
    return record


def _build(
    ws: Workspace,
    end: dt.date,
    days: int,
    checks: WindowChecks,
    started: float,
    settings: feast_repo.StoreSettings | None,
) -> WindowManifest:
    feature_version = feast_repo.feature_version()
    applied = feast_repo.applied_version(ws)
    if applied is None:
        raise RankerError(f"the Feast repository is not applied in {ws.feast}: run `ranker features apply`")
    if applied != feature_version:
        raise RankerError(
            f"feature definitions changed since the last apply ({applied} -> {feature_version}):"
            " run `ranker features apply`"
        )
    lacking = derive.missing_history_days(ws)
    if lacking:
        raise DataValidationError(
            f"{ws.source} has no history snapshots (user_pins, user_categories) for {len(lacking)} days"
            f" ({lacking[0].isoformat()}..{lacking[-1].isoformat()}): it was derived before them;"
            " run `ranker features apply` (derives them from the impressions) or rebuild it with"
            " `ranker data synth` / `ranker data import`"
        )
    # the views recorded by that apply: a window whose days are all reused needs no Feast import
    schema = example_schema(FEATURE_SERVICE, feast_repo.service_views(FEATURE_SERVICE, ws))
    train_days = [end - dt.timedelta(days=days - i) for i in range(days)]
    present = set(sources.list_days(ws, sources.IMPRESSIONS))
    if end not in present:
        raise DataValidationError(f"the eval day {end.isoformat()} has no impressions in {ws.source}")
    missing = [d for d in train_days if d not in present]
    build_checks.check_coverage(train_days, missing, checks.min_coverage)

    store = _Store(ws, settings)
    train: list[DayPartition] = []
    for day in train_days:
        if day in present:
            train.append(_build_partition(ws, store, day, schema, feature_version))
    eval_part = _build_partition(ws, store, end, schema, feature_version)

    parts = [*train, eval_part]
    rows_train = sum(p.rows for p in train)
    saves_train = sum(p.rows * p.label_rate for p in train)
    window_id = hashlib.sha256(
        json.dumps([end.isoformat(), days, [p.partition_key for p in parts]]).encode()
    ).hexdigest()

    return WindowManifest(
        path=ws.window_manifest(end, days),
        window_id=window_id,
        end=end,
        days=days,
        train=tuple(p.recorded() for p in train),
        eval=eval_part.recorded(),
        missing_days=missing,
        columns={f.name: str(f.type) for f in schema},
        feature_service=FEATURE_SERVICE,
        feature_version=feature_version,
        source_version={p.date: p.source_version for p in parts},
        rows_train=rows_train,
        rows_eval=eval_part.rows,
        label_rate=saves_train / rows_train if rows_train else 0.0,
        days_built=sum(p.built for p in parts),
        days_reused=sum(not p.built for p in parts),
        days_repaired={p.date: p.repaired for p in parts if p.repaired},
        checks=checks,
        zero_filled=zero_filled_columns(schema),
        created_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
        duration_seconds=round(time.perf_counter() - started, 3),
    )


@dataclass(frozen=True)
class WindowRequest:
    """Build (or reuse) the window ending at ``end`` (its eval day) and publish its manifest."""

    workspace: Workspace
    end: dt.date
    days: int = DEFAULT_DAYS
    checks: WindowChecks = field(default_factory=WindowChecks)
    # the Feast store the workspace was applied with (the CLI passes the pipeline config's
    # [features]); None: feast_repo.store_settings()'s environment fallback
    settings: feast_repo.StoreSettings | None = None


# the manifest fields the ``window`` step summary carries (with the manifest's path)
WINDOW_SUMMARY_FIELDS = (
    "window_id",
    "end",
    "days",
    "rows_train",
    "rows_eval",
    "label_rate",
    "days_built",
    "days_reused",
    "days_repaired",
    "missing_days",
    "feature_version",
    "duration_seconds",
)


def window_step(req: WindowRequest) -> WindowSummary:
    """Build the window; the ``window`` step summary."""
    manifest = build_window(req.workspace, req.end, req.days, req.checks, req.settings)
    return WindowSummary(
        **{k: manifest[k] for k in WINDOW_SUMMARY_FIELDS},
        manifest=str(req.workspace.window_manifest(req.end, req.days)),
    )


@dataclass(frozen=True)
class FreshnessRequest:
    """How fresh the source is: its newest day, and its lag behind now (or behind ``end``'s end)."""

    workspace: Workspace
    end: dt.date | None = None  # require this day to have landed
    max_lag_hours: float | None = None  # fail when the lag is larger (None: report only)


def freshness(req: FreshnessRequest) -> FreshnessSummary:
    """The ``freshness`` step summary; DataValidationError when ``end`` has not landed or the
    source lags more than ``max_lag_hours``."""
    ws, end, max_lag_hours = req.workspace, req.end, req.max_lag_hours
    days = sources.list_days(ws, sources.IMPRESSIONS)
    if not days:
        raise DataValidationError(f"no impressions in {ws.source}: the source is empty")
    latest = days[-1]
    latest_end = dt.datetime.combine(latest + dt.timedelta(days=1), dt.time(), dt.UTC)
    reference = (
        dt.datetime.combine(end + dt.timedelta(days=1), dt.time(), dt.UTC) if end else dt.datetime.now(dt.UTC)
    )
    lag = max(0.0, (reference - latest_end).total_seconds())
    summary = FreshnessSummary(
        latest_source_date=latest,
        earliest_source_date=days[0],
        source_days=len(days),
        lag_seconds=lag,
        reference=reference.replace(microsecond=0),
        max_lag_hours=max_lag_hours,
    )
    if end is not None and latest < end:
        raise DataValidationError(
            f"source data ends at {latest.isoformat()}; {end.isoformat()} has not landed"
        )
    if max_lag_hours is not None and lag > max_lag_hours * 3600:
        raise DataValidationError(
            f"source data is stale: newest day {latest.isoformat()} is {lag / 3600:.1f} h behind"
            f" {reference.isoformat(timespec='seconds')} (limit {max_lag_hours} h)"
        )
    return summary
