"""The data schema kept in the workspace (TFDV's SchemaGen, curated by the operator): per example
column its type, and per feature its presence, value domain and, for a categorical feature with
a bounded vocabulary, the vocabulary.

Inferred on first use from the statistics of the window being validated, then read on every run:
``<home>/validation/schema/<key>.json``. The key hashes the columns' names and types only, so
editing a comment in the feature definitions (which changes the feature version and rebuilds
the partitions) keeps the schema and what an operator wrote into it, while a new or retyped
column starts a new one (a declared schema change: the first run of the new features infers it).
The operator curates the file by hand (widen a domain, add a country, drop a vocabulary) and the
next validation reads it; ``curated_by`` records that it is no longer the inference.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from features.schema import ENTITY_KEYS, REQUEST_KEY, entity_of
from features.validation.statistics import CategoricalStatistics, DayStatistics, NumericStatistics, merge
from ranking.core.atomic import atomic_write_text
from ranking.core.errors import DataValidationError

FORMAT = 1


class FeatureSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    kind: Literal["numeric", "categorical"]
    # a fraction of rows that must hold a value: 1.0 = required (inferred for the impression's own
    # columns when no training day had a null; a feature view's are null for new entities), 0.0 =
    # optional
    min_presence: float = Field(ge=0, le=1)
    # numeric: values must lie in [domain_min, domain_max] (None: unbounded on that side);
    # inferred: 0 when no value was negative, 1 when every value lay in [0, 1] (a rate)
    domain_min: float | None = None
    domain_max: float | None = None
    # categorical with a bounded set of values: every value a row may hold (None: unbounded, e.g.
    # ids); a day whose rows hold other values above [validation] max_unknown_share is an anomaly
    vocabulary: list[str] | None = None
    # judged for drift and skew (off for ids: their top values are a popularity ranking)
    drift: bool = True


class DataSchema(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)

    format: int = FORMAT
    key: str
    columns: dict[str, str]  # every example column -> its arrow type
    features: dict[str, FeatureSchema]
    inferred_from: str  # the window whose statistics it was inferred from
    inferred_at: dt.datetime
    feature_versions: list[str]  # the feature definitions it has served (comments may differ)
    curated_by: str | None = None  # who edited it by hand, and why (set by the operator)


def schema_key(columns: Mapping[str, str]) -> str:
    """What the schema is kept by: the columns' names and types, nothing else."""
    return hashlib.sha256(json.dumps(sorted(columns.items())).encode()).hexdigest()[:16]


def schema_path(folder: Path, columns: Mapping[str, str]) -> Path:
    return folder / f"{schema_key(columns)}.json"


def infer(
    columns: Mapping[str, str], days: Sequence[DayStatistics], window: str, feature_version: str
) -> DataSchema:
    """The schema the training days' statistics show (TFDV's inference, kept conservative: a
    feature is required only when no day had a null; a domain is [0, ...) only when no value was
    negative, [0, 1] only when no value left it)."""
    if not days:
        raise DataValidationError(f"no statistics to infer a data schema from (window {window})")
    merged = merge(days)
    features: dict[str, FeatureSchema] = {}
    for name, stats in merged.items():
        # a feature view's columns are null for an entity it has no snapshot of yet (a new user
        # or pin, any day): never inferred required; the operator may require one by hand
        of_view = entity_of(name) != REQUEST_KEY and name not in ENTITY_KEYS
        required = not of_view and all(d.features[name].nulls == 0 for d in days if name in d.features)
        presence = 1.0 if required else 0.0
        if isinstance(stats, NumericStatistics):
            low = stats.min
            nonnegative = low is not None and low >= 0
            rate = nonnegative and stats.max is not None and stats.max <= 1.0 and "rate" in name
            features[name] = FeatureSchema(
                kind="numeric",
                min_presence=presence,
                domain_min=0.0 if nonnegative else None,
                domain_max=1.0 if rate else None,
            )
        elif isinstance(stats, CategoricalStatistics):
            is_id = name in ENTITY_KEYS
            bounded = stats.complete and not is_id
            features[name] = FeatureSchema(
                kind="categorical",
                min_presence=presence,
                vocabulary=sorted(stats.values) if bounded else None,
                drift=not is_id,
            )
    return DataSchema(
        key=schema_key(columns),
        columns=dict(columns),
        features=features,
        inferred_from=window,
        inferred_at=dt.datetime.now(dt.UTC).replace(microsecond=0),
        feature_versions=[feature_version],
    )


def read(path: Path) -> DataSchema | None:
    """The kept schema, None when there is none yet; a file that does not parse is an error
    (an operator's edit gone wrong must be fixed, not silently replaced by a new inference)."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    try:
        schema = DataSchema.model_validate_json(raw)
    except (ValidationError, ValueError) as exc:
        first = str(exc).strip().splitlines()
        raise DataValidationError(
            f"the data schema {path} does not parse ({' '.join(first[:3])}): fix the edit, or delete the"
            " file to infer it again"
        ) from None
    if schema.key != path.stem:
        raise DataValidationError(
            f"the data schema {path} holds key {schema.key}, not its file name's {path.stem}:"
            " it was copied from another schema; infer it again (delete the file)"
        )
    return schema


def write(path: Path, schema: DataSchema) -> None:
    atomic_write_text(path, schema.model_dump_json(indent=2) + "\n")


def with_feature_version(schema: DataSchema, feature_version: str) -> DataSchema:
    if feature_version in schema.feature_versions:
        return schema
    return schema.model_copy(update={"feature_versions": [*schema.feature_versions, feature_version]})
