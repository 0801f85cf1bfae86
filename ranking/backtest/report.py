"""The backtest report: per-recipe summary (pure, from the day records and the paired
comparisons), Markdown, a PNG (served save HIT@3 per day; promotions) and JSON."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from ranking.backtest.gates import ForwardDay, regret_summary
from ranking.backtest.stats import HIGHER_IS_BETTER, METRICS, Comparison
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


def _metric(record: Mapping[str, Any], who: str, metric: str) -> float | None:
    part = record.get(who) or {}
    values = part.get("metrics") or {}
    value = values.get(metric)
    return float(value) if isinstance(value, int | float) else None


def _beat(record: Mapping[str, Any]) -> bool | None:
    """The day's recorded outcome, else (records written before it was kept) from the metrics."""
    if "candidate_beat_served" in record:
        found = record["candidate_beat_served"]
        return None if found is None else bool(found)
    cand, served = _metric(record, "candidate", "save_hit_at_3"), _metric(record, "served", "save_hit_at_3")
    return None if cand is None or served is None else cand > served


def _gate_decision(record: Mapping[str, Any]) -> str | None:
    found = record.get("gate_decision", record.get("decision"))
    return found if isinstance(found, str) else None


REGRET_RULE = (
    "Regret: each day D, the model served (the gate's choice of day D−1) against the better, on day D's "
    "impressions, of the two models that choice was between (the oracle) and against the fresh candidate "
    "of day D−1 (always promote); means over the days with both, as a share of served save HIT@3."
)


def forward_days(records: list[dict[str, Any]]) -> list[ForwardDay]:
    """The days whose record scored the day before's gate choice (``served.forward``)."""
    out = []
    for r in records:
        served = r.get("served") or {}
        forward = served.get("forward")
        if not forward:
            continue
        out.append(
            ForwardDay(
                day=r["day"],
                served=_metric(r, "served", "save_hit_at_3"),
                fresh=forward.get("fresh_save_hit_at_3"),
                alternative=forward.get("other_save_hit_at_3"),
                promoted_fresh=forward.get("promoted_fresh"),
                age_days=served.get("age_days"),
            )
        )
    return out


def recipe_summary(records: list[dict[str, Any]]) -> dict[str, Any]:
    """Promotions, staleness, training time, served/candidate means and the gate's calls."""
    decided = [r for r in records if r.get("decision") is not None]
    promotions = sum(1 for r in records if r.get("promoted"))
    ages = [
        r["served"]["age_days"]
        for r in records
        if r.get("served") and r["served"].get("age_days") is not None
    ]
    served_days = [r for r in records if _metric(r, "served", "save_hit_at_3") is not None]
    # the gate's calls judged by the outcome on the same eval day: did the candidate beat the served model?
    judged = [r for r in records if _beat(r) is not None and _gate_decision(r) in ("pass", "reject")]

    train = [float(r["train_seconds"]) for r in records if isinstance(r.get("train_seconds"), int | float)]
    pretrain = [
        float(r["pretrain_seconds"]) for r in records if isinstance(r.get("pretrain_seconds"), int | float)
    ]
    return {
        "days": len(records),
        "failed_days": [r["day"] for r in records if r.get("exit_code") not in (0, 1)],
        "served_days": len(served_days),
        "served_mean": {m: _mean([_metric(r, "served", m) for r in served_days]) for m in METRICS},  # type: ignore[misc]
        "candidate_mean": {m: _mean([_metric(r, "candidate", m) for r in records]) for m in METRICS},  # type: ignore[misc]
        "promotions": promotions,
        "promotion_rate": promotions / len(decided) if decided else None,
        "longest_staleness_days": max(ages) if ages else None,
        # the daily training plus the base model's pretraining (ranker pretrain), which it needs
        "total_train_seconds": round(sum(train) + sum(pretrain), 1),
        "pretrain_seconds": round(sum(pretrain), 1),
        "pretrains": len(pretrain),
        "regret": regret_summary(forward_days(records)),
        "gate_calls": {
            "judged_days": len(judged),
            "candidate_beat_served": sum(1 for r in judged if _beat(r)),
            "rejected_a_better_candidate": sum(
                1 for r in judged if _gate_decision(r) == "reject" and _beat(r)
            ),
            "promoted_a_worse_candidate": sum(
                1 for r in judged if _gate_decision(r) == "pass" and not _beat(r)
            ),
        },
    }


