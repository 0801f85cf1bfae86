"""One review: plan (from the config's ``[review]``), replay with the backtest engine, weigh the
evidence (``rule``), decide the daily recipe (``switch``), report and export. The windows are
built once before any recipe runs (the engine), a base model once per day and settings for every
recipe on it (``bases``), and recipes replay ``parallel`` at a time.

Layout: ``<home>/backtests/review-<end>/`` (the replay: a re-run of the same review reuses its
finished days; ``review-<end>-candidates/`` for a candidate-only review), ``<home>/reviews/<end>/review.{json,md,png}`` (the dated report),
``<home>/reviews/latest.json`` (the last review's summary), ``<home>/reviews/recipe.json`` and
``history.jsonl`` (``review.recipe = "auto"``: ``switch``).
"""

from __future__ import annotations

import datetime as dt
import math
import os
import time
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.backtest.engine import Backtest
from ranking.backtest.replay import Replayer
from ranking.backtest.spec import BacktestSpec, Recipe, read_recipe
from ranking.config.loader import EffectiveConfig, RawValue
from ranking.config.model import BacktestSection, ReviewSection
from ranking.core import killpoints
from ranking.core.atomic import atomic_write_json
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.review.bases import SharedBases
from ranking.review.rule import (
    RULE,
    Evidence,
    ReviewError,
    days_to_detect,
    decide,
    minimum_detectable_effect,
)
from ranking.review.summary import (
    DelayedUpdateLift,
    Lift,
    RecipeWeight,
    Review,
    SwitchOutcome,
)
from ranking.review.switch import (
    FAILED,
    OK,
    TOO_FEW_DAYS,
    AutoState,
    apply_switch,
    auto_values,
    decide_switch,
    read_state,
)

if TYPE_CHECKING:
    from ranking.backtest.report import BacktestReport
    from ranking.backtest.stats import Comparison

SHIPPED_RECIPES = Path(__file__).resolve().parents[2] / "recipes"
# what the daily recipe is told apart by: how the model trains and its base model
RECIPE_IDENTITY = ("recipe", "pretrain")


class ReviewFailed(RankerError):
    """The replay failed; ``review`` is the failed review's summary (recorded and exported)."""

    def __init__(self, message: str, review: Review) -> None:
        super().__init__(message)
        self.review = review


@dataclass(frozen=True)
class ReviewPlan:
    end: dt.date  # the last eval day
    settings: ReviewSection
    recipes: tuple[Recipe, ...]
    # the config's [backtest]: the CIs' level and seed, and the resamples unless [review] sets them
    bootstrap: BacktestSection

    @property
    def start(self) -> dt.date:
        return self.end - dt.timedelta(days=self.settings.days - 1)

    @property
    def review_id(self) -> str:
        return self.end.isoformat()

    def spec(self) -> BacktestSpec:
        return BacktestSpec(
            start=self.start,
            days=self.settings.days,
            recipes=self.recipes,
            baseline=self.settings.baseline,
            # a candidate-only review replays its days as dry runs (nothing promoted, nothing
            # served): a replay of its own, never reused by a full review of the same days
            name=f"review-{self.review_id}" + ("-candidates" if self.settings.candidate_only else ""),
            bootstrap_samples=(
                self.bootstrap.bootstrap_samples
                if self.settings.bootstrap_samples is None
                else self.settings.bootstrap_samples
            ),
            ci_level=self.bootstrap.ci_level,
            seed=self.bootstrap.seed,
        )


def plan_review(settings: ReviewSection, end: dt.date, bootstrap: BacktestSection) -> ReviewPlan:
    """The review of the ``settings.days`` eval days up to ``end``; ``bootstrap``: the config's
    ``[backtest]``."""
    folder = Path(settings.recipes_dir) if settings.recipes_dir else SHIPPED_RECIPES
    recipes = tuple(read_recipe(name, folder / f"{name}.toml") for name in settings.recipes)
    if settings.recipe == "auto":
        for recipe in recipes:
            auto_values(recipe.name, recipe.values)
    if settings.candidate_only:
        for recipe in recipes:
            if recipe.values.get("recipe.warm_start") == "champion":
                raise ReviewError(
                    f"recipe {recipe.name}: warm-starts from the champion, which a candidate-only review"
                    " never promotes: review it with candidate_only = false"
                )
    return ReviewPlan(end, settings, recipes, bootstrap)


