"""Schedule study bookkeeping: the plan, baselines, relative numbers, verdicts and reuse."""

from __future__ import annotations

import datetime as dt
import json
import math
import subprocess
import sys
from pathlib import Path

import pytest

from ranking.study.study import (
    Cell,
    StudyError,
    StudySpec,
    build_report,
    plan_cells,
    relative_table,
    render_markdown,
    schedule_letters,
    seed_comparison,
    verdict,
)

END = dt.date(2026, 1, 8)


def _result(cell: Cell, hits: list[float]) -> dict:
    return {
        "key": cell.key,
        "eval_by_epoch": [{"save_hit_at_3": h, "auc": 0.7, "ne": 0.9} for h in hits],
    }


def test_schedule_letters_are_prefix_consistent() -> None:
    assert schedule_letters("delayed", 4) == "F,J,J,J"
    assert schedule_letters("joint_then_frozen", 3) == "J,F,F"
    assert schedule_letters("frozen", 1) == "F"
    # the e-epoch run is the first e epochs of the longest run: one run per cell is enough
    assert schedule_letters("delayed", 4).startswith(schedule_letters("delayed", 2))


def test_plan_has_one_run_per_cell_and_one_warm_base_per_window_and_seed() -> None:
    spec = StudySpec(end=END, windows=(10, 20), schedules=("joint", "delayed"), seeds=3)
    bases, cells = plan_cells(spec)
    assert len(bases) == 2 * 3 and all(b.init == "base" and b.schedule == "joint" for b in bases)
    assert len(cells) == 2 * 2 * 2 * 3  # inits x windows x schedules x seeds
    assert len({c.key for c in cells + bases}) == len(cells) + len(bases)
    scratch_only = StudySpec(end=END, inits=("scratch",), seeds=1)
    assert plan_cells(scratch_only)[0] == []  # no warm start needed
    assert spec.warm_end(20) == END - dt.timedelta(days=20)  # preceding, disjoint window
    assert StudySpec(end=END, warm_offset_days=1).warm_end(20) == END - dt.timedelta(days=1)


@pytest.mark.parametrize(
    "kwargs, message",
    [
        ({"schedules": ("delayed",)}, "baseline"),
        ({"epochs": (2, 3)}, "baseline"),
        ({"schedules": ("joint", "sometimes")}, "unknown schedules"),
        ({"inits": ("pretrained",)}, "inits"),
        ({"seeds": 0}, "seeds"),
    ],
)
def test_spec_rejects_what_cannot_be_compared(kwargs: dict, message: str) -> None:
    with pytest.raises(StudyError, match=message):
        StudySpec(end=END, **kwargs)


def test_relative_numbers_are_paired_per_seed_against_one_epoch_joint() -> None:
    spec = StudySpec(
        end=END, windows=(20,), epochs=(1, 2), schedules=("joint", "delayed"), seeds=2, inits=("scratch",)
    )
    results = {}
    # seed 0: baseline 0.20; seed 1: baseline 0.25 (different seeds, different baselines)
    for seed, base, joint2, delayed in [(0, 0.20, 0.19, [0.20, 0.22]), (1, 0.25, 0.2375, [0.25, 0.26])]:
        results[Cell(20, "joint", seed, "scratch").key] = _result(
            Cell(20, "joint", seed, "scratch"), [base, joint2]
        )
        results[Cell(20, "delayed", seed, "scratch").key] = _result(
            Cell(20, "delayed", seed, "scratch"), delayed
        )
    rows = {(r["schedule"], r["epochs"]): r for r in relative_table(results, spec)}
    joint1 = rows[("joint", 1)]["save_hit_at_3"]
    assert joint1["rel_pct_by_seed"] == [0.0, 0.0]
    joint2 = rows[("joint", 2)]["save_hit_at_3"]
    assert joint2["rel_pct_by_seed"] == pytest.approx([-5.0, -5.0])
    assert joint2["rel_pct_mean"] == pytest.approx(-5.0) and joint2["rel_pct_sd"] == pytest.approx(0.0)
    delayed2 = rows[("delayed", 2)]["save_hit_at_3"]
    assert delayed2["rel_pct_by_seed"] == pytest.approx([10.0, 4.0])
    assert delayed2["rel_pct_mean"] == pytest.approx(7.0)
    assert delayed2["rel_pct_sd"] == pytest.approx(math.sqrt(18.0))  # sample sd of (10, 4)
    assert delayed2["mean"] == pytest.approx(0.24) and delayed2["n"] == 2
    assert rows[("delayed", 2)]["letters"] == "F,J"


