"""Bad candidates for the gate suite (``ranker backtest --inject KIND@DAY,...``): each kind is a
realistic failure of a production retrain, made from the day's clean candidate, its window or
its scores. Pure parts here (the kinds, parsing, the data and score transforms); the suite
(ranking/backtest/suite.py) trains and scores them.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, TypedDict

import numpy as np

from ranking.core.errors import RankerError

if TYPE_CHECKING:
    import pandas as pd

    from features.window import WindowManifest

# kind -> the failure it stands for, in one line (the report prints these)
KINDS: dict[str, str] = {
    "shuffled_labels": "trained on shuffled labels: a join bug paired impressions with other rows' saves",
    "zeroed_feature": "one feature (pin save rate, 28 d) zeroed at training time: an upstream column went to 0",
    "reset_tables": "embedding tables back to their initialisation: the export lost the trained tables",
    "lr_x100": "learning rates x100 (diverged): a config typo in the optimizer section",
    "stale_window": "trained on a window 30 days old: the window step kept reading a stuck manifest",
    "nan_scores": "2% of the scores NaN: a numeric overflow in the serving export",
    "calibration_x3": "probabilities x3 (calibration off 3x): a wrong negative-sampling correction",
    "leakage": "trained on the eval day itself (window end taken as inclusive): too good to be true",
    "null_spike": "a feature view's join lost for 40% of the rows: its features null there (a lost join)",
    "rehashed_category": "the pin category re-hashed into a new vocabulary upstream",
    "rate_x100": "a rate feature (pin save rate, 28 d) in percent instead of a fraction (x100)",
    "day_duplicated": "one training day's file loaded again as the next day (the same requests, re-dated)",
    "label_rate_doubled": "every positive row joined twice (saves counted double)",
    "first_seen_shuffled": "first-seen users' slates ranked at random (their features lost in serving): one slice"
    " hurt, the day's totals barely",
}
# kinds made from a clean candidate's scores on the day (no training)
SCORE_KINDS = ("nan_scores", "calibration_x3", "first_seen_shuffled")
TRAINED_KINDS = ("shuffled_labels", "zeroed_feature", "lr_x100", "stale_window", "leakage")
# bugs made in the window the run reads: its data validation must stop each by this anomaly
DATA_KINDS: dict[str, str] = {
    "zeroed_feature": "feature_all_zero",
    "leakage": "leakage_event_time",
    "null_spike": "null_rate_jump",
    "rehashed_category": "schema_vocabulary",
    "rate_x100": "schema_domain",
    "day_duplicated": "day_repeated",
    "label_rate_doubled": "label_rate_jump",
}
ZEROED_FEATURE = "pin_stats__save_rate_28d"
RATE_FEATURE = "pin_stats__save_rate_28d"
REHASHED_FEATURE = "pin_stats__category"
LOST_VIEW = "pin_stats"
NULL_SHARE = 0.4
STALE_DAYS = 30
NAN_SHARE = 0.02
CALIBRATION_FACTOR = 3.0
LR_FACTOR = 100.0


class InjectionError(RankerError):
    """An --inject value cannot be used."""


@dataclass(frozen=True, order=True)
class Injection:
    day: dt.date
    kind: str

    @property
    def key(self) -> str:
        return f"{self.kind}@{self.day.isoformat()}"


def parse_injections(
    text: str, days: list[dt.date], earliest: dt.date | None = None
) -> tuple[Injection, ...]:
    """``KIND@YYYY-MM-DD,...`` (or ``all`` = every kind on 3 spread days); each day must be one of
    the backtest's eval days after its first; ``earliest``: the first window end the workspace's
    data can build (a stale_window candidate needs a window STALE_DAYS before its day)."""
    text = text.strip()
    if text == "all":
        return spread_injections(days, earliest=earliest)
    found: list[Injection] = []
    for word in filter(None, (w.strip() for w in text.split(","))):
        kind, sep, day_text = word.partition("@")
        if kind not in KINDS or not sep:
            raise InjectionError(
                f"--inject {word!r}: expected KIND@YYYY-MM-DD with KIND one of {', '.join(KINDS)}"
            )
        try:
            day = dt.date.fromisoformat(day_text)
        except ValueError:
            raise InjectionError(f"--inject {word!r}: {day_text!r} is not a date (YYYY-MM-DD)") from None
        if day not in days[1:]:
            raise InjectionError(
                f"--inject {word!r}: {day} is not an eval day after the first"
                f" ({days[1] if len(days) > 1 else '-'} .. {days[-1]}): on the first day there is no"
                " champion to judge against"
            )
        if kind == "stale_window" and earliest is not None and _stale_end(day) < earliest:
            raise InjectionError(
                f"--inject {word!r}: its window would end {_stale_end(day)}, before the first window the"
                f" workspace's data can build ({earliest})"
            )
        found.append(Injection(day, kind))
    if not found:
        raise InjectionError("--inject needs at least one KIND@DAY (or all)")
    if len(set(found)) != len(found):
        raise InjectionError("--inject names the same KIND@DAY twice")
    return tuple(sorted(found))


def _stale_end(day: dt.date) -> dt.date:
    return day - dt.timedelta(days=STALE_DAYS)


def spread_injections(
    days: list[dt.date], per_kind: int = 3, earliest: dt.date | None = None
) -> tuple[Injection, ...]:
    """Every kind on ``per_kind`` days spread evenly over the eval days after the first (kinds
    offset from each other, so each meets early and late champions)."""
    out = []
    for i, kind in enumerate(KINDS):
        usable = [
            d
            for d in days[1:]
            if not (kind == "stale_window" and earliest is not None and _stale_end(d) < earliest)
        ]
        if len(usable) < per_kind:
            raise InjectionError(
                f"--inject all: {kind} needs {per_kind} usable eval days, the backtest has {len(usable)}"
            )
        step = len(usable) / per_kind
        out += [Injection(usable[int(j * step + i * step / len(KINDS))], kind) for j in range(per_kind)]
    return tuple(sorted(out))


# ---------------------------------------------------------------- transforms (pure)


def nan_scores(scores: pd.DataFrame, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    out = scores.copy()
    values = out["score"].to_numpy(dtype=np.float64).copy()
    values[rng.random(len(values)) < NAN_SHARE] = np.nan
    out["score"] = values
    return out


def first_seen_shuffled(scores: pd.DataFrame, first_seen: set[str], seed: int) -> pd.DataFrame:
    """The same scores with the slates of the requests in ``first_seen`` ranked at random: each
    such slate's scores permuted among its own pins (the day's score distribution kept)."""
    out = scores.copy()
    rows = np.flatnonzero(out["request_id"].isin(first_seen).to_numpy())
    if not len(rows):
        return out
    rng = np.random.default_rng(seed)
    requests = out["request_id"].to_numpy()[rows]
    by_request = np.lexsort((rows, requests))  # each slate's rows together, in row order
    shuffled = np.lexsort((rng.random(len(rows)), requests))  # the same slates, rows in random order
    values = out["score"].to_numpy(dtype=np.float64).copy()
    values[rows[by_request]] = values[rows[shuffled]]
    out["score"] = values
    return out


def first_seen_requests(examples: pd.DataFrame) -> set[str]:
    """The eval day's requests of users first seen that day (no 28-day impressions before it;
    ``ranking.evaluation.slices``' first-seen slice)."""
    from ranking.evaluation.slices import USER_ACTIVITY

    activity = examples[USER_ACTIVITY].fillna(0).to_numpy(dtype=np.float64)
    return set(examples["request_id"].to_numpy()[activity <= 0].tolist())


