"""``ranker report --run R``: a pipeline run's report in its training run folder.

Reads the run's step summaries (``<home>/pipeline/R/train.json``, and ``gate.json`` once the
candidate was judged) and writes, beside the model, ``curve.png`` again (labelled with version,
run, window and eval day; the champion's save HIT@3 on the eval day as a reference line; the fixed
axis ranges of ranking/trainer/reports/plots.py), ``slices.png`` once the gate cut slices (each
slice's change vs the champion with its interval) and ``report.md`` (recipe, candidate vs champion
and the heuristic, the slices, the gate table). The retrain DAG's gate task runs it after the gate; ``make demo`` prints the paths.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from ranking.cli.common import CommandResult, add_common, run_id_arg, workspace
from ranking.core.errors import RankerError
from ranking.core.ids import validate_run_id
from ranking.core.summaries import Decision, GateSummary, StepSummary, Summary, TrainSummary
from ranking.core.workspace import Workspace


class ReportSummary(Summary):
    """``ranker report``: where the run's report and plots were written."""

    run_id: str
    report: str
    curve: str
    slices: str | None
    """null: the gate cut no slices (or has not run)"""
    decision: Decision | None
    """the gate's (null: not gated yet)"""


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


def _summary(ws: Workspace, run_id: str, step: str, required: bool) -> StepSummary | None:
    """The run's recorded ``step`` summary through its model (ranking.core.summaries)."""
    from pydantic import ValidationError

    from ranking.core.summaries import not_a_summary, parse_summary

    path = ws.step_summary_path(run_id, step)
    if not path.is_file():
        if required:
            raise RankerError(
                f"run {run_id} has no {step} summary ({path}): was it trained with --run-id {run_id}?"
            )
        return None
    try:
        data = json.loads(path.read_text())
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise RankerError(f"{path} is not a JSON step summary ({exc})") from None
    if not isinstance(data, dict):
        raise RankerError(f"{path} is not a JSON object")
    try:
        return parse_summary(data, step)
    except ValidationError as exc:
        raise RankerError(not_a_summary(path, step, exc)) from None


def _run_folder(train: TrainSummary, run_id: str) -> Path:
    folder = Path(train.run_dir)
    if not (folder / "train_manifest.json").is_file():
        raise RankerError(
            f"run {run_id}'s train summary names no training run folder here (run_dir: {train.run_dir!r})"
        )
    return folder


def _is_base(ws: Workspace, run_id: str, train: TrainSummary) -> bool:
    """Whether the run trained a base model (``ranker pretrain``'s, or the first base ``ranker run``
    pretrains): it recorded a pretrain summary, or the registry's ``base`` alias ever pointed to it."""
    if ws.step_summary_path(run_id, "pretrain").is_file():
        return True
    if train.version is None:
        return False
    from ranking.registry import BASE, Registry

    try:
        return any(e.to_version == train.version for e in Registry.for_workspace(ws).history(BASE))
    except RankerError:  # an unreadable registry: the report is still written, as a daily run's
        return False


def _report(args: argparse.Namespace) -> CommandResult[ReportSummary]:
    from ranking.core.atomic import atomic_write_text
    from ranking.trainer.reports.plots import plot_curve, plot_slices
    from ranking.trainer.reports.run_report import curve_labels, render_report

    ws = workspace(args)
    run_id = validate_run_id(args.run)
    train = _summary(ws, run_id, "train", required=True)
    if not isinstance(train, TrainSummary):
        raise RankerError(
            f"run {run_id}'s train step failed ({getattr(train, 'error', None)}): nothing to report"
        )
    gate = _summary(ws, run_id, "gate", required=False)
    judged = gate if isinstance(gate, GateSummary) else None  # a gate that errored judged nothing
    folder = _run_folder(train, run_id)
    champion = judged.champion if judged is not None else None
    plot_curve(
        folder / "curve.png",
        train.epochs,
        labels=curve_labels(train, run_id),
        champion_metric=champion.save_hit_at_3 if champion is not None else None,
        champion_version=champion.version if champion is not None else None,
    )
    slices_png = None
    if judged is not None and judged.slices:
        slices_png = folder / "slices.png"
        plot_slices(
            slices_png,
            judged.slices,
            tolerance=judged.config.slice_tolerance if judged.config.slice_guard else None,
            title=curve_labels(train, run_id).title(),
        )
    base = judged is None and _is_base(ws, run_id, train)
    atomic_write_text(folder / "report.md", render_report(train, judged, run_id, base=base))
    summary = ReportSummary(
        run_id=run_id,
        report=str(folder / "report.md"),
        curve=str(folder / "curve.png"),
        slices=str(slices_png) if slices_png else None,
        decision=judged.decision if judged is not None else None,
    )
    text = f"report: {summary.report}\ncurve:  {summary.curve}" + (
        f"\nslices: {slices_png}" if slices_png else ""
    )
    return CommandResult(summary, text=text)
