"""The dated review report: JSON (the review summary), Markdown and a PNG of each recipe's lift
over the baseline (with its CI) against its training time per day."""

from __future__ import annotations

import math
from pathlib import Path
from typing import TYPE_CHECKING

from ranking.backtest.report import slice_table
from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text

if TYPE_CHECKING:
    from ranking.review.summary import Lift, Review


def _pct(x: float | None) -> str:
    return "—" if not isinstance(x, int | float) or not math.isfinite(x) else f"{100 * x:+.2f}%"


def _lift(part: Lift | None, mde: bool = False) -> str:
    if part is None:
        return "—"
    lo, hi = part.ci
    detect = ""
    if mde and part.mde is not None and part.mde > 0:
        needed = part.days_for_1pct
        detect = f"; MDE {100 * part.mde:.2f}%" + (f", 1% in {needed} d" if needed else "")
    return f"{_pct(part.lift)} [{_pct(lo)}, {_pct(hi)}] ({part.days} d{detect})"


def _rate(x: float | None) -> str:
    return "—" if not isinstance(x, int | float) else f"{100 * x:.0f}%"


def render_markdown(review: Review) -> str:
    lines = [
        f"# Recipe review {review.review_id}",
        "",
        f"Eval days {review.start} .. {review.end} ({review.days} days), baseline"
        f" `{review.baseline}`, {'candidates only' if review.candidate_only else 'served and candidates'};"
        f" status **{review.status}**" + (f": {review.error}" if review.error else "") + ".",
        "",
        f"Rule: {review.rule}",
        "",
        "Lifts over the baseline recipe, and over the non-learned heuristic (the pin's smoothed 28-day save"
        " rate): a recipe whose lift over the heuristic holds 0 ranks no better than one line of arithmetic.",
        "",
        "MDE: the minimum detectable effect, the smallest true lift this many days resolve 4 times in 5"
        " (80% power at the CI's level), and the days a 1% lift would take; gate promoted: the share of"
        " the recipe's candidates the gate promoted (the rule counts candidates' lifts only where it"
        f" promoted at least {_rate(review.min_promotion_rate)}).",
        "",
        "| recipe | served lift (CI; MDE) | candidate lift (CI; MDE) | gate promoted | served vs heuristic (CI)"
        " | candidate vs heuristic (CI) | training s/day | failed days |",
        "| --- | --- | --- | --- | --- | --- | --- | --- |",
    ]
    for name, r in review.recipes.items():
        marks = " **(recommended)**" if review.recommended == name else ""
        marks += " (running)" if review.running == name else ""
        seconds = r.seconds_per_day
        heuristic = r.vs_heuristic
        lines.append(
            f"| `{name}`{marks} | {_lift(r.served, mde=True)} | {_lift(r.candidate, mde=True)} |"
            f" {_rate(r.promotion_rate)} | {_lift(heuristic.get('served'))} | {_lift(heuristic.get('candidate'))} |"
            f" {'—' if seconds is None else f'{seconds:.1f}'} | {len(r.failed_days)} |"
        )
    for model in ("served", "candidate"):
        table = slice_table(
            {name: r.slices[model] for name, r in review.recipes.items() if model in r.slices}
        )
        if table:
            lines += [
                "",
                f"Slices, {model} models against the baseline's (`[slices]`, saves pooled over the days):",
                "",
                *table,
            ]
    lines += ["", "The delayed update's own share (recipes that differ only in a frozen first epoch):", ""]
    lines += [
        f"- `{p.with_frozen}` vs `{p.without}`: served {_lift(p.served)}, candidates {_lift(p.candidate)}"
        for p in review.delayed_update
    ] or ["- no two reviewed recipes differ only in it: the review does not separate its share"]
    basis = review.basis
    lines += [
        "",
        f"Recommendation: **{review.recommended or '—'}**"
        + (f" (decided on the {basis} lifts)" if basis else "")
        + f" — {review.reason or ''}",
        "",
        f"Daily recipe (review.recipe = {review.mode}): {review.switch.reason if review.switch else ''}.",
        "",
        f"Wall time {review.wall_seconds:.0f} s; backtest folder `{review.backtest_dir}`.",
    ]
    return "\n".join(lines) + "\n"


def render_png(review: Review, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.5))
    for model, marker in (("served", "o"), ("candidate", "s")):
        for name, r in review.recipes.items():
            part, seconds = r.served if model == "served" else r.candidate, r.seconds_per_day
            if part is None or seconds is None:
                continue
            lo, hi = part.ci
            ax.errorbar(
                seconds,
                100 * part.lift,
                yerr=[[100 * (part.lift - lo)], [100 * (hi - part.lift)]],
                fmt=marker,
                capsize=4,
                label=f"{name} ({model})",
            )
    ax.axhline(0, color="grey", lw=0.8)
    ax.set_xlabel("training seconds per day")
    ax.set_ylabel(f"save HIT@3 vs {review.baseline} (%)")
    ax.set_title(f"Recipe review {review.review_id}: recommended {review.recommended or '—'}")
    if ax.get_legend_handles_labels()[0]:  # a failed review has no lift to draw
        ax.legend(fontsize=8)
    fig.tight_layout()
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=110)
    plt.close(fig)


def write_report(review: Review, folder: Path) -> dict[str, str]:
    folder.mkdir(parents=True, exist_ok=True)
    paths = {"json": folder / "review.json", "markdown": folder / "review.md", "png": folder / "review.png"}
    atomic_write_json(paths["json"], review.body())
    atomic_write_text(paths["markdown"], render_markdown(review))
    render_png(review, paths["png"])
    return {k: str(v) for k, v in paths.items()}
