"""The step summaries as types (issue 22): what each ``ranker`` step records in
``<home>/pipeline/<run id>/<step>.json`` and prints with ``--json``.

Producers build the step's model and hand on :meth:`Summary.body` (a JSON-ready dict of the fields
they set), so a field that does not fit fails where it is made; every model forbids undeclared
fields. Readers (``ranking.monitoring``) parse a recorded summary with :func:`parse_summary`,
which ignores fields it does not know (a newer producer) unless asked to be strict (tests).

The fields every summary has (``step``, ``exit_code``, ``run_id``; ``error`` when the step failed)
are :class:`StepSummary`'s; the recorder (``ranking.core.results.record_summary``) fills them in.
A step that failed before it had a summary of its own records a :class:`StepError`.

``make schema`` (``infra/summaries_doc.py``) writes the JSON Schema of every summary
(``docs/schemas/step-summaries.schema.json``; the Airflow side, which cannot import ``ranking``,
validates against it) and the "Step summaries" section of ``docs/architecture.md`` from these
models; tests/core/test_summaries.py fails when either differs.

Only pydantic and the standard library: ``ranking.core`` is the lowest layer.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping
from typing import Annotated, Any, Literal

from pydantic import (
    AwareDatetime,
    BaseModel,
    ConfigDict,
    Field,
    JsonValue,
    NonNegativeFloat,
    NonNegativeInt,
    ValidationError,
)

from ranking.core.limits import MAX_SEED

Phase = Literal["frozen", "joint"]
Decision = Literal["pass", "reject"]
Branch = Literal["promote", "record_rejection", "keep_champion"]
Interval = tuple[float, float]  # a [lower, upper] confidence interval
GateRule = Literal["ci", "point"]  # non-inferiority on the paired bootstrap CIs | on the point estimates
Seconds = NonNegativeFloat


class Summary(BaseModel):
    """Every summary model and its parts: undeclared fields are refused; NaN and infinities
    are written as JSON's NaN/Infinity (what ``json.dumps`` writes), never turned into null."""

    model_config = ConfigDict(
        extra="forbid",
        ser_json_inf_nan="constants",
        use_attribute_docstrings=True,
    )

    def body(self) -> dict[str, JsonValue]:
        """The fields the producer set, JSON-ready: what a step hands to the recorder (the edge
        where a summary becomes JSON)."""
        return self.model_dump(mode="json", exclude_unset=True)


class StepSummary(Summary):
    """The fields every step summary has."""

    step: str
    """the step (``ranker`` subcommand) that wrote the summary"""
    exit_code: int = 0
    """0 ok, 1 a negative decision (gate rejected, run rejected), 2 a user-fixable error, 70 a crash"""
    run_id: str | None = None
    """the pipeline run id (``--run-id``); absent without one"""
    error: str | None = None
    """what went wrong (exit code 2); absent when the step succeeded"""
    error_type: str | None = None
    """the error's class (``RankerError`` subclasses); only in the ``--json`` line of a failed command"""


class StepError(StepSummary):
    """A step that failed before it had a summary of its own: ``{step, exit_code, error}``."""

    error: str
    """what went wrong, in one line"""


# --------------------------------------------------------------------------------------------
# data
# --------------------------------------------------------------------------------------------


class WindowSummary(StepSummary):
    """``ranker features window``: the window built (or reused), from its manifest."""

    step: Literal["window"] = "window"
    window_id: str
    """sha256 of the window's end, length and partition keys"""
    end: dt.date
    """the eval day; training days are [end - days, end)"""
    days: int = Field(gt=0)
    """training days asked for"""
    rows_train: NonNegativeInt
    rows_eval: NonNegativeInt
    label_rate: float = Field(ge=0, le=1)
    """save rate of the training rows"""
    days_built: NonNegativeInt
    """partitions built by this step (training days and the eval day)"""
    days_reused: NonNegativeInt
    """partitions reused from earlier windows"""
    days_repaired: dict[dt.date, str]
    """rebuilt partitions: date -> why they no longer matched their record"""
    missing_days: list[dt.date]
    """training days without source data (allowed by the coverage check)"""
    feature_version: str
    """hash of the Feast repository's definitions"""
    duration_seconds: Seconds
    manifest: str
    """path of the window manifest"""


