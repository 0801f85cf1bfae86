"""``ranker evaluate``: score a checkpoint on an eval day (save HIT@3, AUC, NE)."""

from __future__ import annotations

import argparse
import datetime as dt
import time
from pathlib import Path

from ranking.cli.common import CommandResult, add_common, parse_date, positive_int, workspace
from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace


def _eval_partition(ws: Workspace, end: dt.date, days: int | None) -> tuple[Path, Path]:
    from ranking.trainer.data import read_window_manifest, window_manifest_path

    if days is not None:
        manifest_path = window_manifest_path(ws, end, days)
    else:
        found = sorted(ws.windows.glob(f"{end.isoformat()}_*d/manifest.json"))
        if not found:
            raise RankerError(f"no window ending {end} under {ws.windows}: build one first")
        manifest_path = found[0]
    manifest = read_window_manifest(manifest_path)
    return manifest.eval.path, manifest_path


def _evaluate(args: argparse.Namespace) -> CommandResult:
    from ranking.trainer.scoring import metrics_of, score_checkpoint, write_scores

    started = time.perf_counter()
    ws = workspace(args)
    model = Path(args.model).expanduser().resolve()
    if model.is_dir():
        model = model / "model.pt"
    eval_path, manifest_path = _eval_partition(ws, args.end, args.days)
    scores = score_checkpoint(model, eval_path, batch_size=args.batch_size)
    metrics = metrics_of(scores).to_dict()
    if args.scores_out is not None:
        write_scores(Path(args.scores_out).expanduser().resolve(), scores)
    summary = {
        "model": str(model),
        "eval_date": args.end.isoformat(),
        "eval_path": str(eval_path),
        "manifest": str(manifest_path),
        "metrics": metrics,  # the name ranking.monitoring.samples reads for an evaluate step
        "duration_seconds": time.perf_counter() - started,
    }
    text = (
        f"{model} on {args.end}: save HIT@3 {metrics['save_hit_at_3']:.4f}  AUC {metrics['auc']:.4f}  "
        f"NE {metrics['ne']:.4f}  ({metrics['rows']} rows)"
    )
    return CommandResult(summary=summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``evaluate`` to ``ranker``."""
    e = sub.add_parser("evaluate", help="score a checkpoint on an eval day: save HIT@3, AUC, NE")
    add_common(e)
    e.add_argument("--model", type=Path, required=True, help="checkpoint file or run folder (model.pt)")
    e.add_argument("--end", type=parse_date, required=True, help="the eval day (a built window's end)")
    e.add_argument("--days", type=positive_int, default=None, help="which window's manifest (default: any)")
    e.add_argument("--scores-out", type=Path, default=None, help="also write the scores parquet here")
    e.add_argument("--batch-size", type=positive_int, default=8192)
    e.set_defaults(handler=_evaluate, step="evaluate")
