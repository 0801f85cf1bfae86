"""The study report names every seed finding it can answer and renders its tables."""

from __future__ import annotations

from study_fixtures import END, result

from ranking.study.report import build_report, render_markdown
from ranking.study.spec import Cell, StudySpec
from ranking.study.stats import seed_comparison


def test_report_names_every_seed_finding_it_can_answer() -> None:
    spec = StudySpec(end=END, windows=(10, 20), epochs=(1, 2, 3), seeds=1, inits=("scratch",))
    results = {}
    for w in (10, 20):
        for schedule in spec.schedules:
            c = Cell(w, schedule, 0, "scratch")
            results[c.key] = result(c, [0.2, 0.21, 0.22])
    report = build_report(spec, results, 1.0)
    findings = {c.finding for c in seed_comparison(report.rows, spec)}
    assert any("10-day window: joint in epoch 1" in f for f in findings)
    assert any("20-day window: delayed update (F,J,J), 3 epochs" in f for f in findings)
    assert not any("4 epochs" in f for f in findings)  # epoch 4 was not run
    md = render_markdown(report)
    assert "| 20d | delayed |" in md and "+10.00%" in md
