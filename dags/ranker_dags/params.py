"""Run parameters of ``ranker_retrain``: the Params (JSON schema, checked when a run is created) and
the run plan (cross-field rules and the window end, checked by the first task); the Params of the
one-step DAGs (pretrain, recipe review, rollback).

Window end rule (one rule for every run type; the eval day is ``window_end``, training days are
``[window_end - window_days, window_end)``):

- manual runs with ``window_end``: that date;
- scheduled and backfill runs: the last complete UTC day before the data interval end;
- manual runs without ``window_end``: the last complete UTC day before the run's logical date, or
  before the trigger time when the run has no logical date. A manual run's data interval is never
  read: in Airflow 3 it is inferred from the timetable and means nothing for a manual trigger.
"""

from __future__ import annotations

import datetime as dt
import functools
import json
import re
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypedDict, TypeVar

from ranker_dags.json_values import Json, Schema

if TYPE_CHECKING:
    from airflow.sdk import Param

T = TypeVar("T")

SCHEDULE_NAMES = ("delayed", "joint", "frozen", "joint_then_frozen")
SCHEDULE_LIST_PATTERN = r"^[FJ](,[FJ]){0,9}$"
PIPELINES = ("auto", "sync", "semisync")  # ranking.trainer.models.config.PIPELINES (no project import here)
WARM_STARTS = ("none", "champion", "base")
WARM_START_SCOPES = ("all", "dense")
# Param -> pipeline config key: the steps get the Params that are set as `--params JSON`, a layer
# above the config file (<home>/ranker.toml or $RANKER_CONFIG); an empty Param leaves the config's
PARAM_KEYS = {
    "window_days": "window.days",
    "epochs": "recipe.epochs",
    "schedule": "recipe.schedule",
    "pipeline": "recipe.pipeline",
    "warm_start": "recipe.warm_start",
    "warm_start_scope": "recipe.warm_start_scope",
    "tolerance": "gate.tolerance",
    "min_hit": "gate.min_save_hit_at_3",
}
REASON_MAX = 500
# the CLI's run-id rule, the same string as RUN_ID_PATTERN in ranking/core/ids.py (this environment
# cannot import `ranking`; tests/dags/test_id_patterns.py compares the two)
RUN_ID_PATTERN = r"\A[A-Za-z0-9][A-Za-z0-9_.:+-]{0,127}\Z"
_UNSAFE_RUN_ID = re.compile(r"[^A-Za-z0-9_.:+-]")  # the complement of the pattern's alphabet
# the registry's version-id rule, the same string as VERSION_ID_PATTERN in ranking/core/ids.py (compared
# by the same test)
VERSION_PATTERN = r"\Av([0-9]{4,9})\Z"
# the dates the CLI's --end takes (ranking/cli/common.py parse_date: MIN_DATE 1970-01-01 ..
# MAX_DATE 2999-12-31); `format: date` refuses the impossible ones (2026-02-30). Compared with the
# project's by tests/dags/test_params.py
CLI_DATE_PATTERN = r"^(19[7-9][0-9]|2[0-9]{3})-[0-9]{2}-[0-9]{2}$"


# the config's bounds, written from ranking/config/model.py by `make schema`
# (ranking/config/bounds.py): a Param of a config key takes the key's own limits from there
CONFIG_BOUNDS_FILE = Path(__file__).with_name("config_bounds.json")
_NUMERIC = ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum")


@functools.cache
def config_bounds() -> dict[str, Schema]:
    bounds: dict[str, Schema] = json.loads(CONFIG_BOUNDS_FILE.read_text())
    return bounds


def config_param(key: str, **schema: Json) -> Schema:
    """The JSON schema of an optional Param for config key ``key``: empty (null) or a value within
    the key's bounds; ``schema`` adds the title and description."""
    bounds = config_bounds()[key]
    limits = {k: bounds[k] for k in _NUMERIC if k in bounds}
    return {"default": None, "type": ["null", bounds["type"]], **limits, **schema}


