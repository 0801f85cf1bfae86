"""Days of examples made in memory, in the partition schema, for the data validation's pure tests:
a stationary synthetic day (requests of heavy and light users, pins of a few categories) whose
statistics a test can compute, break and compare."""

from __future__ import annotations

import datetime as dt

import numpy as np
import pyarrow as pa

from features.schema import PIN_NUMERIC, PIN_VIEW, USER_NUMERIC, USER_VIEW

COUNTRIES = [f"c{i}" for i in range(8)]
CATEGORIES = [f"k{i}" for i in range(12)]


def _numeric_type(name: str) -> pa.DataType:
    return pa.float64() if name.startswith("save_rate") else pa.int64()


SCHEMA = pa.schema(
    [
        ("request_id", pa.string()),
        ("user_id", pa.int64()),
        ("pin_id", pa.int64()),
        ("event_timestamp", pa.timestamp("us", tz="UTC")),
        ("position", pa.int32()),
        ("saved", pa.int8()),
        (f"{USER_VIEW}__country", pa.string()),
        (f"{PIN_VIEW}__category", pa.string()),
        *((f"{USER_VIEW}__{n}", _numeric_type(n)) for n in USER_NUMERIC),
        *((f"{PIN_VIEW}__{n}", _numeric_type(n)) for n in PIN_NUMERIC),
    ]
)
COLUMNS = {f.name: str(f.type) for f in SCHEMA}


def make_day(
    day: dt.date, seed: int, requests: int = 400, slate: int = 10, save_rate: float = 0.05
) -> pa.Table:
    """One day: ``requests`` slates of ``slate`` pins, timed inside the day; features drawn from
    the same distributions every day (a user's and a pin's values repeat on their rows)."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, 300, requests)
    n = requests * slate
    # distinct pins within a slate (one impression per pin and request)
    pins = ((rng.integers(0, 2000, requests)[:, None] + 7 * np.arange(slate)) % 2000).reshape(-1)
    start = dt.datetime.combine(day, dt.time(), dt.UTC).timestamp()
    seconds = np.repeat(rng.uniform(60, 86_340, requests), slate)
    user_of_row = np.repeat(users, slate)
    user_rng = np.random.default_rng(1)  # entity attributes fixed across days
    user_imp = user_rng.poisson(40, 300)
    user_country = user_rng.integers(0, len(COUNTRIES), 300)
    pin_rng = np.random.default_rng(2)
    pin_imp = pin_rng.poisson(30, 2000)
    pin_cat = pin_rng.integers(0, len(CATEGORIES), 2000)
    data: dict[str, object] = {
        "request_id": [f"{day:%Y%m%d}-r{r}" for r in range(requests) for _ in range(slate)],
        "user_id": user_of_row,
        "pin_id": pins,
        "event_timestamp": [dt.datetime.fromtimestamp(start + s, dt.UTC) for s in seconds],
        "position": np.tile(np.arange(slate, dtype=np.int32), requests),
        "saved": (rng.random(n) < save_rate).astype(np.int8),
        f"{USER_VIEW}__country": [COUNTRIES[c] for c in user_country[user_of_row]],
        f"{PIN_VIEW}__category": [CATEGORIES[c] for c in pin_cat[pins]],
    }
    # one snapshot a day per entity: every row of a user (pin) joins the same values
    for view, imp, key in ((USER_VIEW, user_imp, user_of_row), (PIN_VIEW, pin_imp, pins)):
        per_entity = imp + rng.integers(0, 3, len(imp))
        saved = rng.binomial(per_entity, 0.05)
        impressions, saves = per_entity[key], saved[key]
        for horizon, factor in (("7d", 1), ("28d", 4)):
            data[f"{view}__impressions_{horizon}"] = impressions * factor
            data[f"{view}__saves_{horizon}"] = saves * factor
            data[f"{view}__save_rate_{horizon}"] = (saves + 0.5) / (impressions + 10.0)
    data[f"{PIN_VIEW}__age_days"] = pins % 60
    return pa.table(data, schema=SCHEMA)


def days(first: dt.date, count: int, seed: int = 0) -> list[tuple[dt.date, pa.Table]]:
    return [
        (first + dt.timedelta(days=i), make_day(first + dt.timedelta(days=i), seed + i)) for i in range(count)
    ]
