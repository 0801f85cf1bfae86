"""The validation report a person reads: ``report.md`` (the verdict, every anomaly with its numbers,
the days and what each was compared with) and ``drift.png`` (the most drifted features of the
newest training day against its history and the eval day against the training window, with the
distributions of the feature that moved most)."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from features.validation.anomalies import KINDS, DayUnderTest
from features.validation.statistics import NumericStatistics, bin_range, merge
from ranking.core.atomic import atomic_path, atomic_write_text
from ranking.core.summaries import ValidationSummary

if TYPE_CHECKING:
    from matplotlib.axes import Axes

PLOTTED = 12


def _number(value: float | None) -> str:
    if value is None:
        return "—"
    return f"{value:.4g}"


def render(summary: ValidationSummary, days: Sequence[DayUnderTest]) -> str:
    c = summary.counts
    lines = [
        f"# Data validation: window {summary.end} ({summary.days} training days)",
        "",
        f"**Verdict: {summary.verdict.upper()}** — {c['fail']} failing, {c['warn']} warning, {c['accepted']} accepted"
        f" anomalies. Schema `{summary.schema_path}`{' (inferred by this run)' if summary.schema_inferred else ''};"
        f" days compared with {'the same weekday of the weeks before' if summary.weekly else 'the days before them'};"
        f" statistics computed now for {summary.statistics_computed} partition(s).",
        "",
        "![the most drifted features](drift.png)",
        "",
        "## Anomalies",
        "",
    ]
    if not summary.anomalies:
        lines.append("None.")
    else:
        lines += [
            "| policy | kind | feature | day | statistic | value | threshold | compared with | detail |",
            "| --- | --- | --- | --- | --- | --- | --- | --- | --- |",
        ]
        for a in summary.anomalies:
            policy = a.policy + (f" ({a.accepted})" if a.accepted else "")
            lines.append(
                f"| {policy} | `{a.kind}` | {a.feature or '—'} | {a.day or '—'} | {a.statistic} | {_number(a.value)}"
                f" | {_number(a.threshold)} | {a.compared} | {a.detail} |"
            )
        kinds = sorted({a.kind for a in summary.anomalies}, key=list(KINDS).index)
        lines += ["", 'What they mean (runbook: docs/reliability.md, "Data validation"):', ""]
        lines += [f"- `{k}`: {KINDS[k]}" for k in kinds]
    lines += [
        "",
        "## Days",
        "",
        "| day | role | rows | requests | label rate | history |",
        "| --- | --- | --- | --- | --- | --- |",
    ]
    for d in days:
        s = d.stats
        lines.append(
            f"| {s.date} | {d.role} | {s.rows:,} | {s.requests:,} | {s.label_rate:.2%} | {d.reference_label} |"
        )
    lines.append("")
    return "\n".join(lines)


def plot(summary: ValidationSummary, days: Sequence[DayUnderTest], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, (bars, dist) = plt.subplots(1, 2, figsize=(12, 5), gridspec_kw={"width_ratios": [3, 2]})
    # fixed margins (room for the feature names): tight_layout measured a third of the plot's time
    fig.subplots_adjust(left=0.3, right=0.98, bottom=0.15, top=0.88, wspace=0.3)
    scores = [(f"{n} (drift)", v) for n, v in summary.drift.items()] + [
        (f"{n} (skew)", v) for n, v in summary.skew.items()
    ]
    scores = sorted(scores, key=lambda kv: -kv[1])[:PLOTTED][::-1]
    if scores:
        bars.barh([k for k, _ in scores], [v for _, v in scores], color="tab:orange")
        bars.tick_params(axis="y", labelsize=7)
    bars.set_xlabel("distance above sampling noise (JS bits | L-inf)")
    bars.set_title("most drifted: newest training day vs history; eval day vs window", fontsize=9)
    bars.grid(alpha=0.3, axis="x")
    _plot_top(dist, summary, days)
    fig.suptitle(f"data validation {summary.end} ({summary.days}d): {summary.verdict}", fontsize=10)
    with atomic_path(path) as tmp:
        fig.savefig(tmp, format="png", dpi=100)
    plt.close(fig)


def _plot_top(ax: Axes, summary: ValidationSummary, days: Sequence[DayUnderTest]) -> None:
    """The newest training day's histogram of its most drifted numeric feature against its
    history's (share of values per fixed bin)."""
    newest = days[-2] if len(days) > 1 else days[-1]
    numeric = [
        (n, v)
        for n, v in summary.drift.items()
        if isinstance(newest.stats.features.get(n), NumericStatistics) and newest.reference
    ]
    if not numeric:
        ax.set_title("no numeric feature with history", fontsize=9)
        return
    name = max(numeric, key=lambda kv: kv[1])[0]
    today = newest.stats.features[name]
    before = merge(newest.reference)[name]
    assert isinstance(today, NumericStatistics) and isinstance(before, NumericStatistics)
    keys = sorted(set(today.histogram) | set(before.histogram), key=lambda k: bin_range(k)[0])
    xs = range(len(keys))
    for stats, label in ((before, newest.reference_label), (today, str(newest.stats.date))):
        total = sum(stats.histogram.values()) or 1
        ax.plot(xs, [stats.histogram.get(k, 0) / total for k in keys], marker="o", ms=3, label=label)
    step = max(1, len(keys) // 8)
    ax.set_xticks(list(xs)[::step], [f"{bin_range(k)[0]:.3g}" for k in keys][::step], fontsize=7)
    ax.set_xlabel("value (bin's lower edge)")
    ax.set_ylabel("share of values")
    ax.set_title(f"{name}", fontsize=9)
    ax.legend(fontsize=7)
    ax.grid(alpha=0.3)


def write_report(folder: Path, summary: ValidationSummary, days: Sequence[DayUnderTest]) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    plot(summary, days, folder / "drift.png")
    atomic_write_text(folder / "report.md", render(summary, days))
