"""The study report: ``study.json`` (everything, per seed and per run), ``study.md`` (tables and a
verdict per seed finding) and ``study.png`` (metric vs epoch, one panel per init x window)."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import TypedDict

from pydantic import JsonValue

from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text
from ranking.study.runner import CellResult
from ranking.study.spec import StudySpec, StudySpecRecord
from ranking.study.stats import RelativeRow, SeedFinding, relative_table, seed_comparison


class StudyReportRecord(TypedDict):
    """study.json."""

    spec: StudySpecRecord
    rows: list[dict[str, JsonValue]]
    seed_comparison: list[dict[str, JsonValue]]
    runs: int
    reused: int
    wall_seconds: float
    results: dict[str, dict[str, JsonValue]]


@dataclass(frozen=True)
class StudyReport:
    """The study's report (``build_report``); ``to_json`` is study.json."""

    spec: StudySpec
    rows: list[RelativeRow]
    seed_comparison: list[SeedFinding]
    runs: int
    reused: int
    wall_seconds: float
    results: dict[str, CellResult]

    def to_json(self) -> StudyReportRecord:
        return {
            "spec": self.spec.to_dict(),
            "rows": [r.to_json() for r in self.rows],
            "seed_comparison": [asdict(c) for c in self.seed_comparison],
            "runs": self.runs,
            "reused": self.reused,
            "wall_seconds": self.wall_seconds,
            "results": {key: result.model_dump() for key, result in self.results.items()},
        }


def _fmt(mean: float, sd: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:+.2f}% ± {sd:.2f}" if math.isfinite(sd) else f"{mean:+.2f}%"


def render_markdown(report: StudyReport) -> str:
    spec = report.spec
    lines = [
        f"# Schedule study — eval day {spec.end.isoformat()}",
        "",
        f"Windows {spec.windows} days; epochs {spec.epochs}; schedules {spec.schedules}; "
        f"{spec.seeds} seeds; inits {spec.inits}; pipeline {spec.pipeline}. "
        f"{report.runs} training runs ({report.reused} reused), wall time {report.wall_seconds:.0f} s.",
        "",
        "Cells: change of save HIT@3 relative to the 1-epoch joint model of the same init, window "
        "and seed, mean ± standard deviation over seeds (per-seed paired differences).",
        "",
    ]
    rows = report.rows
    epochs = sorted(spec.epochs)
    for init in spec.inits:
        title = {
            "scratch": "from scratch",
            "warm": "warm-started (1-epoch joint model of the preceding window)",
            "warm_dense": "dense layers warm-started, tables fresh",
        }[init]
        lines += [f"## {init}: {title}", ""]
        lines.append("| window | schedule | " + " | ".join(f"{e} ep" for e in epochs) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in epochs) + " |")
        for w in spec.windows:
            for schedule in spec.schedules:
                cells = _cells(rows, init, w, schedule)
                vals = [
                    _fmt(r.changes["save_hit_at_3"].rel_pct_mean, r.changes["save_hit_at_3"].rel_pct_sd)
                    for r in cells
                ]
                lines.append(f"| {w}d | {schedule} | " + " | ".join(vals) + " |")
        lines += ["", "Absolute values (mean over seeds): save HIT@3 / AUC / NE", ""]
        lines.append("| window | schedule | " + " | ".join(f"{e} ep" for e in epochs) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in epochs) + " |")
        for w in spec.windows:
            for schedule in spec.schedules:
                vals = [
                    " / ".join(f"{r.changes[m].mean:.4f}" for m in ("save_hit_at_3", "auc", "ne"))
                    for r in _cells(rows, init, w, schedule)
                ]
                lines.append(f"| {w}d | {schedule} | " + " | ".join(vals) + " |")
        lines.append("")
    lines += [
        "## The seed's findings, on this data",
        "",
        "Verdict: same sign as the seed and |mean| > 2 standard errors over seeds = reproduces.",
        "",
        "| init | finding | window | schedule | seed | ours (save HIT@3) | verdict |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for c in report.seed_comparison:
        seed = f"{c.seed_pct:+.2f}%" if math.isfinite(c.seed_pct) else "–"
        lines.append(
            f"| {c.init} | {c.finding} | {c.window_days}d | {c.schedule} | {seed} | "
            f"{_fmt(c.ours_pct_mean, c.ours_pct_sd)} (n={c.n}) | {c.verdict} |"
        )
    lines += ["", "![metric vs epoch](study.png)", ""]
    return "\n".join(lines)


def _cells(rows: list[RelativeRow], init: str, window: int, schedule: str) -> list[RelativeRow]:
    """The rows of (init, window, schedule), by epochs."""
    found = [r for r in rows if r.init == init and r.window_days == window and r.schedule == schedule]
    return sorted(found, key=lambda r: r.epochs)


def plot_report(report: StudyReport, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = report.spec
    inits, windows = spec.inits, spec.windows
    fig, axes = plt.subplots(
        len(inits), len(windows), figsize=(5 * len(windows), 3.8 * len(inits)), squeeze=False, sharey="row"
    )
    for i, init in enumerate(inits):
        for j, w in enumerate(windows):
            ax = axes[i][j]
            for schedule in spec.schedules:
                cells = _cells(report.rows, init, w, schedule)
                xs = [r.epochs for r in cells]
                hits = [r.changes["save_hit_at_3"] for r in cells]
                ys = [h.rel_pct_mean for h in hits]
                err = [h.rel_pct_sd if math.isfinite(h.rel_pct_sd) else 0 for h in hits]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=schedule)
            ax.axhline(0, color="grey", lw=0.8, ls="--")
            ax.set_title(f"{init}, {w}-day window")
            ax.set_xlabel("epochs")
            ax.set_xticks(sorted(spec.epochs))
            if j == 0:
                ax.set_ylabel("save HIT@3 vs 1-epoch joint (%)")
            ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)


def build_report(spec: StudySpec, results: Mapping[str, CellResult], wall_seconds: float) -> StudyReport:
    rows = relative_table(results, spec)
    return StudyReport(
        spec=spec,
        rows=rows,
        seed_comparison=seed_comparison(rows, spec),
        runs=len(results),
        reused=sum(1 for r in results.values() if r.reused),
        wall_seconds=wall_seconds,
        results=dict(results),
    )


def write_report(report: StudyReport, out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "study.json",
        "markdown": out_dir / "study.md",
        "plot": out_dir / "study.png",
    }
    atomic_write_json(paths["json"], report.to_json())
    plot_report(report, paths["plot"])
    atomic_write_text(paths["markdown"], render_markdown(report))
    return {k: str(v) for k, v in paths.items()}
