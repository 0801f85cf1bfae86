"""One ``ranker evaluate`` job: score a checkpoint on a built window's eval day (save HIT@3, AUC, NE)."""

from __future__ import annotations

import datetime as dt
import time
from dataclasses import dataclass
from pathlib import Path

from ranking.core.errors import RankerError
from ranking.core.summaries import EvalSummary, Seconds, Summary
from ranking.core.workspace import Workspace


@dataclass(frozen=True)
class EvaluateJob:
    workspace: Workspace
    model: Path  # a checkpoint file, or a run folder holding model.pt
    end: dt.date  # the eval day: a built window's end
    days: int | None = None  # which window's manifest (None: any window ending at ``end``)
    scores_out: Path | None = None  # also write the score frame here
    batch_size: int = 8192


class EvaluateSummary(Summary):
    """``ranker evaluate``: a checkpoint's metrics on a built window's eval day."""

    model: str
    """the checkpoint scored"""
    eval_date: dt.date
    eval_path: str
    """the eval day's partition"""
    manifest: str
    """the window manifest it was found in"""
    metrics: EvalSummary
    """what ranking.monitoring's samples read"""
    duration_seconds: Seconds


def eval_manifest(ws: Workspace, end: dt.date, days: int | None) -> Path:
    """The manifest of the window ending at ``end`` (with ``days``, else the first one found)."""
    if days is not None:
        return ws.window_manifest(end, days)
    found = sorted(ws.windows.glob(f"{end.isoformat()}_*d/manifest.json"))
    if not found:
        raise RankerError(f"no window ending {end} under {ws.windows}: build one first")
    return found[0]


def run_evaluate_job(job: EvaluateJob) -> EvaluateSummary:
    """Score the model on the eval day; the ``evaluate`` step summary."""
    from features.window import read_window_manifest
    from ranking.evaluation.scores import metrics_of, write_scores
    from ranking.trainer.evaluation.scoring import score_checkpoint

    started = time.perf_counter()
    model = job.model.expanduser().resolve()
    if model.is_dir():
        model = model / "model.pt"
    manifest_path = eval_manifest(job.workspace, job.end, job.days)
    eval_path = read_window_manifest(manifest_path).eval.path
    scores = score_checkpoint(model, eval_path, batch_size=job.batch_size)
    if job.scores_out is not None:
        write_scores(job.scores_out.expanduser().resolve(), scores)
    return EvaluateSummary(
        model=str(model),
        eval_date=job.end,
        eval_path=str(eval_path),
        manifest=str(manifest_path),
        metrics=EvalSummary.model_validate(metrics_of(scores).to_dict()),
        duration_seconds=time.perf_counter() - started,
    )