class Anomaly(Summary):
    """One finding of the data validation (``features.validation.anomalies``): what, where, how far
    past which threshold, against what, and what it does to the run."""

    kind: str
    """one of the kinds in docs/data.md "Anomalies" (``features.validation.anomalies.KINDS``)"""
    feature: str | None
    day: dt.date | None
    statistic: str
    value: float | None
    threshold: float | None
    compared: str
    """the schema, the days of history or the training window it was judged against"""
    detail: str
    history_days: int | None = None
    """the days of history a history-based kind had (fewer than ``min_history_days``: warn only)"""
    policy: Literal["fail", "warn", "accepted"] = "fail"
    accepted: str | None = None
    """the operator's reason, when accepted (``ranker features accept``)"""

    @property
    def key(self) -> str:
        """What an acceptance names: ``kind[:feature]@day``."""
        where = f":{self.feature}" if self.feature else ""
        return f"{self.kind}{where}@{self.day.isoformat() if self.day else '-'}"


class ValidationSummary(StepSummary):
    """``ranker features validate``: the window's data against its kept schema and its history."""

    step: Literal["validate"] = "validate"
    window_id: str
    end: dt.date
    days: int = Field(gt=0)
    verdict: Literal["pass", "warn", "fail"]
    """fail: an anomaly whose policy is fail (the run stops before training); warn: only warnings"""
    anomalies: list[Anomaly]
    counts: dict[Literal["fail", "warn", "accepted"], NonNegativeInt]
    leak_checked: bool
    """the data-level leak checks ran on every training day (event times, snapshot dates)"""
    leak_clean: bool
    """they found no leak (the gate then judges a large lift as a warning, not a rejection)"""
    schema_path: str
    schema_inferred: bool
    """the schema was inferred by this run (the first of these features)"""
    weekly: bool
    """the days were compared with the same weekday of the weeks before"""
    drift: dict[str, float]
    """the newest training day's drift score per feature against its history (distance above noise)"""
    skew: dict[str, float]
    """the eval day's skew score per feature against the training window (distance above noise)"""
    statistics_computed: NonNegativeInt
    """partitions whose statistics were computed now (built before statistics existed, or changed)"""
    report: str
    duration_seconds: Seconds


class FreshnessSummary(StepSummary):
    """``ranker features freshness``: the newest source day and its lag."""

    step: Literal["freshness"] = "freshness"
    latest_source_date: dt.date
    earliest_source_date: dt.date
    source_days: int = Field(gt=0)
    """days with impressions in the source"""
    lag_seconds: Seconds
    """how long after the end of the newest day ``reference`` is"""
    reference: AwareDatetime
    """the end of ``--end``'s day, else now"""
    max_lag_hours: NonNegativeFloat | None
    """the limit the step enforced (null: report only)"""


class MaterializeSummary(StepSummary):
    """``ranker features materialize``: the online store loaded."""

    step: Literal["materialize"] = "materialize"
    mode: Literal["full", "incremental"]
    """the first run loads the whole range, later ones go on from where the last stopped"""
    start: dt.date | None
    """the first day loaded (full mode; null when incremental)"""
    end: dt.date
    """features as of the end of this day"""
    end_timestamp: AwareDatetime
    feature_views: list[str]
    online_store: str
    """the online store's type (sqlite | redis)"""
    duration_seconds: Seconds


# --------------------------------------------------------------------------------------------
# training
# --------------------------------------------------------------------------------------------


