"""Study statistics (pure): each cell's change against the 1-epoch joint baseline of the same
(init, window, seed), the spread over seeds, and a verdict on each of the seed's findings."""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import asdict, dataclass

from pydantic import JsonValue

from ranking.study.runner import CellResult
from ranking.study.spec import BASELINE_SCHEDULE, Cell, StudySpec, letters

METRICS = ("save_hit_at_3", "auc", "ne")


def _mean_sd(values: list[float]) -> tuple[float, float]:
    vals = [v for v in values if math.isfinite(v)]
    if not vals:
        return float("nan"), float("nan")
    mean = sum(vals) / len(vals)
    if len(vals) < 2:
        return mean, float("nan")
    return mean, math.sqrt(sum((v - mean) ** 2 for v in vals) / (len(vals) - 1))


@dataclass(frozen=True)
class MetricChange:
    """One metric of a row: each seed's change vs the baseline (%), their mean and sd, and the
    metric's own mean and sd over the seeds."""

    rel_pct_mean: float
    rel_pct_sd: float
    rel_pct_by_seed: list[float]
    mean: float
    sd: float
    n: int


@dataclass(frozen=True)
class RelativeRow:
    """One (init, window, schedule, epochs) of the study against its 1-epoch joint baseline."""

    init: str
    window_days: int
    schedule: str
    epochs: int
    letters: str
    changes: dict[str, MetricChange]
    """metric (METRICS) -> its change"""

    def to_json(self) -> dict[str, JsonValue]:
        """As study.json holds it: each metric's change under the metric's name."""
        head: dict[str, JsonValue] = {
            "init": self.init,
            "window_days": self.window_days,
            "schedule": self.schedule,
            "epochs": self.epochs,
            "letters": self.letters,
        }
        return head | {metric: asdict(change) for metric, change in self.changes.items()}


@dataclass(frozen=True)
class SeedFinding:
    """A finding of the seed next to this study's number for it, and the verdict."""

    init: str
    finding: str
    window_days: int
    schedule: str
    seed_pct: float
    ours_pct_mean: float
    ours_pct_sd: float
    n: int
    verdict: str


def relative_table(results: Mapping[str, CellResult], spec: StudySpec) -> list[RelativeRow]:
    """Rows (init, window, schedule, epochs) with each metric's per-seed change vs the 1-epoch
    joint baseline of the same (init, window, seed), and mean ± sd over seeds.

    save HIT@3 and AUC: relative change in % (higher is better); NE: relative change in %
    (lower is better)."""
    rows: list[RelativeRow] = []
    for init in spec.inits:
        for w in spec.windows:
            for schedule in spec.schedules:
                for epochs in sorted(spec.epochs):
                    changed: dict[str, MetricChange] = {}
                    for metric in METRICS:
                        changes, absolute = [], []
                        for seed in range(spec.seeds):
                            run = results.get(Cell(w, schedule, seed, init).key)
                            base = results.get(Cell(w, BASELINE_SCHEDULE, seed, init).key)
                            if run is None or base is None:
                                continue
                            value = run.eval_by_epoch[epochs - 1].value(metric)
                            ref = base.eval_by_epoch[0].value(metric)
                            absolute.append(value)
                            changes.append(100.0 * (value - ref) / ref if ref else float("nan"))
                        mean, sd = _mean_sd(changes)
                        abs_mean, abs_sd = _mean_sd(absolute)
                        changed[metric] = MetricChange(mean, sd, changes, abs_mean, abs_sd, len(changes))
                    rows.append(RelativeRow(init, w, schedule, epochs, letters(schedule, epochs), changed))
    return rows


# The findings this study checks, as Pinterest Engineering reported them ("Safe and Efficient
# Multi-Epoch Embedding Training", 2026-11-06; docs/study.md): (label, window days or None for the
# study's longest window, schedule, epochs, reported % change in saves vs 1 epoch; NaN = not reported).
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


def seed_comparison(rows: list[RelativeRow], spec: StudySpec) -> list[SeedFinding]:
    """For each init mode, each seed finding next to our number."""
    index = {(r.init, r.window_days, r.schedule, r.epochs): r for r in rows}
    out = []
    default_window = max(spec.windows)
    for init in spec.inits:
        for label, window, schedule, epochs, seed_pct in SEED_FINDINGS:
            w = window or default_window
            row = index.get((init, w, schedule, epochs))
            if row is None:
                continue
            m = row.changes["save_hit_at_3"]
            out.append(
                SeedFinding(
                    init=init,
                    finding=label,
                    window_days=w,
                    schedule=row.letters,
                    seed_pct=seed_pct,
                    ours_pct_mean=m.rel_pct_mean,
                    ours_pct_sd=m.rel_pct_sd,
                    n=m.n,
                    verdict=verdict(seed_pct, m.rel_pct_mean, m.rel_pct_sd, m.n),
                )
            )
    return out
