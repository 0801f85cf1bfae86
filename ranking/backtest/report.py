"""The backtest report: per-recipe summary (pure, from the day records and the paired
comparisons), Markdown, a PNG (served save HIT@3 per day; promotions) and JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

from pydantic import BaseModel, JsonValue

from ranking.backtest.day import DayRecord, Number
from ranking.backtest.gates import ForwardDay, Regret, regret_summary
from ranking.backtest.spec import BacktestSpec
from ranking.backtest.stats import HIGHER_IS_BETTER, METRICS, Comparison, SliceComparison
from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text

DAY1_RULE = (
    "A recipe starts with an empty registry: until its first promotion no model is served, and "
    "those days are left out of the served means and the bootstrap (the tables show them as —)."
)
CI_RULE = (
    "Relative change = (mean over days of the recipe's served metric) / (the baseline's) − 1, over the "
    "days both recipes served a model. {level:.0%} CI: paired two-stage bootstrap ({samples} resamples): "
    "days with replacement, then each drawn day's requests with replacement, the same draw for both "
    "recipes (both served models are scored on the same eval requests). NE: lower is better."
)


def _mean(values: list[float]) -> float | None:
    vals = [v for v in values if v is not None and math.isfinite(v)]
    return sum(vals) / len(vals) if vals else None


REGRET_RULE = (
    "Regret: each day D, the model served (the gate's choice of day D−1) against the better, on day D's "
    "impressions, of the two models that choice was between (the oracle) and against the fresh candidate "
    "of day D−1 (always promote); means over the days with both, as a share of served save HIT@3."
)


def forward_days(records: list[DayRecord]) -> list[ForwardDay]:
    """The days whose record scored the day before's gate choice (``served.forward``)."""
    out = []
    for r in records:
        forward = r.served.forward if r.served else None
        if not forward or not r.served:
            continue
        out.append(
            ForwardDay(
                day=r.day,
                served=r.metric("served", "save_hit_at_3"),
                fresh=forward.fresh_save_hit_at_3,
                alternative=forward.other_save_hit_at_3,
                promoted_fresh=forward.promoted_fresh,
                age_days=r.served.age_days,
            )
        )
    return out


class GateCalls(BaseModel):
    """The gate's calls judged by the outcome on the same eval day: did the candidate beat the served model?"""

    judged_days: int
    candidate_beat_served: int
    rejected_a_better_candidate: int
    promoted_a_worse_candidate: int


class RecipeSummary(BaseModel):
    """A recipe's replayed days summed up (``recipe_summary``)."""

    days: int
    failed_days: list[str]
    served_days: int
    served_mean: dict[str, float | None]
    candidate_mean: dict[str, float | None]
    promotions: int
    promotion_rate: float | None
    longest_staleness_days: int | None
    total_train_seconds: Number
    """the daily training plus the base model's pretraining (ranker pretrain), which it needs"""
    pretrain_seconds: Number
    pretrains: int
    regret: Regret
    gate_calls: GateCalls


def recipe_summary(records: list[DayRecord]) -> RecipeSummary:
    """Promotions, staleness, training time, served/candidate means and the gate's calls."""
    decided = [r for r in records if r.decision is not None]
    promotions = sum(1 for r in records if r.promoted)
    ages = [r.served.age_days for r in records if r.served and r.served.age_days is not None]
    served_days = [r for r in records if r.metric("served", "save_hit_at_3") is not None]
    # the gate's calls judged by the outcome on the same eval day: did the candidate beat the served model?
    judged = [r for r in records if r.beat() is not None and r.gate_call() in ("pass", "reject")]

    train = [float(r.train_seconds) for r in records if r.train_seconds is not None]
    pretrain = [float(r.pretrain_seconds) for r in records if r.pretrain_seconds is not None]
    return RecipeSummary(
        days=len(records),
        failed_days=[r.day for r in records if r.failed],
        served_days=len(served_days),
        served_mean={m: _mean([r.metric("served", m) for r in served_days]) for m in METRICS},  # type: ignore[misc]
        candidate_mean={m: _mean([r.metric("candidate", m) for r in records]) for m in METRICS},  # type: ignore[misc]
        promotions=promotions,
        promotion_rate=promotions / len(decided) if decided else None,
        longest_staleness_days=max(ages) if ages else None,
        total_train_seconds=round(sum(train) + sum(pretrain), 1),
        pretrain_seconds=round(sum(pretrain), 1),
        pretrains=len(pretrain),
        regret=regret_summary(forward_days(records)),
        gate_calls=GateCalls(
            judged_days=len(judged),
            candidate_beat_served=sum(1 for r in judged if r.beat()),
            rejected_a_better_candidate=sum(1 for r in judged if r.gate_call() == "reject" and r.beat()),
            promoted_a_worse_candidate=sum(1 for r in judged if r.gate_call() == "pass" and not r.beat()),
        ),
    )


