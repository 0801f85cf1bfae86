"""A training run's report for an operator: ``report.md`` beside ``curve.png`` in the run folder.

Built from the run's step summaries (``train`` and, once judged, ``gate``): which recipe ran, the
candidate against the champion on the eval day, and the gate table (every check with its value,
threshold and verdict). :func:`render_report` and :func:`curve_labels` are pure;
:func:`write_run_report` reads a pipeline run's summaries and writes the files, for ``ranker
report`` (the DAG's gate task runs it) and for ``ranker run`` after its gate step.
"""

from __future__ import annotations

import json
import logging
from pathlib import Path

from ranking.core.errors import RankerError
from ranking.core.summaries import (
    Decision,
    EvalSummary,
    GateSummary,
    SliceSummary,
    StepSummary,
    Summary,
    TrainSummary,
)
from ranking.core.workspace import Workspace
from ranking.trainer.reports.plots import CurveLabels

log = logging.getLogger(__name__)

METRICS = (("save_hit_at_3", "save HIT@3"), ("auc", "AUC"), ("ne", "normalized entropy"))


def curve_labels(train: TrainSummary, run_id: str) -> CurveLabels:
    """Version, run, window (first..last training day, length) and eval day of a train summary."""
    dates = train.window.train_dates
    span = f"{dates[0]}..{dates[-1]} ({len(dates)} d)" if dates else None
    return CurveLabels(
        version=train.version,
        run_id=run_id,
        window=span,
        eval_date=str(train.window.eval_date or train.window.end),
    )


def outcome(gate: GateSummary | None, *, base: bool = False) -> str:
    if base:
        return "a base model (not gated: a base is not a daily candidate)"
    if gate is None:
        return "not gated yet"
    return "passed the gate" if gate.decision == "pass" else "REJECTED by the gate"


def plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'' if count == 1 else 's'}"


def _metric(model: EvalSummary | None, key: str) -> float | int | str | None:
    return getattr(model, key, None) if model is not None else None


