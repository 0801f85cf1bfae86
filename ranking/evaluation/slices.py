"""Slices of an eval day: who a model serves better or worse (issue 31).

Built in: users first seen on the day (no 28-day impressions before it) vs returning; pins by their
28-day impressions, head (the most shown ``head_share`` of the day's distinct pins), torso (the next
``torso_share``) and tail (the rest, new pins included); and any categorical window column, by its
``top_values`` most frequent values plus ``other`` (label values stay bounded). A slice is a set of
the day's impressions: a user slice takes whole slates, a pin slice the pins in it, and its save
HIT@3 is the share of its saved pins the model ranks in the top 3 of their (whole) slate.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from features.schema import ENTITY_KEYS, SPARSE_FEATURES
from ranking.core.errors import RankerError

if TYPE_CHECKING:
    import pandas as pd

USER_ACTIVITY = "user_stats__impressions_28d"
PIN_POPULARITY = "pin_stats__impressions_28d"
KEYS = ("request_id", "pin_id")
OTHER = "other"
# the window's categorical columns a slice may cut by (the ids are too many values to slice by)
SLICE_COLUMNS: tuple[str, ...] = tuple(c for c in SPARSE_FEATURES if c not in ENTITY_KEYS)


@dataclass(frozen=True)
class SliceConfig:
    """The ``[slices]`` config section: which slices the gate, the reports and the metrics cut."""

    users: bool = True  # user:first_seen | user:returning
    pins: bool = True  # pin:head | pin:torso | pin:tail
    head_share: float = 0.1
    torso_share: float = 0.4
    columns: tuple[str, ...] = ("user_stats__country",)  # categorical window columns (SLICE_COLUMNS)
    top_values: int = 5  # a column's most frequent values as slices, the rest "other"

    def __post_init__(self) -> None:
        problems = []
        if not (
            0 < self.head_share < 1 and 0 < self.torso_share < 1 and self.head_share + self.torso_share < 1
        ):
            problems.append("head_share and torso_share must be in (0, 1) and add up to less than 1")
        if not 1 <= self.top_values <= 20:
            problems.append(f"top_values must be in 1..20, got {self.top_values}")
        unknown = [c for c in self.columns if c not in SLICE_COLUMNS]
        if unknown:
            problems.append(
                f"columns {unknown} are not categorical window columns ({', '.join(SLICE_COLUMNS)})"
            )
        if problems:
            raise RankerError("invalid slice configuration: " + "; ".join(problems))

    @property
    def columns_needed(self) -> tuple[str, ...]:
        return (
            *((USER_ACTIVITY,) if self.users else ()),
            *((PIN_POPULARITY,) if self.pins else ()),
            *self.columns,
        )


def slice_frame(examples: pd.DataFrame, config: SliceConfig) -> pd.DataFrame:
    """``request_id, pin_id`` and one boolean column per slice (named ``group:value``) for the
    eval day's examples; a column the examples lack is an error naming it."""
    missing = [c for c in (*KEYS, *config.columns_needed) if c not in examples.columns]
    if missing:
        raise RankerError(f"the slices need the eval day's columns {missing}")
    out = examples[list(KEYS)].copy()
    if config.users:
        activity = examples[USER_ACTIVITY].fillna(0).to_numpy(dtype=np.float64)
        out["user:first_seen"] = activity <= 0
        out["user:returning"] = activity > 0
    if config.pins:
        out = out.assign(**_pin_tiers(examples, config))
    for column in config.columns:
        values = examples[column].astype("string").fillna("(null)")
        top = values.value_counts(sort=True).index[: config.top_values].tolist()
        for value in sorted(top):
            out[f"{column}:{value}"] = (values == value).to_numpy(dtype=bool)
        rest = ~values.isin(top).to_numpy(dtype=bool)
        if rest.any():
            out[f"{column}:{OTHER}"] = rest
    return out


def _pin_tiers(examples: pd.DataFrame, config: SliceConfig) -> dict[str, np.ndarray]:
    """Head, torso and tail of the day's distinct pins by their 28-day impressions (ties by id)."""
    shown = examples[["pin_id", PIN_POPULARITY]].drop_duplicates("pin_id")
    popularity = shown[PIN_POPULARITY].fillna(0).to_numpy(dtype=np.float64)
    order = np.lexsort((shown["pin_id"].to_numpy(), -popularity))
    n = len(order)
    head_n = max(1, math.ceil(config.head_share * n)) if n else 0
    torso_n = math.ceil((config.head_share + config.torso_share) * n) - head_n
    tier = np.empty(n, dtype=object)
    tier[order[:head_n]] = "head"
    tier[order[head_n : head_n + torso_n]] = "torso"
    tier[order[head_n + torso_n :]] = "tail"
    by_pin = dict(zip(shown["pin_id"].to_numpy(), tier, strict=True))
    rows = examples["pin_id"].map(by_pin).to_numpy()
    return {f"pin:{t}": rows == t for t in ("head", "torso", "tail")}
