"""Study statistics (pure): each cell's change against the 1-epoch joint baseline of the same
(init, window, seed), the spread over seeds, and a verdict on each of the seed's findings."""

from __future__ import annotations

import math
from typing import Any

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
                        "letters": letters(schedule, epochs),
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
