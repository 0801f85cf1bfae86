"""``ranker runs list``: one row per pipeline run folder (``<home>/pipeline/<run id>/``), read back
from the step summaries each run recorded: its day, the recipe it trained, what was decided, the
candidate's save HIT@3 and the champion after it.

A folder is read through the summaries' models (``ranking.core.summaries.parse_summary``); a run
written by older code may lack files or fields (shown as unknown, never guessed), and a summary
that does not parse is named on its row (the rest of the row comes from the files that do).
"""

from __future__ import annotations

import datetime as dt
import json
from pathlib import Path
from typing import TypeVar

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from ranking.core.summaries import (
    DecideSummary,
    GateSummary,
    MetricsSummary,
    PromoteSummary,
    RejectSummary,
    RunSummary,
    StepSummary,
    TrainSummary,
    ValidationSummary,
    WindowSummary,
    not_a_summary,
    parse_summary,
)
from ranking.pipeline.pretrain import PretrainSummary

_T = TypeVar("_T", bound=StepSummary)

# the steps a run folder may hold, in pipeline order (the first failed one is the run's failure)
_STEPS = ("window", "validate", "train", "gate", "decide", "promote", "reject", "metrics")


class Recipe(BaseModel):
    """What a run trained: from its train summary and the effective config it recorded."""

    schedule: str | None = None
    """the schedule as asked (``delayed``, ``F,J,J``)"""
    warm_start: str | None = None
    """the config's ``recipe.warm_start`` (base | champion | none | a path), else the train
    summary's source"""
    history_features: bool | None = None
    """null: not recorded (a config before history features, or no effective config)"""
    file: str | None = None
    """the config file the recipe's keys came from (null: defaults, flags or Params only)"""


class RunRow(BaseModel):
    """One pipeline run."""

    run_id: str
    day: dt.date | None
    """the window's end: the eval day (a pretrain's: the daily window it is for)"""
    kind: str
    """``run`` (``ranker run`` or the DAG's steps) | ``pretrain``"""
    recipe: Recipe
    decision: str
    """promoted | promoted (forced) | rejected by the gate | kept the champion (dry run) |
    kept the champion | stopped by data validation | failed at STEP | pretrained base | in progress"""
    candidate: str | None
    """the version the run trained (or reused)"""
    save_hit_at_3: float | None
    """the candidate's, on the gate's eval day (else the train summary's)"""
    champion: str | None
    """the champion after the run"""
    problems: list[str] = []
    """summary files that could not be read"""


class RunsListing(BaseModel):
    """``ranker runs list``: the runs, sorted by day then run id."""

    model_config = ConfigDict(extra="forbid")

    pipeline: str
    """the folder read"""
    total: int = Field(ge=0)
    """runs found (before ``--day`` and ``--limit``)"""
    runs: list[RunRow]


class _EffectiveRecipe(BaseModel):
    """The part of ``effective_config.json`` a listing reads (any config version)."""

    schedule: str | None = None
    warm_start: str | None = None
    history_features: bool | None = None


class _EffectiveConfig(BaseModel):
    class _Config(BaseModel):
        recipe: _EffectiveRecipe = _EffectiveRecipe()

    config: _Config = _Config()
    sources: dict[str, str] = {}


def _read(path: Path, problems: list[str]) -> StepSummary | None:
    if not path.is_file():
        return None
    try:
        data = json.loads(path.read_text())
    except (OSError, UnicodeDecodeError, json.JSONDecodeError) as exc:
        problems.append(f"{path.name}: not readable JSON ({type(exc).__name__})")
        return None
    if not isinstance(data, dict):
        problems.append(f"{path.name}: not a JSON object")
        return None
    step = path.stem
    try:
        if step == "pretrain":
            return PretrainSummary.model_validate(data, extra="ignore")
        return parse_summary(data, step)
    except ValidationError as exc:
        problems.append(not_a_summary(path.name, step, exc))
        return None


def _effective(path: str | None, problems: list[str]) -> _EffectiveConfig | None:
    if not path:
        return None
    file = Path(path)
    try:
        return _EffectiveConfig.model_validate_json(file.read_bytes(), extra="ignore")
    except FileNotFoundError:  # pruned by gc, or a run folder copied without its runs/
        return None
    except (OSError, ValidationError):
        problems.append(f"{file.name}: not an effective config")
        return None


def _recipe(train: TrainSummary | None, problems: list[str]) -> Recipe:
    if train is None:
        return Recipe()
    effective = _effective(train.effective_config, problems)
    recipe = Recipe(schedule=train.schedule_spec, warm_start=train.warm_start.source)
    if effective is None:
        return recipe
    asked = effective.config.recipe
    files = sorted(
        {
            s.removeprefix("file:")
            for k, s in effective.sources.items()
            if k.startswith("recipe.") and s.startswith("file:")
        }
    )
    return Recipe(
        schedule=asked.schedule or recipe.schedule,
        warm_start=asked.warm_start or recipe.warm_start,
        history_features=asked.history_features,
        file=", ".join(files) or None,
    )


def _typed(found: dict[str, StepSummary], step: str, model: type[_T]) -> _T | None:
    summary = found.get(step)
    return summary if isinstance(summary, model) else None


