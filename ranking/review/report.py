"""The dated review report: JSON (the review summary), Markdown and a PNG of each recipe's lift
over the baseline (with its CI) against its training time per day."""

from __future__ import annotations

import math
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from ranking.backtest.report import slice_table
from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text


def _pct(x: Any) -> str:
    return "—" if not isinstance(x, int | float) or not math.isfinite(x) else f"{100 * x:+.2f}%"


def _lift(part: Any, mde: bool = False) -> str:
    if not isinstance(part, dict) or part.get("lift") is None:
        return "—"
    lo, hi = part.get("ci") or [None, None]
    detect = ""
    if mde and isinstance(part.get("mde"), int | float) and part["mde"] > 0:
        needed = part.get("days_for_1pct")
        detect = f"; MDE {100 * part['mde']:.2f}%" + (f", 1% in {needed} d" if needed else "")
    return f"{_pct(part['lift'])} [{_pct(lo)}, {_pct(hi)}] ({part.get('days')} d{detect})"


def _rate(x: Any) -> str:
    return "—" if not isinstance(x, int | float) else f"{100 * x:.0f}%"


def render_markdown(review: Mapping[str, Any]) -> str:
    lines = [
        f"# Recipe review {review['review_id']}",
        "",
        f"Eval days {review['start']} .. {review['end']} ({review['days']} days), baseline"
        f" `{review['baseline']}`, {'candidates only' if review['candidate_only'] else 'served and candidates'};"
        f" status **{review['status']}**" + (f": {review['error']}" if review.get("error") else "") + ".",
        "",
        f"Rule: {review['rule']}",
        "",
        "Lifts over the baseline recipe, and over the non-learned heuristic (the pin's smoothed 28-day save"
        " rate): a recipe whose lift over the heuristic holds 0 ranks no better than one line of arithmetic.",
        "",
        "MDE: the minimum detectable effect, the smallest true lift this many days resolve 4 times in 5"
        " (80% power at the CI's level), and the days a 1% lift would take; gate promoted: the share of"
        " the recipe's candidates the gate promoted (the rule counts candidates' lifts only where it"
        f" promoted at least {_rate(review.get('min_promotion_rate'))}).",
        "",
        "| recipe | served lift (CI; MDE) | candidate lift (CI; MDE) | gate promoted | served vs heuristic (CI)"
        " | candidate vs heuristic (CI) | training s/day | failed days |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in (review.get("recipes") or {}).items():
        marks = " **(recommended)**" if review.get("recommended") == name else ""
        marks += " (running)" if review.get("running") == name else ""
        seconds = r.get("seconds_per_day")
        heuristic = r.get("vs_heuristic") or {}
        lines.append(
            f"| `{name}`{marks} | {_lift(r.get('served'), mde=True)} | {_lift(r.get('candidate'), mde=True)} |"
            f" {_rate(r.get('promotion_rate'))} | {_lift(heuristic.get('served'))} | {_lift(heuristic.get('candidate'))} |"
            f" {'—' if seconds is None else f'{seconds:.1f}'} | {len(r.get('failed_days') or [])} |"
        )
    for model in ("served", "candidate"):
        table = slice_table(
            {
                name: r["slices"][model]
                for name, r in (review.get("recipes") or {}).items()
                if model in (r.get("slices") or {})
            }
        )
        if table:
            lines += [
                "",
                f"Slices, {model} models against the baseline's (`[slices]`, saves pooled over the days):",
                "",
                *table,
            ]
    lines += ["", "The delayed update's own share (recipes that differ only in a frozen first epoch):", ""]
    pairs = review.get("delayed_update") or []
    lines += [
        f"- `{p['with']}` vs `{p['without']}`: served {_lift(p.get('served'))}, candidates {_lift(p.get('candidate'))}"
        for p in pairs
    ] or ["- no two reviewed recipes differ only in it: the review does not separate its share"]
    basis = review.get("basis")
    lines += [
        "",
        f"Recommendation: **{review.get('recommended') or '—'}**"
        + (f" (decided on the {basis} lifts)" if basis else "")
        + f" — {review.get('reason') or ''}",
        "",
        f"Daily recipe (review.recipe = {review['mode']}): {review['switch']['reason']}.",
        "",
        f"Wall time {review['wall_seconds']:.0f} s; backtest folder `{review['backtest_dir']}`.",
    ]
    return "\n".join(lines) + "\n"


def render_png(review: Mapping[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for model, marker in (("served", "o"), ("candidate", "s")):
        for name, r in (review.get("recipes") or {}).items():
            part, seconds = r.get(model), r.get("seconds_per_day")
            if not isinstance(part, dict) or part.get("lift") is None or seconds is None:
                continue
            lo, hi = part["ci"]
            ax.errorbar(
                seconds,
                100 * part["lift"],
                yerr=[[100 * (part["lift"] - lo)], [100 * (hi - part["lift"])]],
                fmt=marker,
                capsize=4,
                label=f"{name} ({model})",
            )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("training seconds per day")
    ax.set_ylabel(f"save HIT@3 vs {review['baseline']} (%)")
    ax.set_title(f"Recipe review {review['review_id']}: recommended {review.get('recommended') or '—'}")
    if ax.get_legend_handles_labels()[0]:  # a failed review has no lift to draw
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_report(review: Mapping[str, Any], folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / "review.json", "markdown": folder / "review.md", "png": folder / "review.png"}
    atomic_write_json(paths["json"], dict(review))
    atomic_write_text(paths["markdown"], render_markdown(review))
    render_png(review, paths["png"])
    return {k: str(v) for k, v in paths.items()}
