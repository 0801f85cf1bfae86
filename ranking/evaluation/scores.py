"""Score frames: one row per eval impression, ``request_id, pin_id, saved, score`` (a probability).

The trainer writes them (``eval_scores.parquet`` in a run folder), the gate compares two of them;
neither needs torch to read them, so they live here, beside the metrics.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

from ranking.evaluation.metrics import OfflineMetrics, compute_metrics

if TYPE_CHECKING:
    import pandas as pd

SCORE_COLUMNS: tuple[str, ...] = ("request_id", "pin_id", "saved", "score")


def metrics_of(scores: pd.DataFrame) -> OfflineMetrics:
    """save HIT@3, AUC, NE... of a score frame, grouped by request."""
    return compute_metrics(
        scores["request_id"].to_numpy(), scores["saved"].to_numpy(), scores["score"].to_numpy()
    )


def write_scores(path: Path, scores: pd.DataFrame) -> None:
    """A score frame as parquet, atomically."""
    import pyarrow as pa
    import pyarrow.parquet as pq

    from ranking.core.atomic import atomic_path

    with atomic_path(path) as tmp:
        pq.write_table(pa.Table.from_pandas(scores, preserve_index=False), tmp)