def config_default(key: str) -> Json:
    return config_bounds()[key].get("default")


# the sections a run may override through the ``overrides`` Param (with a reason): the gate's
# checks, the heuristic the gate compares with, and the data validation's thresholds and policies
OVERRIDE_SECTIONS = ("gate", "validation", "heuristic")
OVERRIDE_REASON = "reason"
_POLICIES = ("fail", "warn")  # ranking.config.model Policy (no project import here)


@functools.cache
def override_keys() -> tuple[str, ...]:
    """The config keys the ``overrides`` Param may set, in the bounds file's order."""
    return tuple(k for k in config_bounds() if k.split(".")[0] in OVERRIDE_SECTIONS)


def _override_value_schema(key: str) -> Schema:
    """A config key's own JSON schema for its override value (no default: an override is a value)."""
    schema = {k: v for k, v in config_bounds()[key].items() if k != "default"}
    if key == "validation.policy":  # anomaly kind -> fail | warn; the step names an unknown kind
        schema["additionalProperties"] = {"type": "string", "enum": list(_POLICIES)}
    return schema


def overrides_schema() -> Schema:
    """The ``overrides`` Param: ``{"gate.allow_unfair": true, "reason": "..."}``, config keys of the
    gate, the heuristic and the data validation, each within its own limits, and a non-empty
    reason (so an override without one is a 400 when the run is created, before any task)."""
    properties: dict[str, Json] = {key: _override_value_schema(key) for key in override_keys()}
    properties[OVERRIDE_REASON] = {"type": "string", "pattern": r"\S", "maxLength": REASON_MAX}
    return {
        "default": None,
        "type": ["null", "object"],
        "properties": properties,
        "required": [OVERRIDE_REASON],
        "additionalProperties": False,
        "minProperties": 2,  # the reason and at least one key
        "title": "Gate and data validation overrides (with a reason)",
        "description": "This run only: config keys of [gate], [heuristic] and [validation] with their "
        'values and why, e.g. {"gate.allow_unfair": true, "reason": "champion trained a day later"} or '
        '{"validation.policy": {"label_rate_jump": "warn"}, "reason": "..."}. The reason is required '
        "and shown in the run's note. Empty: the config's.",
    }


class PlanError(ValueError):
    """The run's parameters contradict each other or cannot be resolved; the run fails at once."""