def test_missing_runs_are_counted_not_invented() -> None:
    spec = StudySpec(
        end=END, windows=(20,), epochs=(1,), schedules=("joint", "delayed"), seeds=2, inits=("scratch",)
    )
    results = {Cell(20, "joint", 0, "scratch").key: _result(Cell(20, "joint", 0, "scratch"), [0.2])}
    rows = {r["schedule"]: r for r in relative_table(results, spec)}
    assert rows["joint"]["save_hit_at_3"]["n"] == 1
    assert rows["delayed"]["save_hit_at_3"]["n"] == 0
    assert math.isnan(rows["delayed"]["save_hit_at_3"]["rel_pct_mean"])


def test_verdict_separates_signal_from_noise() -> None:
    assert verdict(1.16, 2.0, 0.5, 3) == "reproduces"
    assert verdict(1.16, 0.3, 2.0, 3) == "same direction, within noise"
    assert verdict(-6.0, 3.0, 0.5, 3) == "does not reproduce"
    assert verdict(-6.0, 0.4, 2.0, 3) == "does not reproduce (within noise)"
    assert verdict(float("nan"), -1.0, 0.1, 3) == "loss"
    assert verdict(1.0, float("nan"), float("nan"), 0) == "not run"


def test_report_names_every_seed_finding_it_can_answer() -> None:
    spec = StudySpec(end=END, windows=(10, 20), epochs=(1, 2, 3), seeds=1, inits=("scratch",))
    results = {}
    for w in (10, 20):
        for schedule in spec.schedules:
            c = Cell(w, schedule, 0, "scratch")
            results[c.key] = _result(c, [0.2, 0.21, 0.22])
    report = build_report(spec, results, 1.0)
    findings = {c["finding"] for c in seed_comparison(report["rows"], spec)}
    assert any("10-day window: joint in epoch 1" in f for f in findings)
    assert any("20-day window: delayed update (F,J,J), 3 epochs" in f for f in findings)
    assert not any("4 epochs" in f for f in findings)  # epoch 4 was not run
    md = render_markdown(report)
    assert "| 20d | delayed |" in md and "+10.00%" in md


@pytest.mark.slow
def test_study_end_to_end_on_a_tiny_workspace_then_reused(tmp_path: Path) -> None:
    from features.testing import make_tiny_workspace

    info = make_tiny_workspace(tmp_path / "ws", days=6, requests_per_day=60, window_days=2)
    ranker = [sys.executable, "-m", "ranking.cli"]
    cmd = [
        *ranker, "study", "--home", info["home"], "--end", info["end"], "--windows", "2",
        "--epochs", "1,2", "--schedules", "joint,delayed", "--seeds", "1", "--parallel", "2", "--json",
    ]  # fmt: skip
    first = subprocess.run(cmd, capture_output=True, text=True, timeout=900)
    assert first.returncode == 0, first.stderr[-3000:]
    summary = json.loads(first.stdout)
    assert summary["runs"] == 1 + 4 and summary["reused"] == 0  # warm base + 2 inits x 2 schedules
    report = json.loads(Path(summary["report"]["json"]).read_text())
    rows = {(r["init"], r["schedule"], r["epochs"]): r for r in report["rows"]}
    assert rows[("scratch", "joint", 1)]["save_hit_at_3"]["rel_pct_mean"] == 0.0  # the baseline itself
    assert rows[("warm", "delayed", 2)]["letters"] == "F,J"
    warm = report["results"]["warm-w2-delayed-s0"]
    assert warm["warm_from"].endswith("base-w2-joint-s0/model.pt")
    assert Path(summary["report"]["plot"]).stat().st_size > 10_000
    # the second run trains nothing and reports the same numbers
    again = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
    assert again.returncode == 0, again.stderr[-3000:]
    second = json.loads(again.stdout)
    assert second["reused"] == second["runs"] == 5
    assert json.loads(Path(second["report"]["json"]).read_text())["rows"] == report["rows"]
