"""Shared pieces of the study tests: a fixed eval day and a finished run's result."""

from __future__ import annotations

import datetime as dt

from ranking.study.runner import CellResult, EpochEval
from ranking.study.spec import Cell

END = dt.date(2026, 1, 8)


def result(cell: Cell, hits: list[float]) -> CellResult:
    """What a finished cell records, with save HIT@3 after each epoch (AUC and NE fixed)."""
    return CellResult(
        cell=cell,
        key=cell.key,
        fingerprint="f",
        window_id="w",
        warm_from=None,
        eval_by_epoch=[EpochEval(save_hit_at_3=h, auc=0.7, ne=0.9) for h in hits],
        loss_by_epoch=[0.1 for _ in hits],
        schedule="J",
        seconds=1.0,
        run_dir="runs/x",
    )