def retrain_param_schemas() -> dict[str, Schema]:
    """``{name: (default, JSON schema)}`` of the retrain DAG's Params, as plain data.

    Kept free of Airflow types so the rules are testable on their own; ``retrain_params`` wraps them.
    """
    return {
        "window_end": {
            "default": None,
            "type": ["null", "string"],
            "format": "date",
            "pattern": r"^\d{4}-\d{2}-\d{2}$",
            "title": "Window end (eval day)",
            "description": "YYYY-MM-DD. Training days are [end - window_days, end). Empty: the last "
            "complete day before the run's date.",
        },
        "window_days": config_param(
            "window.days",
            title="Window length in days",
            description=f"Empty: the pipeline config's window.days (default {config_default('window.days')}).",
        ),
        "epochs": config_param(
            "recipe.epochs",
            title="Epochs",
            description="Empty: the pipeline config's recipe.epochs (default"
            f" {config_default('recipe.epochs')}, or the schedule list's length).",
        ),
        "schedule": {
            "default": None,
            "anyOf": [
                {"type": "null"},
                {"type": "string", "enum": list(SCHEDULE_NAMES)},
                {"type": "string", "pattern": SCHEDULE_LIST_PATTERN},
            ],
            "title": "Embedding schedule",
            "description": "delayed (F,J,J...), joint, frozen, joint_then_frozen, or one letter per "
            "epoch such as F,J,J (F: tables frozen, J: joint). Empty: the pipeline config's.",
        },
        "pipeline": {
            "default": None,
            "type": ["null", "string"],
            "enum": [None, *PIPELINES],
            "title": "Training pipeline",
            "description": "Empty: the pipeline config's recipe.pipeline (default auto: semisync on CPU, sync on CUDA).",
        },
        "warm_start": {
            "default": None,
            "type": ["null", "string"],
            "enum": [None, *WARM_STARTS],
            "title": "Warm start",
            "description": "base: from the base model (ranker_pretrain); champion: from the production "
            "model; none: from scratch. Empty: the pipeline config's recipe.warm_start (default base).",
        },
        "warm_start_scope": {
            "default": None,
            "type": ["null", "string"],
            "enum": [None, *WARM_START_SCOPES],
            "title": "Warm start scope",
            "description": "all weights, or the dense layers only (fresh tables). Empty: the config's.",
        },
        "tolerance": config_param(
            "gate.tolerance",
            title="Gate tolerance",
            description="Allowed relative drop of save HIT@3 vs the champion (0.01 = 1%). "
            "Empty: the pipeline config's gate.tolerance.",
        ),
        "min_hit": config_param(
            "gate.min_save_hit_at_3",
            title="Gate floor on save HIT@3",
            description="Absolute floor on the candidate's save HIT@3. Empty: the config's gate.min_save_hit_at_3.",
        ),
        "overrides": overrides_schema(),
        "dry_run": {
            "default": False,
            "type": "boolean",
            "title": "Dry run",
            "description": "Train and gate, never promote.",
        },
        "force_promote": {
            "default": False,
            "type": "boolean",
            "title": "Force promotion",
            "description": "Promote even if the gate rejects. Requires a reason.",
        },
        "reason": {
            "default": "",
            "type": "string",
            "maxLength": REASON_MAX,
            "title": "Reason",
            "description": "Why (recorded in the registry history). Required with force_promote.",
        },
    }


def retrain_params() -> dict[str, Param]:
    from airflow.sdk import Param

    params = {}
    for name, spec in retrain_param_schemas().items():
        schema = dict(spec)
        default = schema.pop("default")
        params[name] = Param(default, **schema)  # type: ignore[arg-type]  # JSON-schema keywords: Param's **kwargs
    return params


def pretrain_params() -> dict[str, Param]:
    """The Params of ``ranker_pretrain``'s manual runs."""
    from airflow.sdk import Param

    return {
        "window_end": Param(
            None,
            type=["null", "string"],
            format="date",
            pattern=CLI_DATE_PATTERN,
            title="Daily window end",
            description="Eval day of the daily window the base is for (YYYY-MM-DD). Empty: yesterday.",
        ),
        "reason": Param(
            None,
            type=["null", "string"],
            maxLength=REASON_MAX,
            title="Reason",
            description="Recorded with the base's move (default: the range it was trained on).",
        ),
    }


def review_params() -> dict[str, Param]:
    """The Params of ``ranker_recipe_review``'s manual runs: ``ranker review``'s ``--end`` and two
    [review] keys (``days``, ``candidate_only``) with the config's bounds, so that every value the
    review would refuse is refused when the run is created (tests/dags/test_params.py derives them
    from ``ReviewSection``)."""
    from airflow.sdk import Param

    return {
        "end": Param(
            None,
            type=["null", "string"],
            format="date",
            pattern=CLI_DATE_PATTERN,
            title="Last eval day",
            description="The last eval day replayed (YYYY-MM-DD). Empty: yesterday.",
        ),
        "days": Param(
            **config_param("review.days", title="Eval days"),  # type: ignore[arg-type]  # as above
            description="Eval days replayed. Empty: the workspace config's [review] days. Fewer "
            "paired days than [review] min_days: the review reports and keeps the recipe.",
        ),
        "candidate_only": Param(
            False,
            type="boolean",
            title="Candidates only",
            description="Compare the recipes' fresh candidates only (no gate replay, no served models).",
        ),
    }


