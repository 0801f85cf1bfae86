"""A training run's report for an operator: ``report.md`` beside ``curve.png`` in the run folder.

Built from the run's step summaries (``train`` and, once judged, ``gate``): which recipe ran, the
candidate against the champion on the eval day, and the gate table (every check with its value,
threshold and verdict). :func:`render_report` and :func:`curve_labels` are pure; the CLI
(``ranker report``) reads the summaries and writes the files.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from ranking.trainer.reports.plots import CurveLabels

METRICS = (("save_hit_at_3", "save HIT@3"), ("auc", "AUC"), ("ne", "normalized entropy"))


def curve_labels(train: Mapping[str, Any], run_id: str) -> CurveLabels:
    """Version, run, window (first..last training day, length) and eval day of a train summary."""
    window = train.get("window") or {}
    dates = list(window.get("train_dates") or [])
    span = f"{dates[0]}..{dates[-1]} ({len(dates)} d)" if dates else None
    return CurveLabels(
        version=train.get("version"),
        run_id=run_id,
        window=span,
        eval_date=window.get("eval_date") or window.get("end"),
    )


def outcome(gate: Mapping[str, Any] | None) -> str:
    if not gate:
        return "not gated yet"
    return "passed the gate" if gate.get("decision") == "pass" else "REJECTED by the gate"


def render_report(train: Mapping[str, Any], gate: Mapping[str, Any] | None, run_id: str) -> str:
    """The markdown report of one run (``gate`` None: trained, not judged yet)."""
    labels = curve_labels(train, run_id)
    warm = train.get("warm_start") or {}
    version = train.get("version") or "(not registered)"
    lines = [
        f"# Run {run_id}: {version}, {outcome(gate)}",
        "",
        f"- eval day: {labels.eval_date or '?'}; window: {labels.window or '?'}",
        f"- recipe: schedule {train.get('schedule') or '?'}, {len(train.get('epochs') or [])} epochs, "
        f"pipeline {train.get('pipeline') or '?'}, warm start {warm.get('source') or 'none'}"
        + (f" (scope {warm['scope']})" if warm.get("scope") else ""),
        "",
        "![training curve](curve.png)",
        "",
    ]
    if not gate:
        final = train.get("eval") or {}
        lines += ["| metric | candidate |", "| --- | --- |"]
        lines += [f"| {label} | {_number(final.get(key))} |" for key, label in METRICS]
        return "\n".join(lines) + "\n"
    candidate, champion = gate.get("candidate") or {}, gate.get("champion") or {}
    heuristic = gate.get("heuristic") or {}
    champion_name = champion.get("version") or "none (first run)"
    lines += [
        f"## Candidate vs champion on {gate.get('eval_date') or labels.eval_date}",
        "",
        f"| metric | candidate {candidate.get('version') or version} | champion {champion_name}"
        f" | heuristic {heuristic.get('name') or '(not scored)'} |",
        "| --- | --- | --- | --- |",
    ]
    lines += [
        f"| {label} | {_number(candidate.get(key))} | {_number(champion.get(key))} | {_number(heuristic.get(key))} |"
        for key, label in METRICS
    ]
    change, ci = gate.get("relative_change"), gate.get("ci")
    if change is not None:
        interval = f" [{ci[0]:+.2%}, {ci[1]:+.2%}]" if ci else ""
        lines += ["", f"Relative change of save HIT@3: {change:+.2%}{interval}"]
    lift, lift_ci = heuristic.get("relative_change"), heuristic.get("ci")
    if lift is not None:
        interval = f" [{lift_ci[0]:+.2%}, {lift_ci[1]:+.2%}]" if lift_ci else ""
        served = heuristic.get("champion_relative_change")
        lines += [
            "",
            f"Over the non-learned heuristic (the pin's smoothed 28-day save rate): candidate {lift:+.2%}{interval}"
            + (f", champion {served:+.2%}" if served is not None else ""),
        ]
    lines += _slice_lines(gate)
    failed = list(gate.get("failed_checks") or [])
    lines += [
        "",
        f"## Gate: {gate.get('decision')}" + (f" (failed: {', '.join(failed)})" if failed else ""),
        "",
        "| check | result | value | threshold | detail |",
        "| --- | --- | --- | --- | --- |",
    ]
    for check in gate.get("checks") or []:
        lines.append(
            f"| {check.get('name')} | {'pass' if check.get('passed') else '**FAIL**'} "
            f"| {_number(check.get('value'))} | {_number(check.get('threshold'))} "
            f"| {_cell(str(check.get('detail', '')))} |"
        )
    return "\n".join(lines) + "\n"


def _slice_lines(gate: Mapping[str, Any]) -> list[str]:
    """Each slice's save HIT@3 for the models and the candidate's change, with the plot."""
    slices = gate.get("slices") or []
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
        change, ci = s.get("relative_change"), s.get("ci")
        shown = "–" if change is None else f"{change:+.2%}" + (f" [{ci[0]:+.2%}, {ci[1]:+.2%}]" if ci else "")
        judged = f"yes (p {s['loss_p']:.3g})" if s.get("judged") and s.get("loss_p") is not None else "no"
        lines.append(
            f"| {_cell(str(s.get('name')))} | {s.get('requests_with_save')} | {_number(s.get('candidate'))} "
            f"| {_number(s.get('champion'))} | {_number(s.get('heuristic'))} | {shown} | {judged} |"
        )
    return lines


def _number(value: Any) -> str:
    if value is None:
        return "–"
    if isinstance(value, list | tuple):
        return "[" + ", ".join(_number(v) for v in value) + "]"
    if isinstance(value, bool) or not isinstance(value, int | float):
        return _cell(str(value))
    return f"{value:.4f}" if isinstance(value, float) else str(value)


def _cell(text: str) -> str:
    """A table cell: one line, no column break."""
    return " ".join(text.split()).replace("|", "\\|")