def finite_json(obj: Any) -> Any:
    """NaN/inf -> None, so the report is strict JSON."""
    if isinstance(obj, float):
        return obj if obj == obj and obj not in (float("inf"), float("-inf")) else None
    if isinstance(obj, dict):
        return {k: finite_json(v) for k, v in obj.items()}
    if isinstance(obj, list | tuple):
        return [finite_json(v) for v in obj]
    return obj


def build_report(
    spec: Mapping[str, Any],
    records: Mapping[str, list[dict[str, Any]]],
    comparisons: Mapping[str, Comparison | None],
    wall_seconds: float,
    candidate_comparisons: Mapping[str, Comparison | None] | None = None,
    heuristic_comparisons: Mapping[str, Mapping[str, Comparison | None]] | None = None,
    slice_comparisons: Mapping[str, Mapping[str, list[dict[str, Any]]]] | None = None,
    delayed_update: Sequence[Mapping[str, Any]] | None = None,
) -> dict[str, Any]:
    """The report's content; ``heuristic_comparisons``: ``{"served"|"candidate": {recipe:
    comparison with the non-learned heuristic}}``; ``slice_comparisons``: ``{"served"|"candidate":
    {recipe: each slice vs the baseline}}``; ``delayed_update``: ``[{"with", "without", "served"|
    "candidate": comparison}]``, the recipes that differ only in a frozen first epoch."""
    return {
        "spec": dict(spec),
        "baseline": spec["baseline"],
        "rules": {
            "day1": DAY1_RULE,
            "regret": REGRET_RULE,
            "ci": CI_RULE.format(level=spec["ci_level"], samples=spec["bootstrap_samples"]),
        },
        "recipes": {name: recipe_summary(days) for name, days in records.items()},
        "vs_baseline": {name: (c.to_dict() if c else None) for name, c in comparisons.items()},
        "candidates_vs_baseline": {
            name: (c.to_dict() if c else None) for name, c in (candidate_comparisons or {}).items()
        },
        "vs_heuristic": {
            who: {name: (c.to_dict() if c else None) for name, c in found.items()}
            for who, found in (heuristic_comparisons or {}).items()
        },
        "slices_vs_baseline": {who: dict(found) for who, found in (slice_comparisons or {}).items()},
        "delayed_update": [
            {
                k: (v.to_dict() if v is not None else None) if k in ("served", "candidate") else v
                for k, v in pair.items()
            }
            for pair in delayed_update or []
        ],
        "days": dict(records),
        "wall_seconds": round(wall_seconds, 1),
    }


def _f(x: Any, digits: int = 4) -> str:
    return "—" if x is None or (isinstance(x, float) and not math.isfinite(x)) else f"{x:.{digits}f}"


def _pct(x: Any) -> str:
    return "—" if x is None or not math.isfinite(x) else f"{100 * x:+.2f}%"


def _ci(ci: list[float] | None) -> str:
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


def _hit_cell(c: Mapping[str, Any] | None) -> str:
    """A comparison's save HIT@3 change, its CI and its days, as a table cell."""
    if not c:
        return "—"
    return f"{_pct(c['relative_change']['save_hit_at_3'])} {_ci(c['ci']['save_hit_at_3'])} over {c['days']} d"


def _heuristic_lines(report: Mapping[str, Any]) -> list[str]:
    """Each recipe's served and candidate models against the non-learned heuristic."""
    found = report.get("vs_heuristic") or {}
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
    for name in report["recipes"]:
        cells = [_hit_cell((found.get(who) or {}).get(name)) for who in ("served", "candidate")]
        lines.append(f"| `{name}` | " + " | ".join(cells) + " |")
    return lines


def delayed_update_lines(pairs: Sequence[Mapping[str, Any]]) -> list[str]:
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
        cells = [_hit_cell(pair.get(who)) for who in ("served", "candidate")]
        lines.append(f"| `{pair['with']}` | `{pair['without']}` | " + " | ".join(cells) + " |")
    return lines