def rollback_params() -> dict[str, Param]:
    """The Params of ``ranker_rollback`` (manual only): why, and optionally to which version."""
    from airflow.sdk import Param

    return {
        "to_version": Param(
            None,
            type=["null", "string"],
            pattern=VERSION_PATTERN,
            title="Roll back to version",
            description="e.g. v0003. Empty: the previous champion.",
        ),
        "reason": Param(
            None,
            type="string",
            minLength=1,
            maxLength=REASON_MAX,
            title="Reason",
            description="Why (recorded in the registry history with who triggered it).",
        ),
    }


class PlanXCom(TypedDict):
    """The plan task's XCom: ``RetrainPlan``'s fields and the Params set, by config key. Every step
    takes it as its request (``ranker step --request``: ``window_end``, ``dry_run``,
    ``force_promote``, ``reason``; the rest is not the steps' business)."""

    run_id: str
    window_end: str
    window_days: int | None
    epochs: int | None
    schedule: str | None
    pipeline: str | None
    warm_start: str | None
    warm_start_scope: str | None
    tolerance: float | None
    min_hit: float | None
    dry_run: bool
    force_promote: bool
    reason: str
    actor: str
    overrides: dict[str, Json]
    override_reason: str
    config_params: dict[str, Json]


@dataclass(frozen=True)
class RetrainPlan:
    """Everything a retrain run's steps need, resolved once by the first task (plain types: XCom).
    Not ``ranking.pipeline.run.RunPlan`` (what ``ranker run`` was asked), hence its own name."""

    run_id: str
    window_end: str
    window_days: int | None  # None: the pipeline config's (also for every Param below)
    epochs: int | None
    schedule: str | None
    pipeline: str | None
    warm_start: str | None
    warm_start_scope: str | None
    tolerance: float | None
    min_hit: float | None
    dry_run: bool
    force_promote: bool
    reason: str
    actor: str  # who triggered the run: recorded by the registry as "who"
    overrides: dict[str, Json] = field(default_factory=dict)  # config key -> value (the overrides Param)
    override_reason: str = ""  # why, required with any override

    @property
    def config_params(self) -> dict[str, Json]:
        """The Params that are set, by config key (what the steps get as ``--params``); an
        override of the ``overrides`` Param wins over the tolerance and min_hit Params."""
        values = asdict(self)
        named = {key: values[name] for name, key in PARAM_KEYS.items() if values[name] is not None}
        return {**named, **self.overrides}

    def to_dict(self) -> PlanXCom:
        return PlanXCom(**asdict(self), config_params=self.config_params)  # type: ignore[typeddict-item]


def ranker_run_id(airflow_run_id: str) -> str:
    """The ``--run-id`` of the ranker steps: the Airflow run id in the CLI's safe alphabet."""
    safe = _UNSAFE_RUN_ID.sub("_", airflow_run_id).strip("_.:+-")[:128]
    if not re.fullmatch(RUN_ID_PATTERN, safe):
        raise PlanError(f"cannot derive a ranker run id from {airflow_run_id!r}")
    return safe


def resolve_window_end(
    *,
    requested: str | None,
    run_type: str,
    data_interval_end: dt.datetime | None,
    logical_date: dt.datetime | None,
    run_after: dt.datetime,
) -> dt.date:
    """The eval day of the run (see the module docstring for the rule)."""
    if run_type in ("scheduled", "backfill"):
        if data_interval_end is None:
            raise PlanError(f"a {run_type} run has no data interval end")
        return _utc_date(data_interval_end) - dt.timedelta(days=1)
    if requested:
        return parse_date(requested, "window_end")
    anchor = logical_date if logical_date is not None else run_after
    return _utc_date(anchor) - dt.timedelta(days=1)


