"""The pipeline config: one typed model with thirteen sections (``features``, ``window``,
``validation``, ``recipe``, ``pretrain``, ``gate``, ``heuristic``, ``slices``, ``metrics``,
``backtest``, ``review``, ``retention``, ``tracking``), validated by pydantic.

Defaults are not written twice: they are read from the dataclasses the steps already use
(``features.feast_repo.StoreSettings``, ``features.build_checks.WindowChecks``,
``features.validation.anomalies.ValidationConfig``, ``ranking.evaluation.heuristic.HeuristicConfig``,
``ranking.evaluation.slices.SliceConfig``, ``ranking.trainer.models.config.TrainConfig`` and
``OptimizerConfig``, ``ranking.registry.retention.RetentionPolicy``), so the config can never
disagree with a step run without one; the gate's keys are ``ranking.core.summaries.GateThresholds``,
the one model the gate, its flags and its verdict's record read too (tests/config/
test_defaults_written_once.py finds a default written anywhere else). Every model forbids unknown keys and non-finite
floats, and is strict about types (``epochs = "3"`` in a file is an error, not a silent
conversion).
"""

from __future__ import annotations

import dataclasses
import re
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, JsonValue, ValidationInfo, field_validator, model_validator

from features.build_checks import DEFAULT_DAYS, WindowChecks
from features.feast_repo import OFFLINE_STORES, ONLINE_STORES, StoreSettings, valid_redis_url
from features.validation.anomalies import KINDS as ANOMALY_KINDS
from features.validation.anomalies import WEEKLY_CHOICES, Policy, ValidationConfig
from ranking.config.tracking import check_model_name, check_uri
from ranking.core.limits import MAX_PATH_LEN, MAX_SEED, MAX_THREADS, MAX_THREADS_WHY
from ranking.core.summaries import GateThresholds
from ranking.evaluation.heuristic import HEURISTIC_POLICIES, HEURISTICS, HeuristicConfig
from ranking.evaluation.slices import SLICE_COLUMNS, SliceConfig
from ranking.gate.checks import GateConfig
from ranking.registry.retention import RetentionPolicy
from ranking.trainer.models.config import (
    DENSE_OPTIMIZERS,
    PIPELINES,
    REMEDIES,
    TABLE_OPTIMIZERS,
    OptimizerConfig,
    TrainConfig,
)
from ranking.trainer.schedule import DEFAULT_EPOCHS, NAMED_SCHEDULES

# warm-start sources other than a checkpoint path (base: the registry's base alias, ranker pretrain)
WARM_START_SOURCES = ("none", "champion", "base")
WARM_START_SCOPES = ("all", "dense")
# the default recipe, chosen by the issue-13 backtest (docs/study.md "Which daily recipe"): the
# delayed update for DEFAULT_EPOCHS = 2 epochs (F,J: tables frozen in epoch 1, joint in epoch 2)
# from the base
DEFAULT_WARM_START = "base"
_SCHEDULE_LIST = re.compile(r"^[FJ](,[FJ])*$")

_S = StoreSettings()
_W = WindowChecks()
_V = ValidationConfig()
_H = HeuristicConfig()
_SL = SliceConfig()
_T = TrainConfig(schedule=("joint",))
# OptimizerConfig needs a name and a learning rate: its defaults are read from its fields
_OPTIMIZER: dict[str, float] = {
    f.name: f.default for f in dataclasses.fields(OptimizerConfig) if isinstance(f.default, float)
}
_R = RetentionPolicy()


def _check_schedule(value: str) -> str:
    if value not in NAMED_SCHEDULES and not _SCHEDULE_LIST.match(value):
        raise ValueError(f"must be one of {', '.join(NAMED_SCHEDULES)} or a list such as F,J,J")
    return value


class _Section(BaseModel):
    # every string (a path, a name, a list's item, a table's key) fits a path: a 100 kB value is
    # refused before a step reads it, not echoed or written
    model_config = ConfigDict(
        extra="forbid",
        strict=True,
        allow_inf_nan=False,
        frozen=True,
        validate_default=True,
        str_max_length=MAX_PATH_LEN,
        # a field's docstring is its comment in the docs' generated config block (make schema)
        use_attribute_docstrings=True,
    )