# the effect each recipe's report says how many days it would take to detect
DETECT_EFFECT = 0.01


def _finite(x: float | None) -> bool:
    return x is not None and math.isfinite(x)


def _lift(comparison: Comparison | None, level: float) -> Lift | None:
    """Save HIT@3 lift, its CI, its days and the minimum detectable effect at that many days
    (None where the report's JSON holds null: nothing compared, or not finite)."""
    if not comparison:
        return None
    lift = comparison.relative_change.get("save_hit_at_3")
    ci = comparison.ci.get("save_hit_at_3")
    if lift is None or not math.isfinite(lift) or not ci or not all(_finite(x) for x in ci):
        return None
    days = int(comparison.days)
    low, high = float(ci[0]), float(ci[1])
    mde = minimum_detectable_effect((low, high), level)
    return Lift(
        lift=float(lift),
        ci=[low, high],
        days=days,
        mde=mde,
        days_for_1pct=days_to_detect(mde, days, DETECT_EFFECT),
    )


def weigh(report: BacktestReport, baseline: str, candidate_only: bool) -> dict[str, RecipeWeight]:
    """Per recipe: served and candidate lift over the baseline (the baseline's: 0, [0, 0]) with
    its minimum detectable effect, training seconds per day, failed days and the gate's promotion
    rate, from a backtest report (pure)."""
    from ranking.backtest.report import finite_json

    level = float(report.spec.ci_level)
    out: dict[str, RecipeWeight] = {}
    for name, summary in report.recipes.items():
        days = summary.days or 1
        lifts: dict[str, Lift | None] = {}
        for model, compared in (
            ("served", report.vs_baseline),
            ("candidate", report.candidates_vs_baseline),
        ):
            if model == "served" and candidate_only:
                lifts[model] = None
            elif name == baseline:
                other = [_lift(c, level) for c in compared.values()]
                days_seen = max((x.days for x in other if x), default=0)
                lifts[model] = Lift(lift=0.0, ci=[0.0, 0.0], days=days_seen)
            else:
                lifts[model] = _lift(compared.get(name), level)
        out[name] = RecipeWeight(
            seconds_per_day=summary.total_train_seconds / days,
            failed_days=summary.failed_days,
            promotion_rate=summary.promotion_rate if _finite(summary.promotion_rate) else None,
            served=lifts["served"],
            candidate=lifts["candidate"],
            # the recipe's models against the non-learned heuristic (issue 31)
            vs_heuristic={
                model: _lift(report.vs_heuristic.get(model, {}).get(name), level)
                for model in ("served", "candidate")
            },
            # and against the baseline's, slice by slice (issue 31), as the report's JSON holds them
            slices={
                model: finite_json([asdict(row) for row in found[name]])
                for model, found in report.slices_vs_baseline.items()
                if name != baseline and name in found
            },
        )
    return out


def weigh_delayed_update(report: BacktestReport) -> list[DelayedUpdateLift]:
    """The delayed update's own share: each pair of recipes that differ only in a frozen first
    epoch (``ranking.backtest.compare.delayed_update_pairs``), served and candidate lifts (pure)."""
    level = float(report.spec.ci_level)
    return [
        DelayedUpdateLift.model_validate(
            {
                "with": pair.with_frozen,
                "without": pair.without,
                "served": _lift(pair.comparisons.get("served"), level),
                "candidate": _lift(pair.comparisons.get("candidate"), level),
            }
        )
        for pair in report.delayed_update
    ]


