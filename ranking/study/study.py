"""Schedule study: does the delayed embedding update beat one epoch on *this* data?

Trains every (init, window, schedule, seed) combination from the same starting point on the same
data, evaluates after every epoch on the same eval day, and reports save HIT@3 (AUC, NE) relative
to the 1-epoch joint baseline of the same (init, window, seed), with the spread over seeds.

One training run per cell covers every epoch count: the schedules are prefix-consistent (the first
two epochs of ``delayed`` at 4 epochs are ``delayed`` at 2 epochs, and the learning rate does not
depend on the epoch count), so "metric after epoch e" of a 4-epoch run is the e-epoch result.

Runs are ``ranker train`` subprocesses (the production entry point), up to ``parallel`` at a time;
a finished cell leaves ``result.json`` and is reused when the study is re-run with the same spec.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import json
import logging
import math
import os
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from concurrent.futures import ThreadPoolExecutor, as_completed
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ranking.core.atomic import atomic_write_json, atomic_write_text, read_json
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace

if TYPE_CHECKING:
    from features.validation import WindowChecks

log = logging.getLogger(__name__)

INITS = ("scratch", "warm", "warm_dense")  # warm_dense: warm dense layers, fresh tables
WARM_INITS = ("warm", "warm_dense")
METRICS = ("save_hit_at_3", "auc", "ne")
BASELINE_SCHEDULE = "joint"  # the 1-epoch joint model is the baseline of every comparison
_LETTER = {"delayed": ("F", "J"), "joint": ("J", "J"), "frozen": ("F", "F"), "joint_then_frozen": ("J", "F")}


class StudyError(RankerError):
    """A study could not be planned or one of its runs failed."""


@dataclass(frozen=True)
class StudySpec:
    end: dt.date
    windows: tuple[int, ...] = (10, 20)
    epochs: tuple[int, ...] = (1, 2, 3, 4)
    schedules: tuple[str, ...] = ("joint", "frozen", "delayed", "joint_then_frozen")
    seeds: int = 3
    inits: tuple[str, ...] = ("scratch", "warm")
    # warm start = a 1-epoch joint model trained on the window that ends this many days before
    # ``end`` (default: the window's own length, i.e. the preceding, disjoint window)
    warm_offset_days: int | None = None
    pipeline: str = "semisync"
    batch_size: int = 1024
    model_config: str | None = None  # path to a ModelConfig JSON/YAML

    def __post_init__(self) -> None:
        if not self.windows or min(self.windows) <= 0:
            raise StudyError("windows must be positive day counts")
        if not self.epochs or min(self.epochs) <= 0:
            raise StudyError("epochs must be positive")
        unknown = [s for s in self.schedules if s not in _LETTER]
        if unknown:
            raise StudyError(f"unknown schedules {unknown}: choose from {', '.join(_LETTER)}")
        if BASELINE_SCHEDULE not in self.schedules or 1 not in self.epochs:
            raise StudyError("the study needs the 1-epoch joint baseline: keep 'joint' and epoch 1")
        if self.seeds <= 0:
            raise StudyError("seeds must be > 0")
        bad_inits = [i for i in self.inits if i not in INITS]
        if not self.inits or bad_inits:
            raise StudyError(f"inits must be a non-empty subset of {INITS}, got {self.inits}")
        if self.warm_offset_days is not None and self.warm_offset_days <= 0:
            raise StudyError("warm_offset_days must be > 0")

    @property
    def max_epochs(self) -> int:
        return max(self.epochs)

    def warm_end(self, window_days: int) -> dt.date:
        return self.end - dt.timedelta(days=self.warm_offset_days or window_days)

    def to_dict(self) -> dict[str, Any]:
        d = asdict(self)
        d["end"] = self.end.isoformat()
        return d


@dataclass(frozen=True)
class Cell:
    """One training run of the study (evaluated after every epoch)."""

    window_days: int
    schedule: str
    seed: int
    init: str  # "scratch" | "warm" | "base" (the warm-start model itself)

    @property
    def key(self) -> str:
        return f"{self.init}-w{self.window_days}-{self.schedule}-s{self.seed}"


def schedule_letters(schedule: str, epochs: int) -> str:
    first, rest = _LETTER[schedule]
    return ",".join([first] + [rest] * (epochs - 1))


def plan_cells(spec: StudySpec) -> tuple[list[Cell], list[Cell]]:
    """(warm-start base runs, study cells). Bases run first: warm cells start from them."""
    bases = [
        Cell(w, BASELINE_SCHEDULE, seed, "base")
        for w in spec.windows
        for seed in range(spec.seeds)
        if set(WARM_INITS) & set(spec.inits)
    ]
    cells = [
        Cell(w, schedule, seed, init)
        for init in spec.inits
        for w in spec.windows
        for schedule in spec.schedules
        for seed in range(spec.seeds)
    ]
    return bases, cells


# ------------------------------------------------------------------ pure aggregation


def _mean_sd(values: list[float]) -> tuple[float, float]:
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return float("nan"), float("nan")
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))


def relative_table(results: dict[str, dict[str, Any]], spec: StudySpec) -> list[dict[str, Any]]:
    """Rows (init, window, schedule, epochs) with each metric's per-seed change vs the 1-epoch
    joint baseline of the same (init, window, seed), and mean ± sd over seeds.

    save HIT@3 and AUC: relative change in % (higher is better); NE: relative change in %
    (lower is better)."""
    rows: list[dict[str, Any]] = []
    for init in spec.inits:
        for w in spec.windows:
            for schedule in spec.schedules:
                for epochs in sorted(spec.epochs):
                    row: dict[str, Any] = {
                        "init": init,
                        "window_days": w,
                        "schedule": schedule,
                        "epochs": epochs,
                        "letters": schedule_letters(schedule, epochs),
                    }
                    for metric in METRICS:
                        changes, absolute = [], []
                        for seed in range(spec.seeds):
                            run = results.get(Cell(w, schedule, seed, init).key)
                            base = results.get(Cell(w, BASELINE_SCHEDULE, seed, init).key)
                            if run is None or base is None:
                                continue
                            value = run["eval_by_epoch"][epochs - 1][metric]
                            ref = base["eval_by_epoch"][0][metric]
                            absolute.append(value)
                            changes.append(100.0 * (value - ref) / ref if ref else float("nan"))
                        mean, sd = _mean_sd(changes)
                        abs_mean, abs_sd = _mean_sd(absolute)
                        row[metric] = {
                            "rel_pct_mean": mean,
                            "rel_pct_sd": sd,
                            "rel_pct_by_seed": changes,
                            "mean": abs_mean,
                            "sd": abs_sd,
                            "n": len(changes),
                        }
                    rows.append(row)
    return rows


# The seed's findings (BRIEF §2), as (label, init-agnostic cell, reported % change in saves).
SEED_FINDINGS: tuple[tuple[str, int | None, str, int, float], ...] = (
    ("1 → 2 epochs, everything trained (joint)", None, "joint", 2, -6.0),
    ("embedding table frozen throughout, 3 epochs", None, "frozen", 3, 1.25),
    ("10-day window: frozen through the last epoch (F,F,F)", 10, "frozen", 3, 0.49),
    ("10-day window: joint in epoch 1, frozen after (J,F,F)", 10, "joint_then_frozen", 3, -0.80),
    ("20-day window: delayed update (F,J,J), 3 epochs", 20, "delayed", 3, 1.16),
    ("20-day window: delayed update, 2 epochs", 20, "delayed", 2, float("nan")),
    ("20-day window: delayed update, 4 epochs (saturation)", 20, "delayed", 4, float("nan")),
)


def verdict(seed_pct: float, mean: float, sd: float, n: int) -> str:
    """Does our mean change agree with the seed's sign, and is it distinguishable from noise
    (|mean| > 2 standard errors over seeds)?"""
    if not math.isfinite(mean):
        return "not run"
    if mean == 0:
        return "no change"
    noise = 2 * sd / math.sqrt(n) if n > 1 and math.isfinite(sd) else float("inf")
    clear = abs(mean) > noise
    if not math.isfinite(seed_pct):
        return ("gain" if mean > 0 else "loss") + ("" if clear else " (within noise)")
    same_sign = (mean > 0) == (seed_pct > 0)
    if same_sign and clear:
        return "reproduces"
    if same_sign:
        return "same direction, within noise"
    return "does not reproduce" + ("" if clear else " (within noise)")


def seed_comparison(rows: list[dict[str, Any]], spec: StudySpec) -> list[dict[str, Any]]:
    """For each init mode, each seed finding next to our number."""
    index = {(r["init"], r["window_days"], r["schedule"], r["epochs"]): r for r in rows}
    out = []
    default_window = max(spec.windows)
    for init in spec.inits:
        for label, window, schedule, epochs, seed_pct in SEED_FINDINGS:
            w = window or default_window
            row = index.get((init, w, schedule, epochs))
            if row is None:
                continue
            m = row["save_hit_at_3"]
            out.append(
                {
                    "init": init,
                    "finding": label,
                    "window_days": w,
                    "schedule": row["letters"],
                    "seed_pct": seed_pct,
                    "ours_pct_mean": m["rel_pct_mean"],
                    "ours_pct_sd": m["rel_pct_sd"],
                    "n": m["n"],
                    "verdict": verdict(seed_pct, m["rel_pct_mean"], m["rel_pct_sd"], m["n"]),
                }
            )
    return out


# ------------------------------------------------------------------ running


@dataclass
class StudyRunner:
    """Runs the study's cells as ``ranker train`` subprocesses and collects per-epoch metrics."""

    ws: Workspace
    spec: StudySpec
    study_dir: Path
    parallel: int = 2
    ranker: list[str] = field(default_factory=lambda: [sys.executable, "-m", "ranking.cli"])
    on_progress: Callable[[str, int, int, float], None] | None = None
    # the window checks (the pipeline config's `window` section); None: WindowChecks' defaults
    window_checks: WindowChecks | None = None

    def cell_dir(self, cell: Cell) -> Path:
        return self.study_dir / "runs" / cell.key

    def _fingerprint(self, cell: Cell, window_id: str, warm_from: str | None) -> str:
        spec = {
            "cell": asdict(cell),
            "window_id": window_id,
            "warm_from": warm_from,
            "epochs": self.spec.max_epochs if cell.init != "base" else 1,
            "pipeline": self.spec.pipeline,
            "batch_size": self.spec.batch_size,
            "model_config": _file_digest(self.spec.model_config),
        }
        return hashlib.sha256(json.dumps(spec, sort_keys=True).encode()).hexdigest()[:16]

    def cached(self, cell: Cell, fingerprint: str) -> dict[str, Any] | None:
        path = self.cell_dir(cell) / "result.json"
        if not path.exists():
            return None
        result: dict[str, Any] = read_json(path)
        return result if result.get("fingerprint") == fingerprint else None

    def run_cell(self, cell: Cell, end: dt.date, window_id: str, warm_from: Path | None) -> dict[str, Any]:
        fingerprint = self._fingerprint(cell, window_id, str(warm_from) if warm_from else None)
        hit = self.cached(cell, fingerprint)
        if hit is not None:
            hit["reused"] = True
            return hit
        out = self.cell_dir(cell)
        if out.exists():  # an unfinished or stale run: start it again from scratch
            import shutil

            shutil.rmtree(out)
        epochs = 1 if cell.init == "base" else self.spec.max_epochs
        cmd = [
            *self.ranker,
            "train",
            "--home",
            str(self.ws.root),
            "--end",
            end.isoformat(),
            "--days",
            str(cell.window_days),
            "--schedule",
            schedule_letters(cell.schedule, epochs),
            "--seed",
            str(cell.seed),
            "--pipeline",
            self.spec.pipeline,
            "--batch-size",
            str(self.spec.batch_size),
            "--warm-start",
            str(warm_from) if warm_from else "none",
            "--out",
            str(out),
            "--no-register",
            "--no-progress",
            "--json",
        ]
        if self.spec.model_config:
            cmd += ["--model-config", self.spec.model_config]
        if warm_from is not None:  # explicit: a pipeline config's warm_start_scope must not change a cell
            cmd += ["--warm-start-scope", "dense" if cell.init == "warm_dense" else "all"]
        threads = max(1, (os.cpu_count() or 1) // max(1, self.parallel))
        env = {**os.environ, "OMP_NUM_THREADS": str(threads), "MKL_NUM_THREADS": str(threads)}
        start = time.perf_counter()
        proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
        if proc.returncode != 0:
            tail = proc.stderr.strip().splitlines()[-5:]
            raise StudyError(f"study run {cell.key} failed (exit {proc.returncode}): {' | '.join(tail)}")
        summary = json.loads(proc.stdout.strip().splitlines()[-1])
        result = {
            "cell": asdict(cell),
            "key": cell.key,
            "fingerprint": fingerprint,
            "window_id": window_id,
            "warm_from": str(warm_from) if warm_from else None,
            "eval_by_epoch": [e["eval"] for e in summary["epochs"]],
            "loss_by_epoch": [e["loss"] for e in summary["epochs"]],
            "schedule": summary["schedule"],
            "seconds": time.perf_counter() - start,
            "run_dir": str(out),
        }
        atomic_write_json(out / "result.json", result)
        result["reused"] = False
        return result

    def _run_all(
        self, jobs: Iterable[tuple[Cell, dt.date, str, Path | None]], done: int, total: int
    ) -> tuple[dict[str, dict[str, Any]], int]:
        results: dict[str, dict[str, Any]] = {}
        t0 = time.perf_counter()
        with ThreadPoolExecutor(max_workers=self.parallel) as pool:
            futures = {pool.submit(self.run_cell, *job): job[0] for job in jobs}
            for fut in as_completed(futures):
                cell = futures[fut]
                results[cell.key] = fut.result()
                done += 1
                if self.on_progress:
                    self.on_progress(cell.key, done, total, time.perf_counter() - t0)
        return results, done

    def run(self) -> dict[str, dict[str, Any]]:
        from features.window import build_window

        spec = self.spec
        bases, cells = plan_cells(spec)
        windows: dict[tuple[dt.date, int], str] = {}
        needed = {(spec.end, w) for w in spec.windows}
        needed |= {(spec.warm_end(c.window_days), c.window_days) for c in bases}
        for end, w in sorted(needed):
            windows[(end, w)] = build_window(self.ws, end, w, self.window_checks)["window_id"]
        total = len(bases) + len(cells)
        base_jobs = [
            (c, spec.warm_end(c.window_days), windows[(spec.warm_end(c.window_days), c.window_days)], None)
            for c in bases
        ]
        results, done = self._run_all(base_jobs, 0, total)

        def warm_from(cell: Cell) -> Path | None:
            if cell.init not in WARM_INITS:
                return None
            base = Cell(cell.window_days, BASELINE_SCHEDULE, cell.seed, "base")
            return Path(results[base.key]["run_dir"]) / "model.pt"

        jobs = [(c, spec.end, windows[(spec.end, c.window_days)], warm_from(c)) for c in cells]
        more, _ = self._run_all(jobs, done, total)
        results.update(more)
        return results


def _file_digest(path: str | None) -> str | None:
    if not path:
        return None
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()[:16]


def study_dir_for(ws: Workspace, spec: StudySpec, name: str | None = None) -> Path:
    from ranking.core.workspace import validate_run_id

    return ws.studies / validate_run_id(name or f"study-{spec.end.isoformat()}")


# ------------------------------------------------------------------ report


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
    with_tmp = path.with_name(f".{path.name}.tmp.png")
    fig.savefig(with_tmp, dpi=110)
    plt.close(fig)
    os.replace(with_tmp, path)


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