class FeaturesSection(_Section):
    """the Feast store: ranker features apply | materialize | window (docs/data.md)

    One apply renders it, every later step that builds a window must name the same store."""

    # duckdb (default) | spark (Feast's Spark offline store, a local session: docs/data.md)
    offline_store: Literal[OFFLINE_STORES] = _S.offline_store  # type: ignore[valid-type]
    """duckdb | spark (Feast's Spark offline store); unset: $RANKER_OFFLINE_STORE"""
    # sqlite (<home>/feast/online_store.db) | redis (at redis_url)
    online_store: Literal[ONLINE_STORES] = _S.online_store  # type: ignore[valid-type]
    """sqlite | redis; unset: $RANKER_ONLINE_STORE"""
    redis_url: str = _S.redis_url  # host:port[,option=value...] (a leading redis:// is dropped)
    """host:port[,option=value...] (online_store = redis); unset: $RANKER_REDIS_URL"""

    @field_validator("redis_url")
    @classmethod
    def _redis_url(cls, value: str) -> str:
        if not valid_redis_url(value):
            raise ValueError("must be host:port[,option=value...]")
        return value.removeprefix("redis://")

    def store_settings(self) -> StoreSettings:
        return StoreSettings(
            offline_store=self.offline_store, online_store=self.online_store, redis_url=self.redis_url
        )


# [window] keys that became [validation]'s (issue 30: the data checks are one step now)
_MOVED_TO_VALIDATION = ("min_label_rate", "max_label_rate", "max_null_rate")


class WindowSection(_Section):
    """ranker features window | freshness, and every step that builds one

    What is checked in its data is the ``[validation]`` section's."""

    days: int = Field(default=DEFAULT_DAYS, ge=1, le=365)
    """training days, the ones before the eval day"""
    min_coverage: float = Field(default=_W.min_coverage, ge=0, le=1)
    """share of training days that must have impressions"""
    # None: report the lag only (`ranker features freshness` fails above it when set)
    max_source_lag_hours: float | None = Field(default=None, ge=0)
    """freshness fails above it (unset: report only)"""

    @model_validator(mode="before")
    @classmethod
    def _moved(cls, data: Any) -> Any:
        if isinstance(data, dict):
            moved = [k for k in _MOVED_TO_VALIDATION if k in data]
            if moved:
                raise ValueError(
                    f"{', '.join(moved)} moved to the [validation] section (the data validation step,"
                    " docs/data.md); its absolute caps are off by default"
                )
        return data

    def checks(self) -> WindowChecks:
        return WindowChecks(min_coverage=self.min_coverage)