def evidence_of(weighed: Mapping[str, RecipeWeight], model: str) -> list[Evidence]:
    """Recipes with a measured lift and no failed day (a recipe that failed a day is not one to run)."""
    out = []
    for name, w in weighed.items():
        part = w.served if model == "served" else w.candidate
        if part is None or w.failed_days:
            continue
        out.append(Evidence(name, part.lift, (part.ci[0], part.ci[1]), w.seconds_per_day, part.days))
    return out


def running_recipe(daily: EffectiveConfig, candidates: Mapping[str, EffectiveConfig]) -> str | None:
    """The reviewed recipe the daily run trains: the one whose [recipe] and [pretrain] equal the
    daily effective config's (None: the daily recipe is none of them)."""
    want = {s: getattr(daily.config, s) for s in RECIPE_IDENTITY}
    for name, effective in candidates.items():
        if {s: getattr(effective.config, s) for s in RECIPE_IDENTITY} == want:
            return name
    return None


def run_review(
    ws: Workspace,
    plan: ReviewPlan,
    daily: EffectiveConfig,
    base_config: Mapping[str, RawValue],
    base_source: str | None,
    replayer: Replayer,
    *,
    parallel: int | None = None,
    code_version: str = "",
    window_builder: Callable[..., Any] | None = None,
    on_progress: Callable[[str, int, int, float], None] | None = None,
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    run_id: str | None = None,
) -> Review:
    """Replay, weigh, decide; write the dated report and ``latest.json``; the review summary.
    A replay that raises is recorded as a failed review (the daily recipe stays) and re-raised."""
    from ranking.backtest.report import finite_json
    from ranking.review.report import write_report

    started, started_at = time.perf_counter(), time.time()
    shared = SharedBases(replayer)  # a base is pretrained once per day and settings, not per recipe
    bt = _backtest(
        ws,
        plan,
        shared,
        base_config,
        base_source,
        parallel=parallel,
        code_version=code_version,
        window_builder=window_builder,
        on_progress=on_progress,
    )
    current = read_state(ws.root)
    running = running_recipe(daily, {r.recipe.name: r.effective for r in bt.runs})
    review = _new_review(plan, str(bt.folder), running)
    error = _replay(bt, plan, started, review)
    killpoints.reached("review:replayed")
    _switch(ws, plan, current, review, now)
    review.wall_seconds = round(time.perf_counter() - started, 1)
    review.base_pretrains = shared.pretrained
    review = Review.model_validate(finite_json(review.body()))
    review.report = write_report(review, ws.root / "reviews" / plan.review_id)
    killpoints.reached("review:report-written")
    atomic_write_json(ws.root / "reviews" / "latest.json", review.body())
    killpoints.reached("review:latest-written")
    from ranking.review.tracking import track_review

    recipes = [(r.recipe.name, r.folder) for r in bt.runs]
    track_review(
        ws, daily, review, recipes, started=started_at, code_version=code_version or None, run_id=run_id
    )
    if error is not None:
        raise ReviewFailed(
            f"review {plan.review_id} failed (the daily recipe stays): {error}", review
        ) from error
    return review


def _backtest(
    ws: Workspace,
    plan: ReviewPlan,
    shared: SharedBases,
    base_config: Mapping[str, RawValue],
    base_source: str | None,
    *,
    parallel: int | None,
    code_version: str,
    window_builder: Callable[..., Any] | None,
    on_progress: Callable[[str, int, int, float], None] | None,
) -> Backtest:
    """The review's replay: the plan's recipes over the base config without its ``review.`` keys."""
    base = {k: v for k, v in base_config.items() if not k.startswith("review.")}
    extra = {"window_builder": window_builder} if window_builder is not None else {}
    return Backtest(
        ws,
        plan.spec(),
        shared,
        base_config=base,
        base_source=base_source,
        parallel=parallel or plan.settings.parallel or min(len(plan.recipes), os.cpu_count() or 1),
        on_progress=on_progress,
        code_version=code_version,
        **extra,
    )


