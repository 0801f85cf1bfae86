"""``ranker report --run R``: a pipeline run's report in its training run folder.

Reads the run's step summaries (``<home>/pipeline/R/train.json``, and ``gate.json`` once the
candidate was judged) and writes, beside the model, ``curve.png`` again (labelled with version,
run, window and eval day; the per-step train loss of ``training_curve.json`` when the run has one;
the champion's save HIT@3 on the eval day as a reference line; the fixed axis ranges of
ranking/trainer/reports/plots.py), ``slices.png`` once the gate cut slices (each slice's change vs
the champion with its interval) and ``report.md`` (recipe, candidate vs champion and the
heuristic, the slices, the gate table). The retrain DAG's gate task runs it after the gate, and
``ranker run`` after its gate step (:func:`ranking.trainer.reports.run_report.write_run_report`,
the same function); ``make demo`` prints the paths.
"""

from __future__ import annotations

import argparse

from ranking.cli.common import CommandResult, add_common, run_id_arg, workspace
from ranking.core.ids import validate_run_id
from ranking.trainer.reports.run_report import ReportSummary, write_run_report

__all__ = ["ReportSummary", "register"]


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    """Add ``report`` to ``ranker``."""
    p = sub.add_parser(
        "report",
        help="write a run's report.md and labelled curve.png (champion line, gate table) in its run folder",
    )
    p.add_argument(
        "--run",
        type=run_id_arg,
        required=True,
        metavar="RUN_ID",
        help="the pipeline run (its step summaries)",
    )
    add_common(p)
    p.set_defaults(handler=_report, step="report")


def _report(args: argparse.Namespace) -> CommandResult[ReportSummary]:
    summary = write_run_report(workspace(args), validate_run_id(args.run))
    text = f"report: {summary.report}\ncurve:  {summary.curve}" + (
        f"\nslices: {summary.slices}" if summary.slices else ""
    )
    return CommandResult(summary, text=text)