class EvalSummary(Summary):
    """Offline metrics of a model on an eval day (``ranking.evaluation.metrics.OfflineMetrics``)."""

    save_hit_at_3: float
    """saved pins ranked in the top 3 of their slate / all saved pins"""
    auc: float
    ne: float
    """normalized entropy: log loss / entropy of the base save rate (lower is better)"""
    log_loss: float
    calibration: float
    """mean prediction / base rate"""
    base_rate: float
    rows: NonNegativeInt
    requests_with_save: NonNegativeInt


class RemedySummary(Summary):
    """An epoch-start remedy that ran (``ranking.trainer.remedies``)."""

    name: str
    tables: str
    table_optimizer: str


class EpochSummary(Summary):
    """One training epoch."""

    epoch: int = Field(ge=1)
    phase: Phase
    """frozen: embedding tables not updated; joint: tables and dense tower"""
    loss: float
    samples: NonNegativeInt
    steps: NonNegativeInt
    samples_per_second: float
    lookup_ratio: float | None = None
    """share of the epoch's time in embedding lookups (null: timing off)"""
    exposed_lookup_ratio: float | None = None
    """share not hidden under other work (null: timing off; absent from an older trainer's)"""
    duration_seconds: Seconds
    peak_gpu_memory_bytes: NonNegativeInt | None = None
    """rank 0's peak (CUDA only)"""
    remedy: RemedySummary | None = None
    """the remedy run before the epoch, if any"""
    eval: EvalSummary | None = None
    """the model after this epoch on the eval day (each epoch with --eval-each-epoch, else the last)"""


class TrainWindow(Summary):
    """The window a run trained on (``ranking.trainer.loop.trained_window``: an incremental run's kept days)."""

    window_id: str
    manifest: str
    end: dt.date
    days: int = Field(gt=0)
    rows_train: NonNegativeInt
    rows_eval: NonNegativeInt
    feature_version: str
    train_dates: list[dt.date]
    eval_date: dt.date


class WarmStart(Summary):
    """Where the run's weights came from."""

    source: str | None = None
    """what was asked and found: ``champion v0003``, ``base (none yet: from scratch)``, ``none``, ``path``
    (the train job fills it in)"""
    path: str | None
    """the checkpoint loaded (null: from scratch)"""
    scope: str | None
    """which parameters were loaded (null: from scratch)"""


class Lineage(Summary):
    """Full retrain or incremental continuation: planned by ``ranking.trainer.lineage.plan_training``,
    recorded with the train summary and the registry version (``train.lineage``)."""

    kind: Literal["full", "incremental"]
    parent: str | None
    """the champion an incremental run continues"""
    full_retrain_end: dt.date
    since: dt.date | None
    """incremental: the first day trained"""
    reason: str


class DataValidation(Summary):
    """The data validation of the window a model was trained on, as ``ranker train`` recorded it
    with the version (``train.data_validation`` in the registry): what the gate's leakage check
    reads."""

    verdict: Literal["pass", "warn", "fail"]
    window_id: str
    leak_checked: bool
    leak_clean: bool
    counts: dict[Literal["fail", "warn", "accepted"], NonNegativeInt]
    accepted: list[str]
    """the anomalies an operator accepted (``kind[:feature]@day``)"""
    report: str


