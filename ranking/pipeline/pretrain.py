"""``ranker pretrain`` — the base model: trained on the range just before the daily window
(disjoint from it), from scratch, registered, and made the registry's ``base`` alias.

The daily window for eval day ``end`` is ``[end - window_days, end)``; the base's range is
``[end - window_days - gap_days - days, end - window_days - gap_days)``, so no day the daily
model trains on was seen by the base's tables. A daily recipe with ``warm_start = "base"``
starts from it (the delayed update's frozen first epoch then holds a table trained elsewhere,
as in the seed's fine-tuning from a pretrained backbone). The weekly ``ranker_pretrain`` DAG runs
this; ``ranker backtest`` does it every ``pretrain.every_days`` for recipes that use the base.
Steps run through the same runner as ``ranker run``, so their summaries land in
``<home>/pipeline/<run id>/``.
"""

from __future__ import annotations

import datetime as dt
import logging
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Literal

from ranking.config.loader import RawValue
from ranking.config.requests import BASE_INHERITS, BASE_OWN
from ranking.core.errors import RankerError
from ranking.core.results import CommandResult
from ranking.core.summaries import EvalSummary, StepBrief, StepSummary, TrainSummary
from ranking.pipeline.run import StepRunner, registry_env

if TYPE_CHECKING:
    from ranking.config.loader import EffectiveConfig
    from ranking.config.model import PipelineConfig

log = logging.getLogger(__name__)

__all__ = ["BASE_INHERITS", "BASE_OWN", "PretrainPlan", "execute_pretrain", "plan_for", "uses_base"]


def base_params(params: Mapping[str, RawValue]) -> dict[str, RawValue]:
    """A daily run's Params (``--params``) as its first base reads them: the keys the base sets
    itself (``window.*``, every ``recipe.*`` key outside BASE_INHERITS) are dropped, or a run's
    recipe (remedy, schedule, epochs, window) would leak into the weekly base."""
    return {
        key: value
        for key, value in params.items()
        if not key.startswith("window.")
        and not (key.startswith("recipe.") and key.split(".", 2)[1] not in BASE_INHERITS)
    }


@dataclass(frozen=True)
class PretrainPlan:
    end: dt.date  # the eval day of the daily window the base is for
    window_days: int  # the daily window's length
    days: int  # the base's range
    gap_days: int  # the [pretrain] section's, as the schedule, epochs and seed (plan_for)
    schedule: str
    epochs: int
    seed: int
    registry: str | None = None
    reason: str | None = None

    def __post_init__(self) -> None:
        if self.days < 1 or self.window_days < 1 or self.gap_days < 0 or self.epochs < 1:
            raise RankerError("pretrain: days, window days and epochs must be >= 1, gap days >= 0")

    @property
    def base_end(self) -> dt.date:
        """The base range's end (exclusive), also its eval day."""
        try:
            return self.end - dt.timedelta(days=self.window_days + self.gap_days)
        except OverflowError:
            raise RankerError(f"pretrain: no base range before {self.end}") from None

    @property
    def base_start(self) -> dt.date:
        try:
            return self.base_end - dt.timedelta(days=self.days)
        except OverflowError:
            raise RankerError(f"pretrain: no base range before {self.end}") from None


def uses_base(config: Any) -> bool:
    """Whether a pipeline config's daily models (or its full retrains) warm-start from the base."""
    recipe = config.recipe
    return bool(
        recipe.warm_start == "base" or (recipe.incremental and recipe.full_retrain_warm_start == "base")
    )


def plan_for(
    config: PipelineConfig, end: dt.date, registry: str | None = None, reason: str | None = None
) -> PretrainPlan:
    """The pretrain a pipeline config asks for, for the daily window ending ``end``."""
    p = config.pretrain
    return PretrainPlan(
        end=end,
        window_days=config.window.days,
        days=p.days or config.window.days,
        gap_days=p.gap_days,
        schedule=p.schedule,
        epochs=p.epoch_count,
        seed=p.seed,
        registry=registry,
        reason=reason,
    )


def new_pretrain_run_id(end: dt.date) -> str:
    stamp = dt.datetime.now(dt.UTC).strftime("%Y%m%dT%H%M%SZ")
    return f"pretrain__{end.isoformat()}__{stamp}-{secrets.token_hex(2)}"


class PretrainSummary(StepSummary):
    """``ranker pretrain``: the base trained for the daily windows from ``for_end`` on, and the
    ``base`` alias moved to it."""

    step: Literal["pretrain"] = "pretrain"
    for_end: dt.date
    """the eval day of the daily window the base is for"""
    base_range: tuple[dt.date, dt.date]
    """the base's training days [start, end)"""
    days: int
    schedule: str
    epochs: int
    version: str | None
    """the base's registered version (null: it failed before)"""
    previous_base: str | None
    moved: bool
    """``base`` now names ``version`` (false: it already did, or the run failed)"""
    eval: EvalSummary | None = None
    """the base on its own eval day (set once it trained)"""
    failed_step: str | None = None
    steps: list[StepBrief]
    duration_seconds: float


