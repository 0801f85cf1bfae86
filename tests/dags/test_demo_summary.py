"""infra/demo_summary.py on a hand-made workspace: the runs in the order they ran, the recipe each
trained with, the outcome read from the step summaries, and why the gate decided (no demo run
needed; tests/dags/test_demo.py runs the real one)."""

from __future__ import annotations

import json
import os
import sys
from pathlib import Path
from typing import Any

import pytest
from dag_test_paths import REPO

sys.path.insert(0, str(REPO / "infra"))
import demo_summary

sys.path.remove(str(REPO / "infra"))


def _check(name: str, passed: bool, value: float | None, threshold: Any) -> dict[str, Any]:
    return {
        "name": name,
        "passed": passed,
        "value": value,
        "threshold": threshold,
        "detail": f"{name} said so",
    }


def _write_run(home: Path, run_id: str, mtime: float, steps: dict[str, dict[str, Any]]) -> None:
    run = home / "pipeline" / run_id
    run.mkdir(parents=True)
    for step, summary in steps.items():
        path = run / f"{step}.json"
        path.write_text(json.dumps(summary))
        os.utime(path, (mtime, mtime))


def _day(version: str, champion: str | None, checks: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    failed = [c["name"] for c in checks if not c["passed"]]
    return {
        "train": {
            "version": version,
            "schedule": "F,J",
            "epochs": [{"epoch": 1}, {"epoch": 2}],
            "pipeline": "semisync",
            "warm_start": {"source": "base v0001"},
            "window": {"rows_train": 200000},
            "run_dir": f"/ws/runs/{version}",
        },
        "gate": {
            "eval_date": "2026-02-11",
            "decision": "reject" if failed else "pass",
            "failed_checks": failed,
            "candidate": {"version": version, "save_hit_at_3": 0.38},
            "champion": {"version": champion, "save_hit_at_3": 0.36} if champion else None,
            "relative_change": 0.0556 if champion else None,
            "checks": checks,
        },
        "decide": {"reason": "the gate rejected it" if failed else "gate passed"},
    }


@pytest.fixture
def home(tmp_path: Path) -> Path:
    # written out of order: the summary orders runs by their first step's time, not by name
    rejected = _day(
        "v0003", "v0002", [_check("ne_rise", False, 0.0412, 0.03), _check("auc_drop", True, 0.001, 0.02)]
    )
    _write_run(tmp_path, "b-day2", 3000.0, {**rejected, "reject": {"version": "v0003"}})
    _write_run(
        tmp_path,
        "c-day1",
        2000.0,
        {**_day("v0002", None, [_check("floor", True, 0.38, 0.126)]), "promote": {}},
    )
    base = {"version": "v0001", "base_range": ["2026-01-01", "2026-01-21"], "days": 20, "schedule": "joint"}
    _write_run(
        tmp_path, "a-pretrain", 1000.0, {"pretrain": {**base, "epochs": 1, "eval": {"save_hit_at_3": 0.31}}}
    )
    _write_run(tmp_path, "d-dry", 4000.0, _day("v0004", "v0002", [_check("floor", True, 0.38, 0.126)]))
    (tmp_path / "pipeline" / "e-unfinished").mkdir()  # a run with no step summary yet
    return tmp_path


def test_runs_in_order_with_recipe_outcome_and_failed_checks(home: Path) -> None:
    summary = demo_summary.summarize(home)
    assert summary["base"]["version"] == "v0001" and summary["base"]["range"] == ["2026-01-01", "2026-01-21"]
    days = summary["days"]
    assert [(d["run_id"], d["candidate"], d["champion"], d["outcome"]) for d in days] == [
        ("c-day1", "v0002", None, "promoted"),
        ("b-day2", "v0003", "v0002", "rejected"),
        ("d-dry", "v0004", "v0002", "kept the champion"),
    ]
    assert days[1]["failed_checks"] == ["ne_rise"] and days[1]["reason"] == "the gate rejected it"
    assert days[0]["recipe"] == {
        "schedule": "F,J",
        "epochs": 2,
        "pipeline": "semisync",
        "warm_start": "base v0001",
    }


def test_render_says_why_the_gate_decided(home: Path) -> None:
    text = demo_summary.render(demo_summary.summarize(home)).splitlines()
    assert text[0].startswith(
        "base model v0001 (ranker_pretrain): trained from scratch on [2026-01-01, 2026-01-21)"
    )
    assert "    [FAIL] ne_rise: value 0.0412, threshold 0.0300: ne_rise said so" in text
    assert "  -> rejected (failed ne_rise); decide: the gate rejected it" in text
    assert (
        "  gate pass: save HIT@3 0.3800 vs champion none (first run: only the absolute checks apply)" in text
    )
    assert "  gate reject: save HIT@3 0.3800 vs champion v0002 0.3600 (+5.56%)" in text


def test_without_a_base_the_summary_says_so(tmp_path: Path) -> None:
    (tmp_path / "pipeline").mkdir()
    assert demo_summary.render(demo_summary.summarize(tmp_path)).startswith("base model: none")


@pytest.mark.parametrize("value", [0.0, 1e-6, -0.0278, 12.5])
def test_every_float_keeps_a_decimal_point_for_the_docs_mask(value: float) -> None:
    # tests/dags/test_demo.py masks decimals as measured: a float printed without one would be
    # compared as if it were seeded
    assert "." in demo_summary._num(value)