class TrainSummary(StepSummary):
    """``ranker train``: the training loop's record (``ranking.trainer.loop``), completed by the train
    job (``ranking.trainer.job``: lineage, effective config, version, total duration)."""

    step: Literal["train"] = "train"
    run_dir: str
    schedule: str
    """the epochs' phases as letters, e.g. ``F,J``"""
    schedule_spec: str
    """the schedule as asked (``delayed``, ``joint``, ``F,J,J``)"""
    pipeline: Literal["sync", "semisync"]
    """the train pipeline that ran (``auto`` resolved)"""
    remedy: str
    seed: int
    epochs: list[EpochSummary]
    eval: EvalSummary
    """the final model on the window's eval day"""
    samples_per_second: float | None
    """over all epochs (null when no time was measured)"""
    wall_seconds_by_phase: dict[Phase, Seconds]
    lookup_ratio_by_phase: dict[Phase, float]
    """time-weighted lookup share per phase (empty: timing off)"""
    exposed_lookup_ratio_by_phase: dict[Phase, float]
    window: TrainWindow
    warm_start: WarmStart
    resumed_after_epoch: int | None
    """the epoch an earlier attempt's checkpoint ended with (``--resume``)"""
    world_size: int = Field(ge=1)
    device: str
    """cpu | cuda"""
    sharding: dict[str, str]
    """table -> sharding plan"""
    code_version: str
    started_at: AwareDatetime
    duration_seconds: Seconds | None = None
    """the loop's wall time; the job replaces it with the whole job's"""
    lineage: Lineage | None = None
    data_validation: DataValidation | None = None
    """the window's data validation (null: the window was not validated, e.g. a standalone
    ``ranker train`` before ``ranker features validate``)"""
    """set by the train job"""
    effective_config: str | None = None
    """path of ``effective_config.json`` in the run folder (set by the train job)"""
    version: str | None = None
    """the registered version (null: not registered); set by the train job"""


# --------------------------------------------------------------------------------------------
# gate and decisions
# --------------------------------------------------------------------------------------------


class GateCheck(Summary):
    """One of the gate's checks (``ranking.gate.checks.Check``)."""

    name: str
    passed: bool
    value: float | None
    threshold: float | Interval | None
    """a bound, or [low, high]"""
    detail: str
    ci: Interval | None = None
    warning: bool = False
    """passed, but an event worth an operator's look (a large lift the data and lineage cleared)"""
    """the paired bootstrap interval of ``value``'s statistic"""


class ModelMetrics(EvalSummary):
    """A registered model's offline metrics on the gate's eval day."""

    version: str


class CandidateMetrics(ModelMetrics):
    random_save_hit_at_3: float
    """HIT@3 of a random ranking of the same slates"""


class AnchorSummary(ModelMetrics):
    """The best of the last champions on the eval day (the first gate's anchor check)."""

    relative_change: float
    ci: Interval
    considered: list[str]
    left_out: dict[str, str] | None = None
    """versions that could not be compared, and why"""


class ReferenceSummary(Summary):
    """The champion and the champions before it, on the eval day (the reference check)."""

    models: dict[str, float]
    """``champion`` or a version -> its save HIT@3"""
    mean_save_hit_at_3: float
    relative_change: float
    ci: Interval


class HeuristicSummary(EvalSummary):
    """The non-learned ranker on the eval day (``ranking.evaluation.heuristic``) and the lifts of
    the models over it."""

    name: str
    relative_change: float | None
    """the candidate's save HIT@3 over the heuristic's, minus 1"""
    ci: Interval | None
    """its paired bootstrap interval"""
    champion_relative_change: float | None
    """the champion's (the served model's) lift over the heuristic on the same day"""
    margin: float
    policy: Literal["warn", "fail"]