def _new_review(plan: ReviewPlan, backtest_dir: str, running: str | None) -> Review:
    """The review's summary before the replay: what is reviewed, how, and nothing decided yet."""
    settings = plan.settings
    return Review(
        review_id=plan.review_id,
        start=plan.start.isoformat(),
        end=plan.end.isoformat(),
        days=settings.days,
        min_days=settings.min_days,
        baseline=settings.baseline,
        candidate_only=settings.candidate_only,
        cost_weight=settings.cost_weight,
        min_promotion_rate=settings.min_promotion_rate,
        mode=settings.recipe,
        rule=RULE,
        backtest_dir=backtest_dir,
        running=running,
        recipes={},
        delayed_update=[],
        recommended=None,
        basis=None,
        reason=None,
        error=None,
    )


def _replay(bt: Backtest, plan: ReviewPlan, started: float, review: Review) -> RankerError | None:
    """Replay and weigh the recipes into ``review`` (its recipes, paired days and verdict); a
    replay or weighing that raises makes it a failed review and is returned."""
    settings = plan.settings
    try:
        report = _replay_report(bt, plan, started)
        weighed = weigh(report, settings.baseline, settings.candidate_only)
        evidence = evidence_of(weighed, "candidate" if settings.candidate_only else "served")
        compared = min((e.days for e in evidence if e.recipe != settings.baseline), default=0)
        review.recipes = weighed
        review.delayed_update = weigh_delayed_update(report)
        review.days_compared = compared
        _verdict(review, settings, weighed, evidence, compared)
    except RankerError as exc:
        review.status, review.error = FAILED, str(exc)
        return exc
    return None


def _replay_report(bt: Backtest, plan: ReviewPlan, started: float) -> BacktestReport:
    """Run the replay; its backtest report (every recipe against the baseline)."""
    from ranking.backtest.compare import report_of

    records = bt.run()
    return report_of(bt, records, time.perf_counter() - started, candidate_only=plan.settings.candidate_only)


def _verdict(
    review: Review,
    settings: ReviewSection,
    weighed: Mapping[str, RecipeWeight],
    evidence: list[Evidence],
    compared: int,
) -> None:
    """The review's status and, when it is OK, the recommended recipe, set on ``review`` (pure
    but for it)."""
    if settings.baseline not in {e.recipe for e in evidence}:
        review.status = FAILED
        review.error = f"the baseline {settings.baseline} has no evidence (failed days: {weighed[settings.baseline].failed_days})"
        return
    if compared < settings.min_days:
        review.status = TOO_FEW_DAYS
        review.error = f"{compared} paired days < min_days {settings.min_days}"
        return
    chosen = decide(
        None if settings.candidate_only else evidence,
        evidence_of(weighed, "candidate"),
        {name: w.promotion_rate for name, w in weighed.items()},
        baseline=settings.baseline,
        cost_weight=settings.cost_weight,
        min_promotion_rate=settings.min_promotion_rate,
    )
    review.status = OK
    review.recommended = chosen.recipe
    review.best = chosen.best
    review.basis = chosen.basis
    review.reason = chosen.reason


def _switch(
    ws: Workspace,
    plan: ReviewPlan,
    current: AutoState | None,
    review: Review,
    now: Callable[[], dt.datetime],
) -> None:
    """Decide whether the daily recipe switches (``auto`` mode), apply it, and record it in ``review``."""
    auto = plan.settings.recipe == "auto"
    decision = decide_switch(current, plan.review_id, review.status, review.recommended, auto)
    values = next((dict(r.values) for r in plan.recipes if r.name == decision.recipe), {})
    switched = apply_switch(ws.root, decision, plan.review_id, values, now()) if decision.switch else None
    if switched:
        review.running = decision.recipe
    review.switch = SwitchOutcome(switched=bool(switched), recipe=decision.recipe, reason=decision.reason)