def execute_pretrain(
    plan: PretrainPlan, effective: EffectiveConfig, home: str, run_id: str, runner: StepRunner
) -> CommandResult[PretrainSummary]:
    """Window, train, register, move ``base``; exit 0, or 2 with the failed step named. The
    base trains with :func:`~ranking.config.requests.base_config` of ``effective``: every recipe
    key set for it, so the daily recipe never reaches it."""
    from ranking.config.requests import train_job, window_request
    from ranking.core.workspace import Workspace
    from ranking.pipeline import steps

    ws = Workspace.resolve(home)
    base = base_effective(effective, plan)
    started, started_at = time.perf_counter(), time.time()
    trained: TrainSummary | None = None
    version: str | None = None
    previous: str | None = None
    moved = False
    trained_eval: EvalSummary | None = None
    failed: tuple[str, str] | None = None  # (step, error)
    exit_code = 0
    with registry_env(plan.registry):
        try:
            plan.base_start  # noqa: B018 - refuses a range before year 1
            window = runner.run(
                "window", lambda: steps.window(window_request(base.config, ws, plan.base_end, plan.days))
            )
            if window.exit_code != 0:
                raise _Failed("window", window.error)
            job = train_job(base, ws, plan.base_end, days=plan.days, run_id=run_id, resume=True)
            train = runner.run("train", lambda: steps.train(job))
            if train.exit_code != 0:
                raise _Failed("train", train.error)
            result = train.result.summary if train.result is not None else None
            trained = result if isinstance(result, TrainSummary) else None
            if trained is None or not trained.version:
                raise _Failed("train", "the base run was not registered")
            version, trained_eval = trained.version, trained.eval
            from ranking.registry import Registry

            reg = Registry.for_workspace(ws, plan.registry)
            reason = (
                plan.reason
                or f"pretrained on [{plan.base_start}, {plan.base_end}) for windows from {plan.end}"
            )
            event, before = reg.set_base(version, reason=reason, run_id=run_id)
            previous = before if event is not None else None
            moved = event is not None
        except _Failed as step_failed:
            failed = (
                step_failed.step,
                f"step {step_failed.step} failed: {step_failed.error or 'see its log'}",
            )
            exit_code = 2
        except RankerError as exc:
            failed = ("pretrain", str(exc))
            exit_code = 2
    summary = PretrainSummary(
        run_id=run_id,
        for_end=plan.end,
        base_range=(plan.base_start, plan.base_end),
        days=plan.days,
        schedule=plan.schedule,
        epochs=plan.epochs,
        version=version,
        previous_base=previous,
        moved=moved,
        steps=[o.brief() for o in runner.outcomes],
        duration_seconds=round(time.perf_counter() - started, 3),
    )
    if trained_eval is not None:
        summary = summary.model_copy(update={"eval": trained_eval})
    if failed is not None:
        summary = summary.model_copy(update={"failed_step": failed[0], "error": failed[1]})
    from ranking.tracking.hooks import track_pretrain

    track_pretrain(ws, base, summary, trained, started=started_at)  # never fails the pretrain
    text = (
        f"pretrain {run_id}: base range [{plan.base_start}, {plan.base_end}), version {version or '-'}"
        + (f", base {previous or '(none)'} -> {version}" if moved else "")
        + (f"; {summary.error}" if summary.error else "")
    )
    return CommandResult(summary, exit_code=exit_code, text=text)


class _Failed(Exception):
    def __init__(self, step: str, error: str | None) -> None:
        super().__init__(step)
        self.step = step
        self.error = error


def base_effective(effective: EffectiveConfig, plan: PretrainPlan) -> EffectiveConfig:
    """The effective config the base trains with: the plan's schedule, epochs and seed and every
    other recipe key reset (:func:`~ranking.config.requests.base_config`), each recipe key's
    source recorded as ``pretrain`` unless the base shares it with the daily recipe."""
    from dataclasses import replace

    from ranking.config.requests import base_config

    config = base_config(effective.config, schedule=plan.schedule, epochs=plan.epochs, seed=plan.seed)
    sources = {
        key: (
            "pretrain" if key.startswith("recipe.") and key.split(".", 1)[1] not in BASE_INHERITS else source
        )
        for key, source in effective.sources.items()
    }
    return replace(effective, config=config, sources=sources)