class GateThresholds(Summary):
    """Every threshold of the promotion gate, each default and limit written once: the config's
    ``[gate]`` section (``ranking.config.model.GateSection``), the gate's own
    ``ranking.gate.checks.GateConfig``, ``ranker gate``'s flags (``ranking.cli.options``, each
    field's description its help) and the verdict's record are this model. Relative values are
    fractions (0.01 = 1%); the rationale is in docs/registry.md. A verdict recorded before the slice
    guard lacks its four fields (read as their defaults here, never written back:
    :meth:`Summary.body` writes the fields a record set)."""

    # here, in the lowest layer, because the summary, the gate and the config all read it
    model_config = ConfigDict(frozen=True, allow_inf_nan=False)

    # value floor: HIT@3 must be at least max(min_save_hit_at_3, random-ranking HIT@3 × (1 + lift))
    min_save_hit_at_3: float = Field(default=0.0, ge=0, le=1, description="absolute floor on save HIT@3")
    min_lift_over_random: float = Field(
        default=0.05, ge=0, description="HIT@3 must beat random ranking by this"
    )
    # candidate vs champion: relative change of save HIT@3 must be >= -tolerance (under rule "ci":
    # the paired bootstrap CI's lower bound must; under "point": the point estimate). 0.10, not
    # 0.05: a day's 90% CI half-width is ~6% at 25,000 impressions, so at 5% an equally good
    # candidate failed about half the days (gate suite: staleness median 2 d, 13/28 promoted;
    # at 10%: 1 d, 27/28, every broken candidate still stopped; docs/registry.md)
    tolerance: float = Field(
        default=0.10, ge=0, lt=1, description="max relative save HIT@3 drop vs the champion"
    )
    # guardrails (absolute; under rule "ci": the CI's upper bound of the drop / rise)
    max_auc_drop: float = Field(default=0.02, ge=0, description="max AUC drop vs the champion (absolute)")
    max_ne_rise: float = Field(default=0.03, ge=0, description="max normalized-entropy rise vs the champion")
    # sanity: calibration = mean prediction / base rate within [low, high]; scores must vary
    calibration_low: float = Field(default=0.5, gt=0, le=1, description="lowest mean prediction / base rate")
    calibration_high: float = Field(default=2.0, ge=1, description="highest mean prediction / base rate")
    min_score_std: float = Field(
        default=1e-6, ge=0, description="the candidate's scores must vary more than this (standard deviation)"
    )
    rule: GateRule = Field(
        default="ci",
        description="ci: non-inferiority on the paired bootstrap CIs | point: on point estimates",
    )
    # paired bootstrap over requests (HIT@3 change, AUC drop, NE rise; the same resamples for all)
    bootstrap_samples: int = Field(
        default=1000, ge=1, le=100_000, description="bootstrap resamples for the CIs"
    )
    ci_level: float = Field(
        default=0.90, gt=0, lt=1, description="two-sided level of the bootstrap CIs (0.9: one-sided 95%)"
    )
    seed: int = Field(default=0, ge=0, le=MAX_SEED, description="the bootstrap's seed")
    # anchor (the first gate's): the best of the last N champions on the eval day. The maximum of
    # N noisy estimates is biased upwards (winner's curse): an equal candidate fails it often, so
    # the default gate uses the reference below instead (docs/registry.md "Old gate and new")
    anchor_champions: int = Field(
        default=0, ge=0, le=100, description="anchor: best of the last N champions (0: off)"
    )
    anchor_tolerance: float = Field(
        default=0.05, ge=0, lt=1, description="max relative save HIT@3 drop vs the anchor"
    )
    # reference: the MEAN save HIT@3 of the champion and the N-1 champions before it, on the eval
    # day; the candidate may not be worse than it by more than reference_tolerance
    reference_champions: int = Field(
        default=3, ge=0, le=100, description="reference: mean of the champion and the N-1 before it (0: off)"
    )
    reference_tolerance: float = Field(
        default=0.10, ge=0, lt=1, description="max relative save HIT@3 drop vs the reference"
    )
    # trend guard: vs the champion served trend_days before the eval day (the newest former champion
    # trained for a day at least that old), scored today: losses that each pass a moving reference
    # cannot add up past trend_tolerance
    trend_days: int = Field(
        default=7, ge=0, le=365, description="trend: vs the champion served N days ago (0: off)"
    )
    trend_tolerance: float = Field(default=0.10, ge=0, lt=1, description="max relative save HIT@3 drop vs it")
    # pooled: when the day's HIT@3-change CI is wider than pool_ci_width, the change vs the champion
    # is judged on the inverse-variance mean of this day's and the last pool_days - 1 recorded days'
    pool_days: int = Field(
        default=5, ge=1, le=100, description="pool the change over N eval days when a CI is wide (1: never)"
    )
    pool_ci_width: float = Field(default=0.15, ge=0, description="a day's CI wider than this is pooled")
    # leakage: a candidate above its champion on the same day by more than max_lift (point
    # estimate) is too good to be true (trained on the eval day)
    max_lift: float = Field(
        default=0.10,
        ge=0,
        description="leakage: a save HIT@3 lift over the champion above this (and, rule ci, significant)"
        " is rejected unless the data checks and the lineage show it clean (0: off)",
    )
    max_window_lag_days: int = Field(
        default=3,
        ge=0,
        le=365,
        description="the candidate's window ends at most N days before the eval day (0: off)",
    )
    # a champion trained on the eval day would be judged on its training data: fail closed
    allow_unfair: bool = Field(
        default=False, description="compare even if a model was trained on the eval day (recorded)"
    )
    # slice guard: no slice of the eval day (first-seen users, a country, tail pins, ...; the
    # [slices] section) with at least slice_min_requests requests with a save may lose more than
    # slice_tolerance of its save HIT@3 vs the champion. Judged on each slice's paired bootstrap
    # interval at a level corrected for the number of slices judged (Bonferroni): rejected only
    # when the whole interval lies below -slice_tolerance, whatever the rule (a point estimate on
    # a few dozen requests would reject clean candidates by chance)
    slice_guard: bool = Field(
        default=True,
        description="no slice with enough requests with a save may lose more than slice_tolerance",
    )
    slice_min_requests: int = Field(
        default=30,
        ge=1,
        le=1_000_000,
        description="slice guard: judge slices with at least N requests with a save",
    )
    slice_tolerance: float = Field(
        default=0.10, ge=0, lt=1, description="slice guard: max relative save HIT@3 loss of a slice"
    )
    # judge slices that take only part of a slate (pin tiers, a pin column) too. Off: within a
    # slate the top 3 places are shared, so a candidate that ranks head pins higher moves tail
    # pins down; that trade-off moved by -30 to -45 % for the tail on 2 of 28 clean days of the
    # gate suite (seed 0) while head pins gained as much. Whole slates (users, a user column)
    # have no such trade-off: a loss there is a loss for those users.
    slice_guard_partial: bool = Field(
        default=False, description="slice guard: judge slices of part of a slate (pin tiers) too"
    )


