"""The evaluate job (run_evaluate_job): which window's eval day, the summary, the scores file."""

from __future__ import annotations

import shutil
from pathlib import Path

import pandas as pd
import pytest

from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.evaluation.scores import metrics_of
from ranking.trainer.evaluation.evaluate import EvaluateJob, eval_manifest, run_evaluate_job
from ranking.trainer.evaluation.scoring import score_checkpoint
from tests.trainer.conftest import DAYS, END


def test_the_eval_day_comes_from_the_named_window_else_any_window_ending_there(
    tmp_path: Path, window_home: Path
) -> None:
    ws = Workspace(tmp_path)
    shutil.copytree(window_home / "windows", ws.windows)
    assert eval_manifest(ws, END, DAYS) == ws.window_manifest(END, DAYS)
    assert eval_manifest(ws, END, 99) == ws.window_manifest(END, 99)  # named: read (and refused) later
    assert eval_manifest(ws, END, None) == ws.window_manifest(END, DAYS)
    with pytest.raises(RankerError, match="no window ending 2026-11-11"):
        eval_manifest(ws, END.replace(day=11), None)


def test_evaluate_reports_the_metrics_of_the_scores_it_writes(
    tmp_path: Path, window_home: Path, trained: Path, manifest
) -> None:  # type: ignore[no-untyped-def]
    out = tmp_path / "scores.parquet"
    job = EvaluateJob(
        workspace=Workspace(window_home), model=trained, end=END, scores_out=out, batch_size=333
    )
    summary = run_evaluate_job(job)
    assert summary.model == str(trained / "model.pt") and summary.eval_date == END
    assert summary.eval_path == str(manifest.eval.path) and summary.manifest == str(manifest.path)
    scores = pd.read_parquet(out)
    assert summary.metrics.body() == metrics_of(scores).to_dict()
    assert (
        summary.metrics.body()
        == metrics_of(score_checkpoint(trained / "model.pt", manifest.eval.path)).to_dict()
    )
    assert summary.metrics.rows == manifest.eval.rows and summary.duration_seconds > 0
