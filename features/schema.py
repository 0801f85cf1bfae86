"""The example schema: the contract between the window builder (features/) and the trainer.

One row per impression, joined point-in-time with user and pin features. Feature columns are
named ``<feature_view>__<feature>`` (Feast ``full_feature_names=True``).
"""

from __future__ import annotations

import pyarrow as pa

FEATURE_SERVICE = "ranker_v1"
USER_VIEW = "user_stats"
PIN_VIEW = "pin_stats"

# impression log (source) and the key/label columns every example keeps
IMPRESSION_SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("user_id", pa.int64()),
        ("pin_id", pa.int64()),
        ("event_timestamp", pa.timestamp("us", tz="UTC")),
        ("position", pa.int32()),
        ("saved", pa.int8()),
    ]
)
LABEL = "saved"
REQUEST_KEY = "request_id"

# the entity keys: ids with an unbounded vocabulary (new users and pins every day)
ENTITY_KEYS: tuple[str, ...] = ("user_id", "pin_id")


def entity_of(column: str) -> str:
    """The key whose rows share ``column``'s value: a view's entity, else the request (one slate)."""
    view = column.split("__", 1)[0] if "__" in column else None
    if view == USER_VIEW or column == "user_id":
        return "user_id"
    if view == PIN_VIEW or column == "pin_id":
        return "pin_id"
    return REQUEST_KEY


# categorical features -> embedding tables (hashed into the table size; unseen values work)
SPARSE_FEATURES: tuple[str, ...] = (
    "user_id",
    "pin_id",
    f"{USER_VIEW}__country",
    f"{PIN_VIEW}__category",
)

# numeric features -> dense tower (nulls: 0 plus the model's own normalisation)
USER_NUMERIC = (
    "impressions_7d",
    "saves_7d",
    "save_rate_7d",
    "impressions_28d",
    "saves_28d",
    "save_rate_28d",
)
PIN_NUMERIC = (*USER_NUMERIC, "age_days")
DENSE_FEATURES: tuple[str, ...] = tuple(f"{USER_VIEW}__{f}" for f in USER_NUMERIC) + tuple(
    f"{PIN_VIEW}__{f}" for f in PIN_NUMERIC
)

# history views: a user's own engagement with a pin and with a category (issue 34), on entity
# pairs (user_id x pin_id, user_id x the pin's category). A pair absent from its snapshot had no
# impression in the horizon: its counts and rates are a true 0 (the window fills them), not a null
USER_PIN_VIEW = "user_pin_stats"
USER_CATEGORY_VIEW = "user_category_stats"
HISTORY_VIEWS: tuple[str, ...] = (USER_PIN_VIEW, USER_CATEGORY_VIEW)
# counts over 7 and 28 days, and rates smoothed toward 0 by one pseudo-impression:
# saves / (impressions + 1), so one save in one impression reads 0.5, not a certain save
HISTORY_NUMERIC = (
    "impressions_7d",
    "saves_7d",
    "save_rate_7d",
    "impressions_28d",
    "saves_28d",
    "save_rate_28d",
)
HISTORY_FEATURES: tuple[str, ...] = tuple(f"{view}__{f}" for view in HISTORY_VIEWS for f in HISTORY_NUMERIC)

# each view's snapshot time, joined with its features (not a model input): the data validation
# reads from it whether a row joined a snapshot dated after its impression (a leak)
SNAPSHOT_TIME = "as_of"
SNAPSHOT_COLUMNS: tuple[str, ...] = tuple(
    f"{view}__{SNAPSHOT_TIME}" for view in (USER_VIEW, PIN_VIEW, *HISTORY_VIEWS)
)

EXAMPLE_COLUMNS: tuple[str, ...] = (
    *IMPRESSION_SCHEMA.names,
    f"{USER_VIEW}__country",
    f"{PIN_VIEW}__category",
    *DENSE_FEATURES,
    *HISTORY_FEATURES,
    *SNAPSHOT_COLUMNS,
)