def slice_table(by_recipe: Mapping[str, list[dict[str, Any]]]) -> list[str]:
    """A table of each slice's save HIT@3 change vs the baseline (with its CI), a column per
    recipe; empty when nothing was cut."""
    names = sorted({row["name"] for rows in by_recipe.values() for row in rows})
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


def _slice_lines(report: Mapping[str, Any]) -> list[str]:
    """Each recipe's served and candidate models against the baseline's, slice by slice."""
    lines: list[str] = []
    for who, by_recipe in (report.get("slices_vs_baseline") or {}).items():
        table = slice_table(by_recipe)
        if table:
            lines += [
                "",
                f"Slices ({who} models, `[slices]`): each slice's save HIT@3 against the baseline's {who} model,"
                " its saved pins pooled over the days, paired the same way: who a recipe serves better or worse.",
                "",
                *table,
            ]
    return lines


def render_markdown(report: Mapping[str, Any]) -> str:
    spec = report["spec"]
    base = report["baseline"]
    days = spec["days"]
    recipes = ", ".join(f"`{n}` ({_shown_path(r['file'])})" for n, r in spec["recipes"].items())
    lines = [
        f"# Backtest {spec['id']}: {days} days from {spec['start']}",
        "",
        f"Recipes: {recipes}; baseline `{base}`. Wall time {report['wall_seconds'] / 60:.1f} min.",
        "",
        "Each day replays the daily retrain (`ranker run`: window → train → gate → promote | reject) in the "
        "recipe's own registry; *served* is the recipe's champion before that day's decision, scored on "
        "the day's eval impressions.",
        "",
        f"- {report['rules']['day1']}",
        f"- {report['rules']['ci']}",
        "",
        "## Summary",
        "",
        "| recipe | served days | served save HIT@3 | vs baseline (CI) | AUC vs baseline (CI) | NE vs baseline (CI) "
        "| promotions | longest staleness | training time |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in report["recipes"].items():
        c = report["vs_baseline"].get(name)
        rel = (
            [f"{_pct(c['relative_change'][m])} {_ci(c['ci'][m])} over {c['days']} d" for m in METRICS]
            if c
            else ["(baseline)" if name == base else "— (no common served day)"] * 3
        )
        rate = s["promotion_rate"]
        lines.append(
            f"| `{name}` | {s['served_days']}/{s['days']} | {_f(s['served_mean']['save_hit_at_3'])} | "
            + " | ".join(rel)
            + f" | {s['promotions']} ({'—' if rate is None else f'{rate:.0%}'}) | "
            f"{'—' if s['longest_staleness_days'] is None else str(s['longest_staleness_days']) + ' d'} | "
            f"{s['total_train_seconds'] / 60:.1f} min |"
        )
    if report.get("candidates_vs_baseline"):
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
        for name, s in report["recipes"].items():
            c = report["candidates_vs_baseline"].get(name)
            rel = (
                [f"{_pct(c['relative_change'][m])} {_ci(c['ci'][m])} over {c['days']} d" for m in METRICS]
                if c
                else ["(baseline)" if name == base else "— (no common day)"] * 3
            )
            lines.append(
                f"| `{name}` | {_f(s['candidate_mean']['save_hit_at_3'])} | " + " | ".join(rel) + " |"
            )
    lines += _heuristic_lines(report)
    lines += _slice_lines(report)
    lines += delayed_update_lines(report.get("delayed_update") or [])
    lines += [
        "",
        "The gate's calls, judged on the same eval day (did the candidate's save HIT@3 beat the served model's?):",
        "",
        "| recipe | judged days | candidate beat served | rejected a better candidate | promoted a worse one |",
        "| --- | --- | --- | --- | --- |",
    ]
    for name, s in report["recipes"].items():
        g = s["gate_calls"]
        lines.append(
            f"| `{name}` | {g['judged_days']} | {g['candidate_beat_served']} | "
            f"{g['rejected_a_better_candidate']} | {g['promoted_a_worse_candidate']} |"
        )
    lines += [
        "",
        f"Gate regret. {REGRET_RULE} Staleness: the served model's age in days.",
        "",
        "| recipe | days | served save HIT@3 | oracle | always promote | regret vs oracle | served vs always "
        "promote | staleness median / max | rejected a better one (sizes) | promoted a worse one (sizes) |",
        "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, s in report["recipes"].items():
        r = s.get("regret") or {}
        if not r.get("days"):
            lines.append(f"| `{name}` | 0 | — | — | — | — | — | — | — | — |")
            continue
        lines.append(
            f"| `{name}` | {r['days']} | {_f(r['served_mean'])} | {_f(r['oracle_mean'])} | "
            f"{_f(r['always_promote_mean'])} | {_pct(r['regret_vs_oracle'])} | {_pct(r['vs_always_promote'])} | "
            f"{_days(r['staleness_median_days'])} / {_days(r['staleness_max_days'])} | "
            f"{r['rejected_a_better_candidate']} {_sizes(r['rejected_a_better_candidate_sizes'])} | "
            f"{r['promoted_a_worse_one']} {_sizes(r['promoted_a_worse_one_sizes'])} |"
        )
    lines += ["", "![served save HIT@3 per day](backtest.png)", ""]
    for name, records in report["days"].items():
        lines += [
            f"## `{name}` day by day",
            "",
            "| day | served | age | served HIT@3 | AUC | NE | candidate | cand. HIT@3 | AUC | NE | decision "
            "| failed checks | train s |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for r in records:
            served = r.get("served") or {}
            cand = r.get("candidate") or {}
            decision = r.get("decision") or ("failed" if r.get("exit_code") not in (0, 1) else "—")
            if r.get("promoted"):
                decision += ", promoted"
            age = served.get("age_days")
            lines.append(
                f"| {r['day']} | {served.get('version') or '—'} | {'—' if age is None else age} | "
                + " | ".join(_f(_metric(r, "served", m)) for m in METRICS)
                + f" | {cand.get('version') or '—'} | "
                + " | ".join(_f(_metric(r, "candidate", m)) for m in METRICS)
                + f" | {decision} | {', '.join(r.get('failed_checks') or []) or '—'} | "
                f"{_f(r.get('train_seconds'), 0)} |"
            )
        lines.append("")
    direction = ", ".join(
        f"{m} {'higher' if up else 'lower'} is better" for m, up in HIGHER_IS_BETTER.items()
    )
    lines += [f"Metrics: {direction}.", ""]
    return "\n".join(lines)


def plot_report(report: Mapping[str, Any], path: Path) -> None:
    import datetime as dt

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    names = list(report["days"])
    fig, (top, bottom) = plt.subplots(
        2,
        1,
        figsize=(10, 5.5 + 0.3 * len(names)),
        sharex=True,
        gridspec_kw={"height_ratios": [3, 1 + 0.25 * len(names)]},
    )
    for name in names:
        records = report["days"][name]
        xs = [dt.date.fromisoformat(r["day"]) for r in records]
        ys = [_metric(r, "served", "save_hit_at_3") for r in records]
        top.plot(xs, [math.nan if y is None else y for y in ys], marker="o", label=name)
    top.set_ylabel("served save HIT@3")
    top.set_title(f"backtest {report['spec']['id']}: the model each recipe would have served")
    top.grid(alpha=0.3)
    top.legend()
    for row, name in enumerate(names):
        records = report["days"][name]
        promoted = [dt.date.fromisoformat(r["day"]) for r in records if r.get("promoted")]
        rejected = [dt.date.fromisoformat(r["day"]) for r in records if r.get("decision") == "reject"]
        failed = [dt.date.fromisoformat(r["day"]) for r in records if r.get("exit_code") not in (0, 1)]
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


def write_report(report: Mapping[str, Any], out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "markdown": out_dir / "backtest.md",
        "png": out_dir / "backtest.png",
        "json": out_dir / "backtest.json",
    }
    atomic_write_text(paths["markdown"], render_markdown(report))
    plot_report(report, paths["png"])
    atomic_write_json(paths["json"], report)
    return {k: str(v) for k, v in paths.items()}
