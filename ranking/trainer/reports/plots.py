"""Training curve: the train loss per step (per epoch for runs before training_curve.json) and the
eval metric per epoch, one PNG beside the run.

Two curves are meant to be compared at a glance: every axis has one fixed range per metric
(widened only when a value falls outside it, and then labelled so), and with labels the title names
the version, run, window and eval day; with the champion's eval metric a dotted line marks it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.core.atomic import atomic_path

if TYPE_CHECKING:
    from ranking.core.summaries import EpochSummary, SliceSummary
    from ranking.trainer.reports.curve_data import TrainingCurve

# one y range per metric, whatever the run: HIT@3 of the synthetic and real feeds sits in 0.1-0.45,
# AUC above 0.5, NE around 1, the BCE loss of a few-percent save rate well under 0.8
AXIS_RANGES: dict[str, tuple[float, float]] = {
    "loss": (0.0, 0.8),
    "save_hit_at_3": (0.0, 0.6),
    "auc": (0.5, 1.0),
    "ne": (0.5, 1.5),
}


@dataclass(frozen=True)
class CurveLabels:
    """What the plot's title names (each part optional: a standalone train has no version yet)."""

    version: str | None = None
    run_id: str | None = None
    window: str | None = None  # e.g. "2026-01-04..2026-01-23 (20 d)"
    eval_date: str | None = None

    def title(self) -> str:
        parts = [
            f"{name} {value}"
            for name, value in (
                ("version", self.version),
                ("run", self.run_id),
                ("window", self.window),
                ("eval day", self.eval_date),
            )
            if value
        ]
        return " | ".join(parts)


# characters of a 9-pt title line that fit the 7-inch (700 px) figures with room to spare (~8 px each)
TITLE_LINE_CHARS = 64


def wrap_title(title: str, width: int = TITLE_LINE_CHARS) -> str:
    """``title``'s ``" | "``-separated parts on lines of at most ``width`` characters (a part longer
    than that broken), so that a long run id, as Airflow's default ones, never runs off the figure."""
    import textwrap

    lines: list[str] = []
    for part in title.split(" | "):
        pieces = textwrap.wrap(part, width, break_long_words=True, break_on_hyphens=False) or [""]
        for piece in pieces:
            if lines and len(lines[-1]) + 3 + len(piece) <= width and piece is pieces[0]:
                lines[-1] += " | " + piece
            else:
                lines.append(piece)
    return "\n".join(lines)


def _center_title(fig: Any, ax: Any) -> None:
    """Center the axes' title on the figure, not on the axes: tick labels on one side shift the
    axes, and a wide title centered on them would run off the other side."""
    middle = ax.transAxes.inverted().transform((fig.bbox.width / 2, 0))[0]
    ax.title.set_x(middle)


def axis_range(metric: str, values: Sequence[float]) -> tuple[float, float, bool]:
    """``(low, high, widened)``: the metric's fixed range, widened to hold every finite value."""
    low, high = AXIS_RANGES.get(metric, (0.0, 1.0))
    finite = [v for v in values if v == v and abs(v) != float("inf")]
    if not finite:
        return low, high, False
    lo, hi = min(low, min(finite)), max(high, max(finite))
    return lo, hi, (lo, hi) != (low, high)