def rescaled_scores(scores: pd.DataFrame) -> pd.DataFrame:
    out = scores.copy()
    out["score"] = np.clip(out["score"].to_numpy(dtype=np.float64) * CALIBRATION_FACTOR, 0.0, 1.0)
    return out


def shuffled_labels(table: Any, seed: int) -> Any:
    """A pyarrow table with its ``saved`` column permuted (label rate kept, the link to the row lost)."""
    import pyarrow as pa

    labels = table.column("saved").to_numpy()
    permuted = labels[np.random.default_rng(seed).permutation(len(labels))]
    return table.set_column(table.schema.get_field_index("saved"), "saved", pa.array(permuted))


def zeroed_feature(table: Any, column: str = ZEROED_FEATURE) -> Any:
    import pyarrow as pa

    index = table.schema.get_field_index(column)
    if index < 0:
        raise InjectionError(f"zeroed_feature: the partition has no column {column}")
    kind = table.schema.field(index).type
    return table.set_column(index, column, pa.array(np.zeros(len(table)), type=kind))


def null_spike(table: Any, seed: int, view: str = LOST_VIEW, share: float = NULL_SHARE) -> Any:
    """The view's features null on ``share`` of the rows (chosen at random): its join lost them."""
    import pyarrow as pa
    import pyarrow.compute as pc

    lost = pa.array(np.random.default_rng(seed).random(len(table)) < share)
    for i, name in enumerate(table.schema.names):
        if name.startswith(f"{view}__"):
            column = table.column(name)
            table = table.set_column(i, name, pc.if_else(lost, pa.nulls(len(table), column.type), column))
    return table


