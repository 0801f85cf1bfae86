"""``ranker evaluate``: score a checkpoint on an eval day (ranking.trainer.evaluation.evaluate runs it)."""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING

from ranking.cli.common import CommandResult, add_common, config_type, parse_date, path_arg, workspace

if TYPE_CHECKING:
    from ranking.trainer.evaluation.evaluate import EvaluateSummary


def _evaluate(args: argparse.Namespace) -> CommandResult[EvaluateSummary]:
    from ranking.trainer.evaluation.evaluate import EvaluateJob, run_evaluate_job

    summary = run_evaluate_job(
        EvaluateJob(
            workspace=workspace(args),
            model=args.model,
            end=args.end,
            days=args.days,
            scores_out=args.scores_out,
            batch_size=args.batch_size,
        )
    )
    m = summary.metrics
    text = (
        f"{summary.model} on {summary.eval_date}: save HIT@3 {m.save_hit_at_3:.4f}  "
        f"AUC {m.auc:.4f}  NE {m.ne:.4f}  ({m.rows} rows)"
    )
    return CommandResult(summary=summary, text=text)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``evaluate`` to ``ranker``."""
    e = sub.add_parser("evaluate", help="score a checkpoint on an eval day: save HIT@3, AUC, NE")
    add_common(e)
    e.add_argument("--model", type=path_arg, required=True, help="checkpoint file or run folder (model.pt)")
    e.add_argument("--end", type=parse_date, required=True, help="the eval day (a built window's end)")
    e.add_argument(
        "--days", type=config_type("window.days"), default=None, help="which window's manifest (default: any)"
    )
    e.add_argument("--scores-out", type=path_arg, default=None, help="also write the scores parquet here")
    e.add_argument("--batch-size", type=config_type("recipe.batch_size"), default=8192)
    e.set_defaults(handler=_evaluate, step="evaluate")