def finite_json(obj: Any) -> Any:
    """NaN/inf -> None, so the report is strict JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


@dataclass(frozen=True)
class DelayedUpdatePair:
    """Two recipes that differ only in a frozen first epoch: the one with it against the one
    without (``ranking.backtest.compare.delayed_update_pairs``), per model the report compares."""

    with_frozen: str
    without: str
    # "served" | "candidate": the comparison (a candidate-only report has no served one)
    comparisons: dict[str, Comparison | None]


@dataclass(frozen=True)
class BacktestReport:
    """What ``ranker backtest`` reports (``build_report``): every recipe's summary, its paired
    comparisons with the baseline, the non-learned heuristic and slice by slice, the delayed
    update's pairs and the day records. ``to_json`` is the report's JSON (backtest.json)."""

    spec: BacktestSpec
    recipes: dict[str, RecipeSummary]
    vs_baseline: dict[str, Comparison | None]
    candidates_vs_baseline: dict[str, Comparison | None]
    # "served" | "candidate" -> recipe -> ...
    vs_heuristic: dict[str, dict[str, Comparison | None]]
    slices_vs_baseline: dict[str, dict[str, list[SliceComparison]]]
    delayed_update: list[DelayedUpdatePair]
    days: dict[str, list[DayRecord]]
    wall_seconds: float
    rules: dict[str, str] = field(init=False)

    def __post_init__(self) -> None:
        rules = {
            "day1": DAY1_RULE,
            "regret": REGRET_RULE,
            "ci": CI_RULE.format(level=self.spec.ci_level, samples=self.spec.bootstrap_samples),
        }
        object.__setattr__(self, "rules", rules)

    def to_json(self) -> dict[str, JsonValue]:
        """The report as strict JSON (NaN and inf: null)."""

        def comparison(c: Comparison | None) -> dict[str, JsonValue] | None:
            return c.to_dict() if c else None

        found: dict[str, JsonValue] = finite_json(
            {
                "spec": self.spec.to_dict(),
                "baseline": self.spec.baseline,
                "rules": self.rules,
                "recipes": {name: s.model_dump() for name, s in self.recipes.items()},
                "vs_baseline": {name: comparison(c) for name, c in self.vs_baseline.items()},
                "candidates_vs_baseline": {
                    name: comparison(c) for name, c in self.candidates_vs_baseline.items()
                },
                "vs_heuristic": {
                    who: {name: comparison(c) for name, c in found.items()}
                    for who, found in self.vs_heuristic.items()
                },
                "slices_vs_baseline": {
                    who: {name: [asdict(row) for row in rows] for name, rows in found.items()}
                    for who, found in self.slices_vs_baseline.items()
                },
                "delayed_update": [
                    {"with": pair.with_frozen, "without": pair.without}
                    | {who: comparison(c) for who, c in pair.comparisons.items()}
                    for pair in self.delayed_update
                ],
                "days": {name: [r.to_json() for r in days] for name, days in self.days.items()},
                "wall_seconds": self.wall_seconds,
            }
        )
        return found


def build_report(
    spec: BacktestSpec,
    records: Mapping[str, list[DayRecord]],
    comparisons: Mapping[str, Comparison | None],
    wall_seconds: float,
    candidate_comparisons: Mapping[str, Comparison | None] | None = None,
    heuristic_comparisons: Mapping[str, Mapping[str, Comparison | None]] | None = None,
    slice_comparisons: Mapping[str, Mapping[str, list[SliceComparison]]] | None = None,
    delayed_update: Sequence[DelayedUpdatePair] | None = None,
) -> BacktestReport:
    """The report of replayed ``records``; ``heuristic_comparisons``: ``{"served"|"candidate":
    {recipe: comparison with the non-learned heuristic}}``; ``slice_comparisons``:
    ``{"served"|"candidate": {recipe: each slice vs the baseline}}``; ``delayed_update``: the
    recipes that differ only in a frozen first epoch."""
    return BacktestReport(
        spec=spec,
        recipes={name: recipe_summary(days) for name, days in records.items()},
        vs_baseline=dict(comparisons),
        candidates_vs_baseline=dict(candidate_comparisons or {}),
        vs_heuristic={who: dict(found) for who, found in (heuristic_comparisons or {}).items()},
        slices_vs_baseline={who: dict(found) for who, found in (slice_comparisons or {}).items()},
        delayed_update=list(delayed_update or []),
        days={name: list(days) for name, days in records.items()},
        wall_seconds=round(wall_seconds, 1),
    )


def _f(x: Any, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:+.2f}%"


def _ci(ci: Any) -> str:
    return "—" if not ci else f"[{100 * ci[0]:+.2f}%, {100 * ci[1]:+.2f}%]"


def _days(x: Any) -> str:
    return "—" if x is None else f"{x:g} d"


def _sizes(sizes: list[float]) -> str:
    return "" if not sizes else "(" + ", ".join(_pct(x) for x in sizes) + ")"


def _shown_path(path: str) -> str:
    """Relative to the working directory when under it (a committed report names repo files)."""
    try:
        return str(Path(path).resolve().relative_to(Path.cwd().resolve()))
    except ValueError:
        return path


def _hit_cell(c: Comparison | None) -> str:
    """A comparison's save HIT@3 change, its CI and its days, as a table cell."""
    if not c:
        return "—"
    return f"{_pct(c.relative_change['save_hit_at_3'])} {_ci(c.ci['save_hit_at_3'])} over {c.days} d"


