"""Shared pieces of the study tests: a fixed eval day and a finished run's result."""

from __future__ import annotations

import datetime as dt

from ranking.study.spec import Cell

END = dt.date(2026, 1, 8)


def result(cell: Cell, hits: list[float]) -> dict:
    """What a finished cell records, with save HIT@3 after each epoch (AUC and NE fixed)."""
    return {
        "key": cell.key,
        "eval_by_epoch": [{"save_hit_at_3": h, "auc": 0.7, "ne": 0.9} for h in hits],
    }