class SliceSummary(Summary):
    """One slice of the eval day (``ranking.evaluation.slices``): the models' save HIT@3 on its
    saved pins and the candidate's change vs the champion."""

    name: str
    """``group:value``: user:first_seen, pin:tail, user_stats__country:c03, ..."""
    requests_with_save: NonNegativeInt
    """requests with a saved pin in the slice"""
    candidate: float | None
    """null: no saved pin in the slice"""
    whole_slates: bool | None = None
    """the slice takes whole slates (users, a user column), not part of one (pin tiers); null: before it was recorded"""
    heuristic: float | None = None
    champion: float | None = None
    relative_change: float | None = None
    ci: Interval | None = None
    """the paired bootstrap interval of ``relative_change`` at the gate's level"""
    judged: bool = False
    """judged by the slice guard (enough requests with a save; whole slates unless slice_guard_partial)"""
    judged_ci: Interval | None = None
    """the interval at the level the guard judges it (corrected for the slices judged)"""
    loss_p: float | None = None
    """bootstrap p-value of "lost more than the tolerance" (rejected below the corrected level)"""


class GateSummary(StepSummary):
    """``ranker gate``: every check with its numbers (exit 0 pass, 1 reject)."""

    step: Literal["gate"] = "gate"
    decision: Decision
    checks: list[GateCheck]
    failed_checks: list[str]
    warnings: list[str] = []
    """checks that passed with a warning"""
    candidate: CandidateMetrics
    champion: ModelMetrics | None
    """null: no champion yet (absolute checks only)"""
    relative_change: float | None
    """of save HIT@3, candidate vs champion"""
    ci: Interval | None
    """paired bootstrap interval of ``relative_change``"""
    eval_date: dt.date | None
    config: GateThresholds
    anchor: AnchorSummary | None
    reference: ReferenceSummary | None
    heuristic: HeuristicSummary | None = None
    """the non-learned ranker scored beside the models (null: not scored)"""
    slices: list[SliceSummary] | None = None
    """the eval day's slices (null: not cut)"""
    duration_seconds: Seconds