def _heuristic_lines(report: BacktestReport) -> list[str]:
    """Each recipe's served and candidate models against the non-learned heuristic."""
    found = report.vs_heuristic
    if not found:
        return []
    lines = [
        "",
        "Against the non-learned heuristic (`[heuristic]`: the pin's smoothed 28-day save rate, scored on"
        " each eval day): save HIT@3 of the recipe's models over the heuristic's, paired the same way."
        " A recipe whose lift's interval holds 0 ranks no better than one line of arithmetic.",
        "",
        "| recipe | served vs heuristic (CI) | candidate vs heuristic (CI) |",
        "| --- | --- | --- |",
    ]
    for name in report.recipes:
        cells = [_hit_cell((found.get(who) or {}).get(name)) for who in ("served", "candidate")]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


def delayed_update_lines(pairs: Sequence[DelayedUpdatePair]) -> list[str]:
    """The delayed update's own share: each pair of recipes that differ only in a frozen first
    epoch, the one with it against the one without, served and candidate models."""
    if not pairs:
        return []
    lines = [
        "",
        "The delayed update's own share: recipes that differ only in a frozen first epoch, paired the same way"
        " (a recipe's lift over the baseline can come from its base model or its epochs, not the freeze).",
        "",
        "| with the frozen epoch | without | served (CI) | candidates (CI) |",
        "| --- | --- | --- | --- |",
    ]
    for pair in pairs:
        cells = [_hit_cell(pair.comparisons.get(who)) for who in ("served", "candidate")]
        lines.append(f"| `{pair.with_frozen}` | `{pair.without}` | " + " | ".join(cells) + " |")
    return lines


def slice_table(by_recipe: Mapping[str, Sequence[Mapping[str, JsonValue]]]) -> list[str]:
    """A table of each slice's save HIT@3 change vs the baseline (with its CI), a column per
    recipe; empty when nothing was cut. The rows as the report's JSON holds them (``SliceComparison``;
    the review renders its own copy of them)."""
    names = sorted({str(row["name"]) for rows in by_recipe.values() for row in rows})
    if not names:
        return []
    recipes = list(by_recipe)
    lines = [
        "| slice | " + " | ".join(f"`{r}` vs baseline (CI)" for r in recipes) + " |",
        "| --- |" + " --- |" * len(recipes),
    ]
    for name in names:
        cells = []
        for recipe in recipes:
            row = next((x for x in by_recipe[recipe] if x["name"] == name), None)
            cells.append(
                "—"
                if row is None
                else f"{_pct(row['relative_change'])} {_ci(row['ci'])} ({row['saves']} saves, {row['days']} d)"
            )
        lines.append(f"| {name} | " + " | ".join(cells) + " |")
    return lines


def _slice_lines(report: BacktestReport) -> list[str]:
    """Each recipe's served and candidate models against the baseline's, slice by slice."""
    lines: list[str] = []
    for who, by_recipe in report.slices_vs_baseline.items():
        table = slice_table({name: [asdict(row) for row in rows] for name, rows in by_recipe.items()})
        if table:
            lines += [
                "",
                f"Slices ({who} models, `[slices]`): each slice's save HIT@3 against the baseline's {who} model,"
                " its saved pins pooled over the days, paired the same way: who a recipe serves better or worse.",
                "",
                *table,
            ]
    return lines


