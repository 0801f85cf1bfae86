"""A training run's report for an operator: ``report.md`` beside ``curve.png`` in the run folder.

Built from the run's step summaries (``train`` and, once judged, ``gate``): which recipe ran, the
candidate against the champion on the eval day, and the gate table (every check with its value,
threshold and verdict). :func:`render_report` and :func:`curve_labels` are pure; the CLI
(``ranker report``) reads the summaries and writes the files.
"""

from __future__ import annotations

from ranking.core.summaries import EvalSummary, GateSummary, SliceSummary, TrainSummary
from ranking.trainer.reports.plots import CurveLabels

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