class DecideSummary(StepSummary):
    """``ranker decide``: the promotion policy's answer for a gated candidate."""

    step: Literal["decide"] = "decide"
    branch: Branch
    reason: str
    """recorded with a promotion or rejection; why, for a kept champion"""
    force: bool
    """promote past a failed gate (``ranker promote --force``)"""
    version: str
    """the candidate"""
    end: dt.date
    decision: Decision
    """the gate's verdict"""
    failed_checks: list[str]
    champion: str | None
    champion_trained_for: dt.date | None
    dry_run: bool
    force_promote: bool


class PromoteSummary(StepSummary):
    """``ranker promote``: the champion alias moved (or already there)."""

    step: Literal["promote"] = "promote"
    version: str
    previous: str | None
    """the champion before (null: the first)"""
    reason: str
    forced: bool
    """promoted without a passing gate verdict"""
    noop: bool
    """the version already was the champion: nothing changed"""
    seq: int | None
    """the alias event's sequence number (null when nothing changed)"""


class RejectSummary(StepSummary):
    """``ranker reject``: a rejection recorded for a candidate."""

    step: Literal["reject"] = "reject"
    version: str
    failed_checks: list[str]
    """the gate verdict's failed checks"""
    reason: str


# --------------------------------------------------------------------------------------------
# monitoring and the whole run
# --------------------------------------------------------------------------------------------


class MetricsSummary(StepSummary):
    """``ranker metrics publish``: a run's summaries turned into metrics and delivered."""

    step: Literal["metrics"] = "metrics"
    status: Literal["success", "failed"]
    failed_step: str | None
    delivery: Literal["pushgateway", "textfile"]
    target: str
    """the Pushgateway URL and job, or the textfile's path"""
    push_ok: bool | None
    """null: no Pushgateway configured"""
    push_attempts: int | None
    push_error: str | None
    steps: list[str]
    """the step summaries read"""
    series: NonNegativeInt


class TrackSummary(StepSummary):
    """``ranker step track``: the pipeline run as one MLflow run, or queued when MLflow is down."""

    step: Literal["track"] = "track"
    record_id: str | None
    """the run's record (``retrain:<run id>``; null: tracking is off)"""
    experiment: str | None
    mlflow_run_id: str | None
    """null: queued, or tracking off"""
    url: str | None
    """where the run is (the UI's page, or the local store's)"""
    queued: bool
    decision: str | None
    """the decision tagged on the run (``ranker.decision``)"""
    message: str
    """one line for the operator: where the run is, or that it was queued and how to replay it"""


class StepBrief(Summary):
    """One step of ``ranker run``, as the run summary lists it."""

    step: str
    exit_code: int
    duration_seconds: Seconds
    error: str | None = None


class FirstBase(Summary):
    """The base model ``ranker run`` pretrained first (a recipe on the base, and no base yet)."""

    run_id: str
    """the pretrain's own run id (``<run id>-pretrain``)"""
    exit_code: int
    version: str | None
    """the base's version (null: pretraining failed, and the run trained from scratch)"""
    error: str | None


class ValidationBrief(Summary):
    """The data validation of a run's window, as the run summary lists it."""

    verdict: Literal["pass", "warn", "fail"]
    counts: dict[Literal["fail", "warn", "accepted"], NonNegativeInt]
    failing: list[str]
    """the kinds of the failing anomalies"""
    report: str