def render_report(train: TrainSummary, gate: GateSummary | None, run_id: str, *, base: bool = False) -> str:
    """The markdown report of one run (``gate`` None: trained, not judged yet; ``base``: a
    pretrain's base model, which the gate never judges)."""
    labels = curve_labels(train, run_id)
    warm = train.warm_start
    version = train.version or "(not registered)"
    lines = [
        f"# Run {run_id}: {version}, {outcome(gate, base=base)}",
        "",
        f"- eval day: {labels.eval_date or '?'}; window: {labels.window or '?'}",
        f"- recipe: schedule {train.schedule or '?'}, {plural(len(train.epochs or []), 'epoch')}, "
        f"pipeline {train.pipeline or '?'}, warm start {warm.source or 'none'}"
        + (f" (scope {warm.scope})" if warm.scope else ""),
        "",
        "![training curve](curve.png)",
        "",
    ]
    if gate is None:
        lines += ["| metric | candidate |", "| --- | --- |"]
        lines += [f"| {label} | {_number(_metric(train.eval, key))} |" for key, label in METRICS]
        return "\n".join(lines) + "\n"
    candidate, champion, heuristic = gate.candidate, gate.champion, gate.heuristic
    champion_name = champion.version if champion is not None else "none (first run)"
    lines += [
        f"## Candidate vs champion on {gate.eval_date or labels.eval_date}",
        "",
        f"| metric | candidate {candidate.version or version} | champion {champion_name}"
        f" | heuristic {heuristic.name if heuristic is not None else '(not scored)'} |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {label} | {_number(_metric(candidate, key))} | {_number(_metric(champion, key))}"
        f" | {_number(_metric(heuristic, key))} |"
        for key, label in METRICS
    ]
    change, ci = gate.relative_change, gate.ci
    if change is not None:
        interval = f" [{ci[0]:+.2%}, {ci[1]:+.2%}]" if ci else ""
        lines += ["", f"Relative change of save HIT@3: {change:+.2%}{interval}"]
    lift = heuristic.relative_change if heuristic is not None else None
    if heuristic is not None and lift is not None:
        lift_ci = heuristic.ci
        interval = f" [{lift_ci[0]:+.2%}, {lift_ci[1]:+.2%}]" if lift_ci else ""
        served = heuristic.champion_relative_change
        lines += [
            "",
            f"Over the non-learned heuristic (the pin's smoothed 28-day save rate): candidate {lift:+.2%}{interval}"
            + (f", champion {served:+.2%}" if served is not None else ""),
        ]
    lines += _slice_lines(gate.slices or [])
    failed = list(gate.failed_checks or [])
    lines += [
        "",
        f"## Gate: {gate.decision}" + (f" (failed: {', '.join(failed)})" if failed else ""),
        "",
        "| check | result | value | threshold | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in gate.checks or []:
        lines.append(
            f"| {check.name} | {'pass' if check.passed else '**FAIL**'} "
            f"| {_number(check.value)} | {_number(check.threshold)} "
            f"| {_cell(str(check.detail))} |"
        )
    return "\n".join(lines) + "\n"


def _slice_lines(slices: list[SliceSummary]) -> list[str]:
    """Each slice's save HIT@3 for the models and the candidate's change, with the plot."""
    if not slices:
        return []
    lines = [
        "",
        "## Slices",
        "",
        "![slices](slices.png)",
        "",
        "| slice | requests with a save | candidate | champion | heuristic | change [interval] | judged by the guard |",
        "| --- | --- | --- | --- | --- | --- | --- |",
    ]
    for s in slices:
        change, ci = s.relative_change, s.ci
        shown = "–" if change is None else f"{change:+.2%}" + (f" [{ci[0]:+.2%}, {ci[1]:+.2%}]" if ci else "")
        judged = f"yes (p {s.loss_p:.3g})" if s.judged and s.loss_p is not None else "no"
        lines.append(
            f"| {_cell(str(s.name))} | {s.requests_with_save} | {_number(s.candidate)} "
            f"| {_number(s.champion)} | {_number(s.heuristic)} | {shown} | {judged} |"
        )
    return lines


def _number(value: object) -> str:
    if value is None:
        return "–"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _cell(str(value))
    if isinstance(value, int):
        return str(value)
    # 4 decimals read metrics and changes alike; a tiny or huge value (the scores' spread floor,
    # 1e-06) keeps 3 significant digits instead of printing as 0.0000
    return f"{value:.3g}" if value != 0 and not 1e-3 <= abs(value) < 1e6 else f"{value:.4f}"


def _cell(text: str) -> str:
    """A table cell: one line, no column break."""
    return " ".join(text.split()).replace("|", "\\|")


class ReportSummary(Summary):
    """``ranker report``: where the run's report and plots were written."""

    run_id: str
    report: str
    curve: str
    slices: str | None
    """null: the gate cut no slices (or has not run)"""
    decision: Decision | None
    """the gate's (null: not gated yet)"""


def write_run_report(ws: Workspace, run_id: str) -> ReportSummary:
    """Write pipeline run ``run_id``'s ``report.md``, labelled ``curve.png`` and (once the gate cut
    slices) ``slices.png`` in its training run folder. Bad input (no train summary, a failed train,
    no run folder) raises :class:`RankerError` in one line."""
    from ranking.core.atomic import atomic_write_text
    from ranking.trainer.reports.curve_data import read_training_curve
    from ranking.trainer.reports.plots import plot_curve, plot_slices

    train = _summary(ws, run_id, "train", required=True)
    if not isinstance(train, TrainSummary):
        raise RankerError(
            f"run {run_id}'s train step failed ({getattr(train, 'error', None)}): nothing to report"
        )
    gate = _summary(ws, run_id, "gate", required=False)
    judged = gate if isinstance(gate, GateSummary) else None  # a gate that errored judged nothing
    folder = _run_folder(train, run_id)
    champion = judged.champion if judged is not None else None
    try:
        curve = read_training_curve(folder)
    except RankerError as exc:  # the report is still written, with the per-epoch losses
        log.warning("%s: the report's curve shows the per-epoch losses", exc)
        curve = None
    plot_curve(
        folder / "curve.png",
        train.epochs,
        labels=curve_labels(train, run_id),
        champion_metric=champion.save_hit_at_3 if champion is not None else None,
        champion_version=champion.version if champion is not None else None,
        curve=curve,
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
    return ReportSummary(
        run_id=run_id,
        report=str(folder / "report.md"),
        curve=str(folder / "curve.png"),
        slices=str(slices_png) if slices_png else None,
        decision=judged.decision if judged is not None else None,
    )


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