def render_markdown(report: BacktestReport) -> str:
    spec = report.spec
    base = spec.baseline
    recipes = ", ".join(f"`{r.name}` ({_shown_path(str(r.path))})" for r in spec.recipes)
    lines = [
        f"# Backtest {spec.id}: {spec.days} days from {spec.start.isoformat()}",
        "",
        f"Recipes: {recipes}; baseline `{base}`. Wall time {report.wall_seconds / 60:.1f} min.",
        "",
        "Each day replays the daily retrain (`ranker run`: window → train → gate → promote | reject) in the "
        "recipe's own registry; *served* is the recipe's champion before that day's decision, scored on "
        "the day's eval impressions.",
        "",
        f"- {report.rules['day1']}",
        f"- {report.rules['ci']}",
        "",
        "## Summary",
        "",
        "| recipe | served days | served save HIT@3 | vs baseline (CI) | AUC vs baseline (CI) | NE vs baseline (CI) "
        "| promotions | longest staleness | training time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in report.recipes.items():
        c = report.vs_baseline.get(name)
        rel = (
            [f"{_pct(c.relative_change[m])} {_ci(c.ci[m])} over {c.days} d" for m in METRICS]
            if c
            else ["(baseline)" if name == base else "— (no common served day)"] * 3
        )
        rate = s.promotion_rate
        lines.append(
            f"| `{name}` | {s.served_days}/{s.days} | {_f(s.served_mean['save_hit_at_3'])} | "
            + " | ".join(rel)
            + f" | {s.promotions} ({'—' if rate is None else f'{rate:.0%}'}) | "
            f"{'—' if s.longest_staleness_days is None else str(s.longest_staleness_days) + ' d'} | "
            f"{s.total_train_seconds / 60:.1f} min |"
        )
    if report.candidates_vs_baseline:
        lines += [
            "",
            "Candidates: each day's freshly trained model (before the gate) against the baseline's candidate of"
            " the same day, paired the same way. This isolates the training recipe from the gate's"
            " choices (a recipe whose candidates warm-start from the base, not the champion, is compared"
            " on equal footing every day).",
            "",
            "| recipe | candidate save HIT@3 | vs baseline (CI) | AUC vs baseline (CI) | NE vs baseline (CI) |",
            "| --- | --- | --- | --- | --- |",
        ]
        for name, s in report.recipes.items():
            c = report.candidates_vs_baseline.get(name)
            rel = (
                [f"{_pct(c.relative_change[m])} {_ci(c.ci[m])} over {c.days} d" for m in METRICS]
                if c
                else ["(baseline)" if name == base else "— (no common day)"] * 3
            )
            lines.append(f"| `{name}` | {_f(s.candidate_mean['save_hit_at_3'])} | " + " | ".join(rel) + " |")
    lines += _heuristic_lines(report)
    lines += _slice_lines(report)
    lines += delayed_update_lines(report.delayed_update)
    lines += [
        "",
        "The gate's calls, judged on the same eval day (did the candidate's save HIT@3 beat the served model's?):",
        "",
        "| recipe | judged days | candidate beat served | rejected a better candidate | promoted a worse one |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, s in report.recipes.items():
        g = s.gate_calls
        lines.append(
            f"| `{name}` | {g.judged_days} | {g.candidate_beat_served} | "
            f"{g.rejected_a_better_candidate} | {g.promoted_a_worse_candidate} |"
        )
    lines += [
        "",
        f"Gate regret. {REGRET_RULE} Staleness: the served model's age in days.",
        "",
        "| recipe | days | served save HIT@3 | oracle | always promote | regret vs oracle | served vs always "
        "promote | staleness median / max | rejected a better one (sizes) | promoted a worse one (sizes) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in report.recipes.items():
        r = s.regret
        if not r.days:
            lines.append(f"| `{name}` | 0 | — | — | — | — | — | — | — | — |")
            continue
        lines.append(
            f"| `{name}` | {r.days} | {_f(r.served_mean)} | {_f(r.oracle_mean)} | "
            f"{_f(r.always_promote_mean)} | {_pct(r.regret_vs_oracle)} | {_pct(r.vs_always_promote)} | "
            f"{_days(r.staleness_median_days)} / {_days(r.staleness_max_days)} | "
            f"{r.rejected_a_better_candidate} {_sizes(r.rejected_a_better_candidate_sizes)} | "
            f"{r.promoted_a_worse_one} {_sizes(r.promoted_a_worse_one_sizes)} |"
        )
    lines += ["", "![served save HIT@3 per day](backtest.png)", ""]
    for name, records in report.days.items():
        lines += [
            f"## `{name}` day by day",
            "",
            "| day | served | age | served HIT@3 | AUC | NE | candidate | cand. HIT@3 | AUC | NE | decision "
            "| failed checks | train s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for day in records:
            decision = day.decision or ("failed" if day.failed else "—")
            if day.promoted:
                decision += ", promoted"
            age = day.served.age_days if day.served else None
            lines.append(
                f"| {day.day} | {(day.served.version if day.served else None) or '—'} | {'—' if age is None else age} | "
                + " | ".join(_f(day.metric("served", m)) for m in METRICS)
                + f" | {(day.candidate.version if day.candidate else None) or '—'} | "
                + " | ".join(_f(day.metric("candidate", m)) for m in METRICS)
                + f" | {decision} | {', '.join(day.failed_checks) or '—'} | "
                f"{_f(day.train_seconds, 0)} |"
            )
        lines.append("")
    direction = ", ".join(
        f"{m} {'higher' if up else 'lower'} is better" for m, up in HIGHER_IS_BETTER.items()
    )
    lines += [f"Metrics: {direction}.", ""]
    return "\n".join(lines)


def plot_report(report: BacktestReport, path: Path) -> None:
    import datetime as dt

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report.days)
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(10, 5.5 + 0.3 * len(names)),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1 + 0.25 * len(names)]},
    )
    for name in names:
        records = report.days[name]
        xs = [dt.date.fromisoformat(r.day) for r in records]
        ys = [r.metric("served", "save_hit_at_3") for r in records]
        top.plot(xs, [math.nan if y is None else y for y in ys], marker="o", label=name)
    top.set_ylabel("served save HIT@3")
    top.set_title(f"backtest {report.spec.id}: the model each recipe would have served")
    top.grid(alpha=0.3)
    top.legend()
    for row, name in enumerate(names):
        records = report.days[name]
        promoted = [dt.date.fromisoformat(r.day) for r in records if r.promoted]
        rejected = [dt.date.fromisoformat(r.day) for r in records if r.decision == "reject"]
        failed = [dt.date.fromisoformat(r.day) for r in records if r.failed]
        bottom.scatter(
            promoted,
            [row] * len(promoted),
            marker="^",
            color="tab:green",
            label="promoted" if row == 0 else None,
        )
        bottom.scatter(
            rejected,
            [row] * len(rejected),
            marker="x",
            color="tab:red",
            label="rejected" if row == 0 else None,
        )
        bottom.scatter(
            failed, [row] * len(failed), marker="s", color="black", label="failed" if row == 0 else None
        )
    bottom.set_yticks(range(len(names)), names)
    bottom.set_ylim(-0.5, len(names) - 0.5)
    bottom.set_title("gate decisions (promotions)")
    bottom.legend(loc="upper left", fontsize="small", ncol=3)
    fig.autofmt_xdate()
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_report(report: BacktestReport, out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out_dir / "backtest.md",
        "png": out_dir / "backtest.png",
        "json": out_dir / "backtest.json",
    }
    atomic_write_text(paths["markdown"], render_markdown(report))
    plot_report(report, paths["png"])
    atomic_write_json(paths["json"], report.to_json())
    return {k: str(v) for k, v in paths.items()}


class Change(BaseModel):
    """A comparison in brief: the relative change of each metric, its CI and the paired days."""

    relative_change: dict[str, float]
    ci: dict[str, list[float] | None]
    days: int

    @classmethod
    def of(cls, c: Comparison | None) -> Change | None:
        return None if c is None else cls(relative_change=c.relative_change, ci=c.ci, days=c.days)


class BacktestSummary(BaseModel):
    """What ``ranker backtest`` prints (``--json``): the report in brief and where it is; a
    backtest whose days failed adds them and the error line."""

    backtest_dir: str
    report: dict[str, str]
    """markdown, png, json: the report's files"""
    baseline: str
    recipes: dict[str, RecipeSummary]
    vs_baseline: dict[str, Change | None]
    candidates_vs_baseline: dict[str, Change | None]
    wall_seconds: float
    failed_days: dict[str, list[str]] | None = None
    error: str | None = None