def make_plan(
    params: Mapping[str, Json],
    *,
    airflow_run_id: str,
    run_type: str,
    data_interval_end: dt.datetime | None,
    logical_date: dt.datetime | None,
    run_after: dt.datetime,
    actor: str | None = None,
) -> RetrainPlan:
    """Check the cross-field rules Params cannot express and resolve the window end."""
    epochs = _optional(params, "epochs", int)
    schedule = _optional(params, "schedule", str)
    if schedule is not None and schedule not in SCHEDULE_NAMES:
        if not re.fullmatch(SCHEDULE_LIST_PATTERN, schedule):
            raise PlanError(f"unknown schedule {schedule!r}: use {', '.join(SCHEDULE_NAMES)} or e.g. F,J,J")
        if epochs is not None and len(schedule.split(",")) != epochs:
            raise PlanError(
                f"schedule {schedule!r} has {len(schedule.split(','))} settings but epochs={epochs}: "
                "give one setting per epoch"
            )
    reason = str(params.get("reason") or "").strip()
    force = bool(params.get("force_promote"))
    dry_run = bool(params.get("dry_run"))
    if force and not reason:
        raise PlanError("force_promote requires a non-empty reason")
    if force and dry_run:
        raise PlanError("force_promote and dry_run contradict each other: a dry run never promotes")
    overrides, override_reason = _overrides(params.get("overrides"))
    window_end = resolve_window_end(
        requested=_optional(params, "window_end", str),
        run_type=run_type,
        data_interval_end=data_interval_end,
        logical_date=logical_date,
        run_after=run_after,
    )
    return RetrainPlan(
        run_id=ranker_run_id(airflow_run_id),
        window_end=window_end.isoformat(),
        window_days=_optional(params, "window_days", int),
        epochs=epochs,
        schedule=schedule,
        pipeline=_optional(params, "pipeline", str),
        warm_start=_optional(params, "warm_start", str),
        warm_start_scope=_optional(params, "warm_start_scope", str),
        tolerance=_optional(params, "tolerance", float),
        min_hit=_optional(params, "min_hit", float),
        dry_run=dry_run,
        force_promote=force,
        reason=reason,
        actor=actor or f"airflow:{run_type}",
        overrides=overrides,
        override_reason=override_reason,
    )


def _overrides(value: Json) -> tuple[dict[str, Json], str]:
    """The ``overrides`` Param as (config key -> value, reason); its schema was checked when the
    run was created, this is the same rule for a run whose Params were not (``dags test``)."""
    if value is None:
        return {}, ""
    if not isinstance(value, dict):
        raise PlanError(f"overrides must be a JSON object of config keys and a reason, got {value!r:.80}")
    reason = str(value.get(OVERRIDE_REASON) or "").strip()
    keys = {k: v for k, v in value.items() if k != OVERRIDE_REASON}
    unknown = sorted(k for k in keys if k not in override_keys())
    if unknown:
        raise PlanError(
            f"overrides: {unknown[0]!r} is not a key a run may override ({', '.join(OVERRIDE_SECTIONS)} keys)"
        )
    if keys and not reason:
        raise PlanError('overrides require a non-empty reason (the "reason" key of overrides)')
    return keys, reason


def _optional(params: Mapping[str, Json], name: str, kind: Callable[[Any], T]) -> T | None:
    # the Params' JSON schema checked each value's type already; ``kind`` only narrows it
    value = params.get(name)
    return None if value is None else kind(value)


def parse_date(value: str, name: str) -> dt.date:
    if not re.fullmatch(r"\d{4}-\d{2}-\d{2}", value or "", re.ASCII):
        raise PlanError(f"{name} must be a date YYYY-MM-DD, got {value!r}")
    try:
        return dt.date.fromisoformat(value)
    except ValueError:
        raise PlanError(f"{name} is not a valid date: {value!r}") from None


def _utc_date(moment: dt.datetime) -> dt.date:
    if moment.tzinfo is None:
        raise PlanError(f"naive datetime {moment!r}: Airflow dates are timezone-aware")
    return moment.astimezone(dt.UTC).date()
