"""The study report: ``study.json`` (everything, per seed and per run), ``study.md`` (tables and a
verdict per seed finding) and ``study.png`` (metric vs epoch, one panel per init x window)."""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from ranking.core.atomic import atomic_path, atomic_write_json, atomic_write_text
from ranking.study.spec import StudySpec
from ranking.study.stats import relative_table, seed_comparison


def _fmt(mean: float, sd: float) -> str:
    if not math.isfinite(mean):
        return "–"
    return f"{mean:+.2f}% ± {sd:.2f}" if math.isfinite(sd) else f"{mean:+.2f}%"


def render_markdown(report: dict[str, Any]) -> str:
    spec = report["spec"]
    lines = [
        f"# Schedule study — eval day {spec['end']}",
        "",
        f"Windows {spec['windows']} days; epochs {spec['epochs']}; schedules {spec['schedules']}; "
        f"{spec['seeds']} seeds; inits {spec['inits']}; pipeline {spec['pipeline']}. "
        f"{report['runs']} training runs ({report['reused']} reused), wall time {report['wall_seconds']:.0f} s.",
        "",
        "Cells: change of save HIT@3 relative to the 1-epoch joint model of the same init, window "
        "and seed, mean ± standard deviation over seeds (per-seed paired differences).",
        "",
    ]
    rows = report["rows"]
    epochs = sorted(spec["epochs"])
    for init in spec["inits"]:
        title = {
            "scratch": "from scratch",
            "warm": "warm-started (1-epoch joint model of the preceding window)",
            "warm_dense": "dense layers warm-started, tables fresh",
        }[init]
        lines += [f"## {init}: {title}", ""]
        lines.append("| window | schedule | " + " | ".join(f"{e} ep" for e in epochs) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in epochs) + " |")
        for w in spec["windows"]:
            for schedule in spec["schedules"]:
                cells = [
                    r
                    for r in rows
                    if r["init"] == init and r["window_days"] == w and r["schedule"] == schedule
                ]
                cells.sort(key=lambda r: r["epochs"])
                vals = [
                    _fmt(r["save_hit_at_3"]["rel_pct_mean"], r["save_hit_at_3"]["rel_pct_sd"]) for r in cells
                ]
                lines.append(f"| {w}d | {schedule} | " + " | ".join(vals) + " |")
        lines += ["", "Absolute values (mean over seeds): save HIT@3 / AUC / NE", ""]
        lines.append("| window | schedule | " + " | ".join(f"{e} ep" for e in epochs) + " |")
        lines.append("| --- | --- | " + " | ".join("---" for _ in epochs) + " |")
        for w in spec["windows"]:
            for schedule in spec["schedules"]:
                cells = sorted(
                    (
                        r
                        for r in rows
                        if r["init"] == init and r["window_days"] == w and r["schedule"] == schedule
                    ),
                    key=lambda r: r["epochs"],
                )
                vals = [
                    f"{r['save_hit_at_3']['mean']:.4f} / {r['auc']['mean']:.4f} / {r['ne']['mean']:.4f}"
                    for r in cells
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
    for c in report["seed_comparison"]:
        seed = f"{c['seed_pct']:+.2f}%" if math.isfinite(c["seed_pct"]) else "–"
        lines.append(
            f"| {c['init']} | {c['finding']} | {c['window_days']}d | {c['schedule']} | {seed} | "
            f"{_fmt(c['ours_pct_mean'], c['ours_pct_sd'])} (n={c['n']}) | {c['verdict']} |"
        )
    lines += ["", "![metric vs epoch](study.png)", ""]
    return "\n".join(lines)


def plot_report(report: dict[str, Any], path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    spec = report["spec"]
    inits, windows = spec["inits"], spec["windows"]
    fig, axes = plt.subplots(
        len(inits), len(windows), figsize=(5 * len(windows), 3.8 * len(inits)), squeeze=False, sharey="row"
    )
    for i, init in enumerate(inits):
        for j, w in enumerate(windows):
            ax = axes[i][j]
            for schedule in spec["schedules"]:
                cells = sorted(
                    (
                        r
                        for r in report["rows"]
                        if r["init"] == init and r["window_days"] == w and r["schedule"] == schedule
                    ),
                    key=lambda r: r["epochs"],
                )
                xs = [r["epochs"] for r in cells]
                ys = [r["save_hit_at_3"]["rel_pct_mean"] for r in cells]
                err = [
                    r["save_hit_at_3"]["rel_pct_sd"] if math.isfinite(r["save_hit_at_3"]["rel_pct_sd"]) else 0
                    for r in cells
                ]
                ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=schedule)
            ax.axhline(0, color="grey", lw=0.8, ls="--")
            ax.set_title(f"{init}, {w}-day window")
            ax.set_xlabel("epochs")
            ax.set_xticks(sorted(spec["epochs"]))
            if j == 0:
                ax.set_ylabel("save HIT@3 vs 1-epoch joint (%)")
            ax.legend(fontsize=8)
    fig.tight_layout()
    try:
        with atomic_path(path) as tmp:
            fig.savefig(tmp, dpi=110, format="png")
    finally:
        plt.close(fig)


def build_report(spec: StudySpec, results: dict[str, dict[str, Any]], wall_seconds: float) -> dict[str, Any]:
    rows = relative_table(results, spec)
    return {
        "spec": spec.to_dict(),
        "rows": rows,
        "seed_comparison": seed_comparison(rows, spec),
        "runs": len(results),
        "reused": sum(1 for r in results.values() if r.get("reused")),
        "wall_seconds": wall_seconds,
        "results": {k: {kk: vv for kk, vv in v.items() if kk != "reused"} for k, v in results.items()},
    }


def write_report(report: dict[str, Any], out_dir: Path) -> dict[str, str]:
    out_dir.mkdir(parents=True, exist_ok=True)
    paths = {
        "json": out_dir / "study.json",
        "markdown": out_dir / "study.md",
        "plot": out_dir / "study.png",
    }
    atomic_write_json(paths["json"], report)
    plot_report(report, paths["plot"])
    atomic_write_text(paths["markdown"], render_markdown(report))
    return {k: str(v) for k, v in paths.items()}