def _failed_step(found: dict[str, StepSummary]) -> str | None:
    return next((s for s in _STEPS if s in found and found[s].exit_code >= 2), None)


def _stopped_by_validation(validate: ValidationSummary | None, run: RunSummary | None) -> bool:
    if run is not None and run.validation is not None:
        return run.validation.verdict == "fail"
    return validate is not None and validate.verdict == "fail"


def _failure(found: dict[str, StepSummary]) -> str | None:
    """How the run failed (null: it did not, or not yet)."""
    run = _typed(found, "run", RunSummary)
    metrics = _typed(found, "metrics", MetricsSummary)
    failed = run.failed_step if run is not None and run.exit_code >= 2 else _failed_step(found)
    if failed is None and metrics is not None and metrics.status == "failed":
        failed = metrics.failed_step
    if failed is None and run is not None and run.exit_code >= 2:
        failed = "run"
    if failed is None:
        return None
    if failed == "validate" and _stopped_by_validation(_typed(found, "validate", ValidationSummary), run):
        return "stopped by data validation"
    return f"failed at {failed}"


def _decision(found: dict[str, StepSummary]) -> str:
    failure = _failure(found)
    if failure is not None:
        return failure
    run = _typed(found, "run", RunSummary)
    decide = _typed(found, "decide", DecideSummary)
    promote = _typed(found, "promote", PromoteSummary)
    # ranker run's own summary, else the DAG's step files
    promoted = run.promoted if run is not None else promote is not None
    forced = run.forced if run is not None else bool(promote and promote.forced)
    kept = run.kept_champion if run is not None else bool(decide and decide.branch == "keep_champion")
    dry = run.dry_run if run is not None else bool(decide and decide.dry_run)
    rejected = (
        run.decision == "reject" if run is not None else _typed(found, "reject", RejectSummary) is not None
    )
    if promoted:
        return "promoted (forced)" if forced else "promoted"
    if kept:
        return "kept the champion (dry run)" if dry else "kept the champion"
    return "rejected by the gate" if rejected else "in progress"


def _champion_after(found: dict[str, StepSummary]) -> str | None:
    run = _typed(found, "run", RunSummary)
    if run is not None:
        return run.champion
    promote = _typed(found, "promote", PromoteSummary)
    if promote is not None:
        return promote.version
    decide = _typed(found, "decide", DecideSummary)
    return decide.champion if decide is not None else None


def _day(found: dict[str, StepSummary]) -> dt.date | None:
    run = _typed(found, "run", RunSummary)
    pretrain = _typed(found, "pretrain", PretrainSummary)
    window = _typed(found, "window", WindowSummary)
    train = _typed(found, "train", TrainSummary)
    decide = _typed(found, "decide", DecideSummary)
    gate = _typed(found, "gate", GateSummary)
    for day in (
        run.end if run else None,
        pretrain.for_end if pretrain else None,
        window.end if window else None,
        train.window.end if train else None,
        decide.end if decide else None,
        gate.eval_date if gate else None,
    ):
        if day is not None:
            return day
    return None


def read_run(folder: Path) -> RunRow:
    """The row of one run folder."""
    problems: list[str] = []
    found: dict[str, StepSummary] = {}
    for path in sorted(folder.glob("*.json")):
        summary = _read(path, problems)
        if summary is not None:
            found[path.stem] = summary
    train = _typed(found, "train", TrainSummary)
    gate = _typed(found, "gate", GateSummary)
    run = _typed(found, "run", RunSummary)
    pretrain = _typed(found, "pretrain", PretrainSummary)
    hit = gate.candidate.save_hit_at_3 if gate else (train.eval.save_hit_at_3 if train else None)
    candidate = run.version if run and run.version else (train.version if train else None)
    if pretrain is not None and run is None:
        failed = pretrain.failed_step or ("pretrain" if pretrain.exit_code >= 2 else None)
        return RunRow(
            run_id=folder.name,
            day=_day(found),
            kind="pretrain",
            recipe=_recipe(train, problems) if train else Recipe(schedule=pretrain.schedule),
            decision=f"failed at {failed}" if failed else "pretrained base",
            candidate=pretrain.version,
            save_hit_at_3=pretrain.eval.save_hit_at_3 if pretrain.eval else hit,
            champion=None,
            problems=problems,
        )
    return RunRow(
        run_id=folder.name,
        day=_day(found),
        kind="run",
        recipe=_recipe(train, problems),
        decision=_decision(found),
        candidate=candidate,
        save_hit_at_3=hit,
        champion=_champion_after(found),
        problems=problems,
    )


def list_runs(pipeline: Path, *, day: dt.date | None = None, limit: int | None = None) -> RunsListing:
    """Every run folder under ``pipeline``, sorted by day (unknown first) then run id; ``day``
    keeps that day's, ``limit`` the newest N of what is left."""
    folders = sorted(p for p in pipeline.iterdir() if p.is_dir()) if pipeline.is_dir() else []
    rows = [read_run(folder) for folder in folders]
    rows.sort(key=lambda r: (r.day or dt.date.min, r.run_id))
    total = len(rows)
    if day is not None:
        rows = [r for r in rows if r.day == day]
    if limit is not None:
        rows = rows[-limit:] if limit else []
    return RunsListing(pipeline=str(pipeline), total=total, runs=rows)