class ValidationSection(_Section):
    """ranker features validate: the data before training (docs/data.md "Data validation")

    The thresholds of each anomaly kind and whether it fails the run or warns."""

    history_days: int = Field(default=_V.history_days, ge=1, le=365)
    """days of history each day is judged against"""
    min_history_days: int = Field(default=_V.min_history_days, ge=0, le=365)
    """fewer: the history-based kinds only warn"""
    weekly: Literal[WEEKLY_CHOICES] = _V.weekly  # type: ignore[valid-type]
    """auto | on | off: compare a day with the same weekday"""
    weekly_history_weeks: int = Field(default=_V.weekly_history_weeks, ge=1, le=52)
    rate_max_z: float = Field(default=_V.rate_max_z, gt=0, le=1000)
    """a null/zero/label-rate jump: |change| >= max(min_change, z * noise)"""
    null_rate_min_change: float = Field(default=_V.null_rate_min_change, ge=0, le=1)
    zero_rate_min_change: float = Field(default=_V.zero_rate_min_change, ge=0, le=1)
    label_rate_min_change: float = Field(default=_V.label_rate_min_change, ge=0, le=1)
    row_count_max_change: float = Field(default=_V.row_count_max_change, gt=0, le=1)
    """rows vs the history's median"""
    drift_max_js: float = Field(default=_V.drift_max_js, ge=0, le=1)
    """Jensen-Shannon bits above the sampling noise (numeric)"""
    drift_max_linf: float = Field(default=_V.drift_max_linf, ge=0, le=1)
    """L-infinity above the sampling noise (categorical)"""
    skew_max_js: float = Field(default=_V.skew_max_js, ge=0, le=1)
    """the eval day vs the training window"""
    skew_max_linf: float = Field(default=_V.skew_max_linf, ge=0, le=1)
    max_unknown_share: float = Field(default=_V.max_unknown_share, ge=0, le=1)
    """values outside a bounded vocabulary"""
    max_inconsistent_share: float = Field(default=_V.max_inconsistent_share, ge=0, le=1)
    """rows of entities whose rows of a day disagree on a feature"""
    day_repeated_min_jaccard: float = Field(default=_V.day_repeated_min_jaccard, gt=0, le=1)
    """two days sharing this share of their requests: one day twice"""
    max_null_rate: float = Field(default=_V.max_null_rate, ge=0, le=1)
    """absolute caps, off by default (history judges)"""
    min_label_rate: float = Field(default=_V.min_label_rate, ge=0, le=1)
    max_label_rate: float = Field(default=_V.max_label_rate, ge=0, le=1)
    # anomaly kind -> fail | warn; kinds a config leaves out keep their default
    policy: dict[str, Policy] = Field(default_factory=lambda: dict(_V.policy))
    """anomaly kind -> fail | warn; a kind a config leaves out keeps its default"""

    @field_validator("policy", mode="before")
    @classmethod
    def _policy(cls, value: Any) -> Any:
        if isinstance(value, dict):
            unknown = sorted(k for k in value if k not in ANOMALY_KINDS)
            if unknown:
                raise ValueError(f"unknown anomaly kind(s) {unknown}; kinds: {', '.join(ANOMALY_KINDS)}")
            return {**_V.policy, **value}
        return value

    @field_validator("max_label_rate")
    @classmethod
    def _label_bounds(cls, value: float, info: ValidationInfo) -> float:
        low = info.data.get("min_label_rate")
        if low is not None and value < low:
            raise ValueError(f"must be >= min_label_rate ({low})")
        return value

    def validation_config(self) -> ValidationConfig:
        return ValidationConfig(**self.model_dump())


class OptimizerSection(_Section):
    name: str
    lr: float = Field(gt=0)
    eps: float = Field(default=_OPTIMIZER["eps"], gt=0)
    weight_decay: float = Field(default=_OPTIMIZER["weight_decay"], ge=0)


class TableOptimizerSection(OptimizerSection):
    name: Literal[TABLE_OPTIMIZERS]  # type: ignore[valid-type]


class DenseOptimizerSection(OptimizerSection):
    name: Literal[DENSE_OPTIMIZERS]  # type: ignore[valid-type]