def rehashed_category(table: Any, column: str = REHASHED_FEATURE) -> Any:
    """Every value of a categorical column mapped to a new token (a changed hashing upstream)."""
    import hashlib

    import pyarrow as pa

    index = table.schema.get_field_index(column)
    values = table.column(column).to_pylist()
    mapped = [
        None if v is None else "h" + hashlib.blake2b(str(v).encode(), digest_size=4).hexdigest()
        for v in values
    ]
    return table.set_column(index, column, pa.array(mapped, type=table.schema.field(index).type))


def rate_x100(table: Any, column: str = RATE_FEATURE) -> Any:
    """A rate in percent instead of a fraction."""
    import pyarrow.compute as pc

    index = table.schema.get_field_index(column)
    return table.set_column(index, column, pc.multiply(table.column(column), 100.0))


def positives_twice(table: Any) -> Any:
    """Every positive row twice (a join that matched each save two times)."""
    import pyarrow as pa
    import pyarrow.compute as pc

    return pa.concat_tables([table, table.filter(pc.equal(table.column("saved"), 1))])


def redated(table: Any, days: int = 1) -> Any:
    """The same rows (the same requests) timed ``days`` later: a day's file loaded as another day."""
    import pyarrow as pa
    import pyarrow.compute as pc

    index = table.schema.get_field_index("event_timestamp")
    column = table.column("event_timestamp")
    shifted = pc.add(column, pa.scalar(dt.timedelta(days=days), pa.duration(column.type.unit)))
    return table.set_column(index, "event_timestamp", shifted.cast(column.type))


def leaky_manifest(manifest: WindowManifest) -> WindowManifest:
    """The window with its end taken as inclusive: the eval day's partition replaces the first
    training day (same length), the eval day and recorded end unchanged."""
    train = (*manifest.train[1:], manifest.eval)
    return manifest.model_copy(update={"train": train, "rows_train": sum(p.rows for p in train)})


class OptimizerJson(TypedDict):
    """An optimizer section of a run's model_config.json (its other settings pass through)."""

    name: str
    lr: float


def scaled_optimizers(model_config: Mapping[str, OptimizerJson]) -> dict[str, OptimizerJson]:
    """The model config's table and dense optimizers with their learning rates x LR_FACTOR."""
    return {
        key: {**model_config[key], "lr": float(model_config[key]["lr"]) * LR_FACTOR}
        for key in ("table_optimizer", "dense_optimizer")
    }