def plot_curve(
    path: Path,
    epochs: Sequence[EpochSummary],
    metric: str = "save_hit_at_3",
    *,
    labels: CurveLabels | None = None,
    champion_metric: float | None = None,
    champion_version: str | None = None,
    curve: TrainingCurve | None = None,
) -> None:
    """Write :func:`curve_figure` as a PNG (atomically) at ``path``."""
    import matplotlib.pyplot as plt

    fig = curve_figure(
        epochs,
        metric,
        labels=labels,
        champion_metric=champion_metric,
        champion_version=champion_version,
        curve=curve,
    )
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def curve_figure(
    epochs: Sequence[EpochSummary],
    metric: str = "save_hit_at_3",
    *,
    labels: CurveLabels | None = None,
    champion_metric: float | None = None,
    champion_version: str | None = None,
    curve: TrainingCurve | None = None,
) -> Any:
    """Left axis: the train loss, per step from ``curve`` (a thin line; frozen epochs shaded, epoch
    boundaries dotted, F/J over each epoch) or, without one, per epoch (markers F/J by phase);
    right axis: eval ``metric`` at each epoch's end and, when given, the champion's value of it on
    the same eval day as a dotted reference line. The x axis counts epochs either way: epoch e's
    values sit at x = e, a step's at its fraction of its epoch."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(7, 4.2), dpi=100)
    if curve is not None and curve.points:
        losses = _plot_steps(ax, curve)
        xs = sorted({p.epoch for p in curve.points} | {e.epoch for e in epochs})
        ax.set_xticks([0, *xs])
    else:
        xs = [e.epoch for e in epochs]
        losses = [e.loss for e in epochs]
        ax.plot(xs, losses, "o-", color="tab:blue", label="train loss (epoch mean)")
        for e in epochs:
            ax.annotate(
                "F" if e.phase == "frozen" else "J",
                (e.epoch, e.loss),
                textcoords="offset points",
                xytext=(0, 6),
                ha="center",
                fontsize=8,
            )
        ax.set_xticks(xs)
    ax.set_xlabel("epoch")
    low, high, widened = axis_range("loss", losses)
    ax.set_ylim(low, high)
    ax.set_ylabel("train loss (BCE)" + (" (range widened)" if widened else ""), color="tab:blue")
    values = [
        (e.epoch, getattr(e.eval, metric)) for e in epochs if e.eval is not None and hasattr(e.eval, metric)
    ]
    if values or champion_metric is not None:
        ax2 = ax.twinx()
        if values:
            ax2.plot(
                [v[0] for v in values], [v[1] for v in values], "s--", color="tab:red", label=f"eval {metric}"
            )
        if champion_metric is not None:
            ax2.axhline(
                champion_metric,
                color="tab:green",
                linestyle=":",
                label=f"champion {champion_version or ''} {champion_metric:.4f}".replace("  ", " "),
            )
        plotted = [v[1] for v in values] + ([champion_metric] if champion_metric is not None else [])
        low, high, widened = axis_range(metric, plotted)
        ax2.set_ylim(low, high)
        ax2.set_ylabel(f"eval {metric}" + (" (range widened)" if widened else ""), color="tab:red")
    # one legend for both axes: every labelled line, the train loss included
    handles = [h for a in fig.axes for h in a.get_lines() if not str(h.get_label()).startswith("_")]
    fig.axes[-1].legend(handles=handles, loc="lower right", fontsize=8)
    title = "training curve (F = frozen tables, J = joint)"
    if labels is not None and labels.title():
        title = wrap_title(labels.title()) + "\n" + title
    ax.set_title(title, fontsize=9)
    fig.tight_layout()
    _center_title(fig, ax)
    return fig


def epoch_spans(curve: TrainingCurve) -> dict[int, tuple[int, int]]:
    """Per epoch of the curve, (steps before it, steps at its end): every epoch ends on a point. An
    epoch whose previous one is missing (a resumed run that lost the file) starts one interval
    before its first point."""
    ends: dict[int, int] = {}
    firsts: dict[int, int] = {}
    for p in curve.points:
        ends[p.epoch] = max(ends.get(p.epoch, 0), p.step)
        firsts[p.epoch] = min(firsts.get(p.epoch, p.step), p.step)
    return {
        epoch: (ends[epoch - 1] if epoch - 1 in ends else max(0, firsts[epoch] - curve.every_steps), end)
        for epoch, end in ends.items()
    }


def _plot_steps(ax: Any, curve: TrainingCurve) -> list[float]:
    """The per-step loss on ``ax`` (x in epochs), the phases and the epoch boundaries; returns the
    plotted losses (for the axis range)."""
    spans = epoch_spans(curve)

    def x_of(epoch: int, step: int) -> float:
        start, end = spans[epoch]
        return epoch - 1 + (step - start) / (end - start) if end > start else float(epoch)

    xs = [x_of(p.epoch, p.step) for p in curve.points]
    losses = [p.loss for p in curve.points]
    ax.plot(
        xs,
        losses,
        "-",
        color="tab:blue",
        linewidth=0.9,
        label="train loss (per step)"
        if curve.every_steps == 1
        else f"train loss (mean of {curve.every_steps} steps)",
    )
    phases = {p.epoch: p.phase for p in curve.points}
    for epoch, phase in sorted(phases.items()):
        if phase == "F":
            ax.axvspan(epoch - 1, epoch, color="tab:gray", alpha=0.12, linewidth=0)
        ax.text(
            epoch - 0.5, 0.97, phase, transform=ax.get_xaxis_transform(), ha="center", va="top", fontsize=8
        )
    last = max(phases)
    for i, epoch in enumerate(e for e in sorted(phases) if e < last):
        ax.axvline(epoch, color="tab:gray", linestyle=":", linewidth=1, label="epoch end" if i == 0 else "_")
    first = min(phases) - 1
    margin = 0.03 * (last - first)  # room for the eval marker at the last epoch's end
    ax.set_xlim(first - margin, last + margin)
    return losses


def plot_slices(
    path: Path, slices: Sequence[SliceSummary], *, tolerance: float | None, title: str | None = None
) -> None:
    """Write :func:`slices_figure` as a PNG (atomically) at ``path``."""
    import matplotlib.pyplot as plt

    fig = slices_figure(slices, tolerance=tolerance, title=title)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png")
    plt.close(fig)


def slices_figure(
    slices: Sequence[SliceSummary], *, tolerance: float | None, title: str | None = None
) -> Any:
    """Who the candidate serves better or worse: each slice's save HIT@3 change vs the champion
    with its interval (a forest plot; the slices the guard judged in black, the others grey, the
    guard's tolerance dashed); without a champion, each slice's HIT@3 of the candidate and the
    heuristic side by side."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = list(slices)[::-1]  # the first slice on top
    names = [f"{s.name} ({s.requests_with_save})" for s in rows]
    fig, ax = plt.subplots(figsize=(7, 0.32 * len(rows) + 1.4), dpi=100)
    ys = list(range(len(rows)))
    compared = [s for s in rows if s.relative_change is not None]
    if compared:
        for y, s in zip(ys, rows, strict=True):
            change = s.relative_change
            if change is None:
                continue
            color = "black" if s.judged else "tab:gray"
            ci = s.ci
            if ci:
                ax.plot(ci, [y, y], "-", color=color, linewidth=1.5)
            ax.plot([change], [y], "o", color=color)
        ax.axvline(0.0, color="tab:green", linewidth=1)
        if tolerance is not None:
            ax.axvline(
                -tolerance, color="tab:red", linestyle="--", linewidth=1, label=f"guard: -{tolerance:g}"
            )
            ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel("save HIT@3 change vs the champion (grey: not judged by the guard)")
    else:
        height = 0.38
        ax.barh([y + height / 2 for y in ys], [s.candidate or 0.0 for s in rows], height, label="candidate")
        if any(s.heuristic is not None for s in rows):
            ax.barh(
                [y - height / 2 for y in ys],
                [s.heuristic or 0.0 for s in rows],
                height,
                label="heuristic",
            )
        ax.legend(loc="lower right", fontsize=8)
        ax.set_xlabel("save HIT@3 of the slice's saved pins")
    ax.set_yticks(ys)
    ax.set_yticklabels(names, fontsize=8)
    ax.set_title((wrap_title(title) + "\n" if title else "") + "slices (requests with a save)", fontsize=9)
    fig.tight_layout()
    _center_title(fig, ax)
    return fig