class RecipeSection(_Section):
    """ranker train (and run, backtest, the DAG through them): how the daily model is trained"""

    schedule: str = _T.schedule_spec
    """a named schedule (delayed, joint, frozen, ...: ranking/trainer/schedule.py) or a list such as F,J,J"""
    # None: DEFAULT_EPOCHS for a named schedule, the list's length for an explicit one
    epochs: int | None = Field(default=DEFAULT_EPOCHS, ge=1, le=20)
    """for a named schedule; a list (F,J,J) carries its own count"""
    # none | champion | base | a checkpoint path (file or run folder)
    warm_start: str = DEFAULT_WARM_START
    """none | champion | base | a checkpoint path"""
    warm_start_scope: Literal[WARM_START_SCOPES] = "all"  # type: ignore[valid-type]
    """all | dense (dense layers only, fresh tables)"""
    # carry the warm start's table-optimizer state (row-wise Adagrad sums) instead of starting empty
    warm_start_optimizer: bool = False
    """carry the warm start's row-wise Adagrad sums"""
    # incremental: continue the champion on only the days after its window (each impression
    # passes through the tables once), with a full retrain from full_retrain_warm_start every
    # full_retrain_every_days days (None: never); ranking/trainer/lineage.py
    incremental: bool = False
    """continue the champion on only the days after its window"""
    full_retrain_every_days: int | None = Field(default=None, ge=1, le=365)
    """incremental: a full retrain every N days (unset: never)"""
    full_retrain_warm_start: str = "base"
    """incremental: what the full retrain starts from"""
    pipeline: Literal[PIPELINES] = _T.pipeline  # type: ignore[valid-type]
    """auto | semisync | sync (auto: semisync on CPU, sync on CUDA)"""
    # meda: the tables restart from the seed's init every epoch (docs/training.md "MEDA")
    remedy: Literal[REMEDIES] = _T.remedy  # type: ignore[valid-type]
    """none | meda (tables back to their init every epoch)"""
    # allocated whole on every rank (its features, the tables' lookups, their gradients)
    batch_size: int = Field(default=_T.batch_size, ge=1, le=2**20)
    seed: int = Field(default=_T.seed, ge=0, le=MAX_SEED)
    # a ModelConfig file (JSON or YAML); None: the warm start's architecture, else the default model
    model_file: str | None = None
    """a ModelConfig (JSON/YAML); unset: the warm start's, else the default"""
    # the default model's dense features are features.schema.DENSE_FEATURES, plus HISTORY_FEATURES
    # when true (docs/data.md "History features"); architecture, so the base inherits it and a warm
    # start trained otherwise is refused; a model_file names its own and must agree with it
    history_features: bool = False
    """the model also reads the user x pin and user x category history (12 more dense features)"""
    # None: the model config's optimizer; a table replaces it (the warm start's included)
    table_optimizer: TableOptimizerSection | None = None
    """replaces the model config's, e.g. name = "rowwise_adagrad", lr = 0.05"""
    dense_optimizer: DenseOptimizerSection | None = None
    """e.g. name = "adam", lr = 0.001"""

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return _check_schedule(value)

    @model_validator(mode="before")
    @classmethod
    def _list_carries_its_epochs(cls, data: Any) -> Any:
        # an explicit list (F,J,J) without epochs has its own count, not the default's
        if isinstance(data, dict) and "epochs" not in data:
            schedule = data.get("schedule")
            if (
                isinstance(schedule, str)
                and schedule not in NAMED_SCHEDULES
                and _SCHEDULE_LIST.match(schedule)
            ):
                return {**data, "epochs": len(schedule.split(","))}
        return data

    @field_validator("warm_start")
    @classmethod
    def _warm_start(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"must be {' | '.join(WARM_START_SOURCES)} or a checkpoint path")
        return value

    @field_validator("full_retrain_warm_start")
    @classmethod
    def _full_warm_start(cls, value: str) -> str:
        if not value.strip():
            raise ValueError(f"must be {' | '.join(WARM_START_SOURCES)} or a checkpoint path")
        return value

    @field_validator("warm_start_optimizer")
    @classmethod
    def _optimizer_needs_tables(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("warm_start_scope") == "dense":
            raise ValueError("needs warm_start_scope = all (a dense-only warm start starts fresh tables)")
        return value

    @field_validator("incremental")
    @classmethod
    def _incremental_from_champion(cls, value: bool, info: ValidationInfo) -> bool:
        if value and info.data.get("warm_start") != "champion":
            raise ValueError("needs warm_start = champion (an incremental run continues the champion)")
        return value

    @field_validator("epochs")
    @classmethod
    def _epochs_match_list(cls, value: int | None, info: ValidationInfo) -> int | None:
        schedule = info.data.get("schedule")
        if value is not None and schedule and schedule not in NAMED_SCHEDULES:
            n = len(schedule.split(","))
            if n != value:
                raise ValueError(f"must equal the length of schedule {schedule} ({n})")
        return value

    @property
    def epoch_count(self) -> int:
        if self.schedule in NAMED_SCHEDULES:
            return self.epochs or DEFAULT_EPOCHS
        return len(self.schedule.split(","))


class PretrainSection(_Section):
    """ranker pretrain (the base model; the weekly ranker_pretrain DAG)

    Trained on the range just before the daily window (disjoint from it), from scratch, and made
    the ``base``."""

    # None: window.days; the base's range ends gap_days before the daily window starts
    days: int | None = Field(default=None, ge=1, le=365)
    """unset: the window's days (the range just before the daily window)"""
    gap_days: int = Field(default=0, ge=0, le=365)
    """days between the base's range and the daily window"""
    schedule: str = "joint"
    # None: 1 for a named schedule, the list's length for an explicit one
    epochs: int | None = Field(default=None, ge=1, le=20)
    """unset: 1 for a named schedule"""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    # a new base every this many days (the ranker_pretrain DAG's cadence; the backtest's too)
    every_days: int = Field(default=7, ge=1, le=365)
    """a new base this often (the DAG's cadence, the backtest's too)"""

    @field_validator("schedule")
    @classmethod
    def _schedule(cls, value: str) -> str:
        return _check_schedule(value)

    @property
    def epoch_count(self) -> int:
        if self.schedule in NAMED_SCHEDULES:
            return self.epochs or 1
        return len(self.schedule.split(","))


class GateSection(GateThresholds, _Section):
    """ranker gate: every threshold (docs/registry.md has the rationale)

    Its keys, defaults and limits are ``ranking.core.summaries.GateThresholds``'s, written once
    there."""

    def gate_config(self) -> GateConfig:
        return GateConfig(**self.model_dump())


class HeuristicSection(_Section):
    """the non-learned ranker scored beside every model (docs/registry.md "beats_heuristic")

    ``ranking.evaluation.heuristic``, and the gate's ``beats_heuristic`` check."""

    # pin_save_rate: the pin's smoothed 28-day save rate
    name: Literal[HEURISTICS] = _H.name  # type: ignore[valid-type]
    """the pin's smoothed 28-day save rate: (saves_28d + k p) / (impressions_28d + k)"""
    smoothing: float = Field(default=_H.smoothing, gt=0, le=1_000_000)
    """k, pseudo-impressions at the day's prior save rate p"""
    margin: float = Field(default=_H.margin, ge=-1, le=10)
    """the candidate's lift over it must exceed this (its CI's lower bound, rule ci)"""
    # warn: a model no better than the heuristic is promoted with a warning; fail: rejected
    policy: Literal[HEURISTIC_POLICIES] = _H.policy  # type: ignore[valid-type]
    """warn: a warning when it does not | fail: a rejection"""

    def heuristic_config(self) -> HeuristicConfig:
        return HeuristicConfig(**self.model_dump())


class SlicesSection(_Section):
    """the eval day's slices: the gate's guard, the reports, the metrics

    ``ranking.evaluation.slices``: the gate's, the reports' and the metrics' per-slice save HIT@3
    and the gate's slice guard."""

    users: bool = _SL.users  # user:first_seen | user:returning
    """user:first_seen (no 28-day impressions) | user:returning"""
    pins: bool = _SL.pins  # pin:head | pin:torso | pin:tail by 28-day impressions
    """pin:head | pin:torso | pin:tail by the day's pins' 28-day impressions"""
    head_share: float = Field(default=_SL.head_share, gt=0, lt=1)
    """the most shown share of the day's distinct pins"""
    torso_share: float = Field(default=_SL.torso_share, gt=0, lt=1)
    """the next share; the rest (new pins included) is the tail"""
    # categorical window columns, each cut by its top_values most frequent values plus "other"
    columns: list[str] = Field(default_factory=lambda: list(_SL.columns), max_length=len(SLICE_COLUMNS))
    """categorical window columns (also pin_stats__category)"""
    top_values: int = Field(default=_SL.top_values, ge=1, le=20)
    """a column's N most frequent values of the day, the rest: other"""

    @field_validator("columns")
    @classmethod
    def _columns(cls, value: list[str]) -> list[str]:
        unknown = [c for c in value if c not in SLICE_COLUMNS]
        if unknown:
            raise ValueError(f"{unknown} are not categorical window columns ({', '.join(SLICE_COLUMNS)})")
        if len(set(value)) != len(value):
            raise ValueError("names must be unique")
        return value

    @model_validator(mode="after")
    def _shares(self) -> SlicesSection:
        if self.head_share + self.torso_share >= 1:
            raise ValueError("head_share + torso_share must be < 1 (the rest is the tail)")
        return self

    def slice_config(self) -> SliceConfig:
        return SliceConfig(**{**self.model_dump(), "columns": tuple(self.columns)})


class MetricsSection(_Section):
    """ranker metrics publish: where it sends the metrics"""

    # None: not configured ($RANKER_PUSHGATEWAY_URL is read as the environment layer); "" = none
    pushgateway: str | None = None
    """URL; "" = none; unset: $RANKER_PUSHGATEWAY_URL"""
    # None: <home>/metrics/ranker.prom
    textfile: str | None = None
    """unset: <home>/metrics/ranker.prom"""
    # None: the exporter's default job (ranker_retrain)
    job: str | None = None
    """unset: ranker_retrain"""

    @field_validator("textfile")
    @classmethod
    def _textfile(cls, value: str | None) -> str | None:
        if value is not None and (not value.endswith(".prom") or any(ord(c) < 32 for c in value)):
            raise ValueError("must be a path ending in .prom")
        return value


class BacktestSection(_Section):
    """the bootstrap CIs of ranker backtest and ranker review (docs/backtest.md "The CI")

    The bootstrap of ``ranker backtest``'s comparisons (each recipe vs the baseline, its slices,
    the heuristic) and of the weekly review's (``ranking.backtest.stats``): its
    ``--bootstrap-samples``, ``--ci-level`` and ``--seed`` default to these."""

    # resamples of the paired two-stage (day, request) bootstrap
    bootstrap_samples: int = Field(default=1000, ge=10, le=100_000)
    """resamples; --bootstrap-samples"""
    # two-sided level of the CIs the reports show
    ci_level: float = Field(default=0.95, gt=0.5, lt=1)
    """two-sided level of the CIs the reports show; --ci-level"""
    seed: int = Field(default=0, ge=0, le=MAX_SEED)
    """the bootstrap's seed; --seed"""


# a recipe name reaches paths (recipes/<name>.toml, the review's folders): the run-id alphabet
RECIPE_NAME = re.compile(r"\A[A-Za-z0-9][A-Za-z0-9_.+-]{0,63}\Z", re.ASCII)
REVIEW_CHOICES = ("fixed", "auto")


class ReviewSection(_Section):
    """ranker review (the weekly ranker_recipe_review DAG; docs/backtest.md "Recipe review")

    The recipes it compares and whether the daily run follows it."""

    # eval days replayed (the last ones with data)
    days: int = Field(default=14, ge=1, le=365)
    """eval days replayed (the last ones with data)"""
    # the fewest paired days a review needs to recommend (and, with recipe = "auto", switch) a
    # recipe; a review with fewer, days < min_days included, reports and keeps the recipe
    # (too_few_days): a run's days cannot be refused for the workspace's min_days, which its Param
    # schema cannot know (issue 32)
    min_days: int = Field(default=7, ge=1, le=365)
    """fewer with a served pair keep the recipe"""
    # recipe names: files <recipes_dir>/<name>.toml (default: the shipped recipes/)
    recipes: list[str] = Field(default_factory=lambda: ["naive", "default", "base-j"], min_length=1)
    """recipe names: files <recipes_dir>/<name>.toml"""
    baseline: str = "naive"
    """the recipe the others are compared with"""
    recipes_dir: str | None = None
    """unset: the shipped recipes/"""
    # lift (a fraction) the best recipe gives up per extra multiple of the cheapest's training time
    cost_weight: float = Field(default=0.0, ge=0)
    """lift given up per extra multiple of the cheapest's training time"""
    # no served gain resolves: a recipe's candidates count if the gate promoted at least this share
    # of them over the days replayed (docs/backtest.md "Recipe review")
    min_promotion_rate: float = Field(default=0.5, ge=0, le=1)
    """no served gain resolves: candidates count where the gate promoted this share"""
    # fixed: the daily run trains the [recipe] section as written; auto: the recipe the last
    # review recommended, layered over it (<home>/reviews/recipe.json)
    recipe: Literal[REVIEW_CHOICES] = "fixed"  # type: ignore[valid-type]
    """fixed | auto (the daily run follows the last review)"""
    # compare the recipes' fresh candidates only: no gate replay, no served models
    candidate_only: bool = False
    """compare the recipes' fresh candidates only: no gate replay, no served models"""
    # recipes replayed at a time (None: as many as the machine's cores, at most the recipes)
    parallel: int | None = Field(default=None, ge=1, le=MAX_THREADS)
    """unset: the machine's cores, at most the recipes"""
    # the review's resamples (None: [backtest] bootstrap_samples); its CI level and seed are
    # [backtest]'s
    bootstrap_samples: int | None = Field(default=None, ge=10, le=100_000)
    """the review's resamples; unset: [backtest]'s (its CI level and seed are [backtest]'s)"""

    @field_validator("parallel", mode="before")
    @classmethod
    def _parallel_within_cores(cls, value: Any) -> Any:
        # before the le= bound, so the error says where the bound comes from
        if isinstance(value, int) and not isinstance(value, bool) and value > MAX_THREADS:
            raise ValueError(f"must be <= {MAX_THREADS} ({MAX_THREADS_WHY})")
        return value

    @field_validator("recipes")
    @classmethod
    def _recipe_names(cls, value: list[str]) -> list[str]:
        for name in value:
            if not RECIPE_NAME.match(name):
                raise ValueError(f"{name!r} is not a recipe name (letters, digits, _.+-)")
        if len(set(value)) != len(value):
            raise ValueError("names must be unique")
        return value

    @model_validator(mode="after")
    def _baseline_in_recipes(self) -> ReviewSection:
        if self.baseline not in self.recipes:
            raise ValueError(
                f"baseline {self.baseline!r} must be one of the recipes ({', '.join(self.recipes)})"
            )
        return self


class RetentionSection(_Section):
    """what ranker gc and the start of every ranker run prune (docs/registry.md "Retention")

    ``ranker gc`` (the daily DAG's ``collect_garbage`` task, the start of every ``ranker run``)
    prunes by age and keeps by role (``ranking.registry.retention``); unset ages: kept forever."""

    # a registered run's epoch checkpoints (only --resume reads them, for a run not registered yet)
    checkpoint_days: float | None = Field(default=_R.checkpoint_days, ge=0, le=3650, allow_inf_nan=False)
    """a registered run's epoch checkpoints (only --resume reads them, for a run not registered yet)"""
    # a whole run folder whose model the registry holds (and an unregistered run's checkpoints)
    run_days: float | None = Field(default=_R.run_days, ge=0, le=3650, allow_inf_nan=False)
    """a whole run folder whose model the registry holds (an unregistered run's checkpoints too)"""
    # a backtest's or review's replay folder, all but its reports (a re-run replays what it lacks)
    backtest_days: float | None = Field(default=_R.backtest_days, ge=0, le=3650, allow_inf_nan=False)
    """a backtest's or review's replay folder, all but its reports (a re-run replays what it lacks)"""
    # run folders kept whatever their age: the newest keep_runs versions', and the champion's and
    # the base's with the versions keep_rollbacks rollbacks in a row would reach (and their warm starts)
    keep_runs: int = Field(default=_R.keep_runs, ge=0, le=1000)
    """run folders of the newest N versions kept whatever their age"""
    keep_rollbacks: int = Field(default=_R.keep_rollbacks, ge=0, le=100)
    """... and of the champion, the base, N rollbacks back from each, and what they started from"""
    # window partitions of days older than what the daily window, its base and the weekly review
    # read, by this many more days (counted back from the newest source day; a window rebuilds them)
    window_extra_days: int | None = Field(default=30, ge=0, le=3650)
    """window days older than the window, its base and the review read, by this many more"""


class TrackingSection(_Section):
    """MLflow: runs, backtests, reviews and the champion's alias (docs/tracking.md)

    Runs, backtests and reviews as MLflow runs, the champion as a registered model's alias. A down MLflow never fails a step: what it could not send waits in ``<home>/mlflow/queue``
    for ``ranker tracking replay``."""

    enabled: bool = True
    """send runs and model versions to MLflow"""
    # None: a SQLite store in the workspace (<home>/mlflow/mlflow.db, artifacts beside it)
    uri: str | None = None
    """sqlite:///PATH | file:PATH | http(s)://HOST[:PORT]; unset: $RANKER_MLFLOW_TRACKING_URI, else <home>/mlflow/mlflow.db"""
    ui_url: str | None = None
    """the MLflow UI the links point to; unset: the uri when it is http(s)"""
    model_name: str = "ranker"
    """the registered model mirroring the registry (its alias champion)"""
    # MLflow's own HTTP client retries for minutes: a down server must not hold a run that long
    timeout_seconds: float = Field(default=5.0, gt=0, le=300)
    """one MLflow call's limit (no retries); then the record is queued"""

    @field_validator("uri")
    @classmethod
    def _uri(cls, value: str | None) -> str | None:
        return None if value is None else check_uri(value)

    @field_validator("ui_url")
    @classmethod
    def _ui_url(cls, value: str | None) -> str | None:
        if value is not None and not value.startswith(("http://", "https://")):
            raise ValueError("must be an http(s):// URL")
        return None if value is None else check_uri(value)

    @field_validator("model_name")
    @classmethod
    def _model_name(cls, value: str) -> str:
        return check_model_name(value)


class PipelineConfig(_Section):
    features: FeaturesSection = Field(default_factory=FeaturesSection)
    window: WindowSection = Field(default_factory=WindowSection)
    validation: ValidationSection = Field(default_factory=ValidationSection)
    recipe: RecipeSection = Field(default_factory=RecipeSection)
    pretrain: PretrainSection = Field(default_factory=PretrainSection)
    gate: GateSection = Field(default_factory=GateSection)
    heuristic: HeuristicSection = Field(default_factory=HeuristicSection)
    slices: SlicesSection = Field(default_factory=SlicesSection)
    metrics: MetricsSection = Field(default_factory=MetricsSection)
    backtest: BacktestSection = Field(default_factory=BacktestSection)
    review: ReviewSection = Field(default_factory=ReviewSection)
    retention: RetentionSection = Field(default_factory=RetentionSection)
    tracking: TrackingSection = Field(default_factory=TrackingSection)


SECTIONS: dict[str, type[_Section]] = {
    "features": FeaturesSection,
    "window": WindowSection,
    "validation": ValidationSection,
    "recipe": RecipeSection,
    "pretrain": PretrainSection,
    "gate": GateSection,
    "heuristic": HeuristicSection,
    "slices": SlicesSection,
    "metrics": MetricsSection,
    "backtest": BacktestSection,
    "review": ReviewSection,
    "retention": RetentionSection,
    "tracking": TrackingSection,
}
# keys whose values are filesystem paths: relative ones are relative to the file that sets them
PATH_KEYS = (
    "recipe.model_file",
    "recipe.warm_start",
    "recipe.full_retrain_warm_start",
    "metrics.textfile",
    "review.recipes_dir",
)


def leaf_keys() -> list[str]:
    """Every settable dotted key (``recipe.table_optimizer`` is one key: a table or nothing)."""
    return [f"{name}.{field}" for name, section in SECTIONS.items() for field in section.model_fields]


def flatten(config: PipelineConfig) -> dict[str, JsonValue]:
    """``{"window.days": 20, ..., "recipe.table_optimizer": {...} | None}``: the config as JSON, by key."""
    dumped = config.model_dump(mode="json")
    return {key: dumped[key.split(".")[0]][key.split(".")[1]] for key in leaf_keys()}