class RunSummary(StepSummary):
    """``ranker run``: window → train → gate → promote | reject → metrics publish in one process."""

    step: Literal["run"] = "run"
    end: dt.date
    days: int | None
    """the window length (the builder's default when not asked)"""
    dry_run: bool
    decision: Decision | None
    """the gate's (null: it did not run)"""
    version: str | None
    """the candidate trained (or reused) by the run"""
    promoted: bool
    forced: bool
    kept_champion: bool
    attempt: int = Field(ge=1)
    """1, or the attempt of a rerun of the same run id"""
    failed_checks: list[str] = []
    """the gate's (set once the gate ran)"""
    failed_step: str | None = None
    """the step that failed (with ``error``)"""
    steps: list[StepBrief]
    champion: str | None
    """the champion after the run"""
    duration_seconds: Seconds
    pretrain: FirstBase | None = None
    """the first base, when the run pretrained one before its window"""
    validation: ValidationBrief | None = None
    """the window's data validation (set once the step judged the window)"""


SUMMARY_MODELS: tuple[type[StepSummary], ...] = (
    FreshnessSummary,
    WindowSummary,
    ValidationSummary,
    MaterializeSummary,
    TrainSummary,
    GateSummary,
    DecideSummary,
    PromoteSummary,
    RejectSummary,
    MetricsSummary,
    TrackSummary,
    RunSummary,
)
STEP_MODELS: dict[str, type[StepSummary]] = {m.model_fields["step"].default: m for m in SUMMARY_MODELS}

AnySummary = Annotated[
    FreshnessSummary
    | WindowSummary
    | ValidationSummary
    | MaterializeSummary
    | TrainSummary
    | GateSummary
    | DecideSummary
    | PromoteSummary
    | RejectSummary
    | MetricsSummary
    | TrackSummary
    | RunSummary
    | StepError,
    Field(description="A step summary: the step's own, or a step that failed before it had one."),
]


def model_for(step: str) -> type[StepSummary] | None:
    """The summary model of ``step`` (None: a step without one, e.g. ``apply``)."""
    return STEP_MODELS.get(step)


def not_a_summary(path: object, step: str, exc: ValidationError) -> str:
    """One line for a recorded summary that does not fit its model: the file, the first field
    that does not fit and why."""
    first = exc.errors()[0]
    where = ".".join(str(part) for part in first["loc"])
    return f"{path}: not a {step} summary ({where}: {first['msg']})"


# a recorded summary is free-form JSON (any producer's, any version) until the model validates it
def parse_summary(data: Mapping[str, Any], step: str | None = None, *, strict: bool = False) -> StepSummary:
    """A recorded summary as its model: the step's own; :class:`StepError` for a step that failed
    (``error`` set, exit code >= 2; ``run`` keeps its own, which says how far it got); the common
    fields alone for a step without a model (other fields kept as extras).

    Fields the model does not declare are ignored (a newer producer), refused with ``strict``.
    Raises pydantic's ``ValidationError``."""
    name = step if step is not None else str(data.get("step"))
    model = STEP_MODELS.get(name)
    failed = bool(data.get("error")) and _exit_code(data) >= 2
    if model is None:
        return StepSummary.model_validate(data, extra="allow")
    # a run, and a validation that judged its window, record their failure whole
    whole = model is RunSummary or (model is ValidationSummary and "verdict" in data)
    if failed and not whole:
        return StepError.model_validate(data, extra="forbid" if strict else "ignore")
    return model.model_validate(data, extra="forbid" if strict else "ignore")


def _exit_code(data: Mapping[str, Any]) -> int:  # parse_summary's unvalidated JSON
    code = data.get("exit_code", 0)
    return code if isinstance(code, int) and not isinstance(code, bool) else 0
