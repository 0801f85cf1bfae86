"""The review's summary: what ``run_review`` returns, ``reviews/<end>/review.json`` and
``reviews/latest.json`` hold, the report renders and the review's series are read from (apart
from the run, so that the report and the metrics read it without importing the run)."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict, Field, JsonValue

# each slice's comparison with the baseline, as the backtest report writes it (its slice_table reads it)
SliceRows = list[dict[str, JsonValue]]


class _Part(BaseModel):
    model_config = ConfigDict(extra="forbid", serialize_by_alias=True, validate_by_name=True)


class Lift(_Part):
    """Save HIT@3 lift over a reference, its CI and paired days, the minimum detectable effect at
    that many days and the days a 1% lift would take (the baseline's own: 0, [0, 0], its days)."""

    lift: float
    ci: list[float]
    days: int
    mde: float | None = None
    days_for_1pct: int | None = None


class RecipeWeight(_Part):
    """A recipe weighed: its lifts over the baseline and the heuristic, its cost, failed days and
    the gate's promotion rate."""

    seconds_per_day: float
    failed_days: list[str]
    promotion_rate: float | None
    served: Lift | None = None
    candidate: Lift | None = None
    vs_heuristic: dict[str, Lift | None] = Field(default_factory=dict)
    slices: dict[str, SliceRows] = Field(default_factory=dict)


class DelayedUpdateLift(_Part):
    """The delayed update's own share: recipe ``with`` (a frozen first epoch) over ``without``."""

    with_frozen: str = Field(alias="with")
    without: str
    served: Lift | None
    candidate: Lift | None


class SwitchOutcome(_Part):
    switched: bool
    recipe: str | None
    reason: str


class ReviewDelivery(_Part):
    """Where ``ranker review`` sent the review's series."""

    delivery: str
    target: str
    samples: int


class Review(_Part):
    """A review's summary: ``reviews/<end>/review.json``, ``reviews/latest.json`` (with ``report``)
    and ``ranker review``'s summary (with ``metrics``). A field is written once it is set: a failed
    review has no ``days_compared`` or ``best``."""

    review_id: str
    start: str
    end: str
    days: int
    min_days: int
    baseline: str
    candidate_only: bool
    cost_weight: float
    min_promotion_rate: float
    mode: str
    rule: str
    backtest_dir: str
    running: str | None
    recipes: dict[str, RecipeWeight] = Field(default_factory=dict)
    delayed_update: list[DelayedUpdateLift] = Field(default_factory=list)
    recommended: str | None = None
    basis: str | None = None  # the lifts the recommendation was decided on: served | candidate
    reason: str | None = None
    error: str | None = None
    days_compared: int | None = None
    status: str = ""
    best: str | None = None
    switch: SwitchOutcome | None = None
    wall_seconds: float = 0.0
    base_pretrains: int = 0
    report: dict[str, str] = Field(default_factory=dict)
    """json | markdown | png: the dated report's files (latest.json and the command's summary)"""
    metrics: ReviewDelivery | None = None

    def body(self) -> dict[str, JsonValue]:  # the JSON edge: what is written and printed
        return self.model_dump(mode="json", exclude_unset=True)
