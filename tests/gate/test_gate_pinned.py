"""The gate's paths that only the backtests walked: the configuration's full list of problems, a
gate against a champion with anchors, references, a trend model, the pooled decision and the
versions left out (one trained on the eval day, one that can no longer be read)."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.core.errors import RankerError
from ranking.core.workspace import Workspace
from ranking.gate import run as gate_run
from ranking.gate.checks import GateConfig, PastComparison, TrainingWindow, run_gate
from ranking.gate.run import GateRequest, gate_candidate
from ranking.registry import Registry, register_run
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]
EVAL_DAY = dt.date(2026, 1, 21)


def test_every_configuration_problem_is_named_in_order() -> None:
    with pytest.raises(RankerError) as err:
        GateConfig(
            tolerance=1.0,
            anchor_tolerance=-0.1,
            anchor_champions=-1,
            reference_champions=-2,
            trend_days=-3,
            max_window_lag_days=-4,
            pool_days=0,
            reference_tolerance=1.5,
            trend_tolerance=-0.5,
            rule="best",
            ci_level=1.0,
            bootstrap_samples=0,
            calibration_low=1.5,
            min_save_hit_at_3=-1.0,
            min_lift_over_random=float("nan"),
            max_auc_drop=float("inf"),
            max_ne_rise=-0.1,
            min_score_std=-1.0,
            pool_ci_width=-1.0,
            max_lift=float("-inf"),
        )
    # every problem named, in the fields' order (GateThresholds: the limits written once)
    assert str(err.value) == (
        "invalid gate configuration: min_save_hit_at_3: Input should be greater than or equal to 0 (got -1.0); "
        "min_lift_over_random: Input should be a finite number (got nan); "
        "tolerance: Input should be less than 1 (got 1.0); "
        "max_auc_drop: Input should be a finite number (got inf); "
        "max_ne_rise: Input should be greater than or equal to 0 (got -0.1); "
        "calibration_low: Input should be less than or equal to 1 (got 1.5); "
        "min_score_std: Input should be greater than or equal to 0 (got -1.0); "
        "rule: Input should be 'ci' or 'point' (got 'best'); "
        "bootstrap_samples: Input should be greater than or equal to 1 (got 0); "
        "ci_level: Input should be less than 1 (got 1.0); "
        "anchor_champions: Input should be greater than or equal to 0 (got -1); "
        "anchor_tolerance: Input should be greater than or equal to 0 (got -0.1); "
        "reference_champions: Input should be greater than or equal to 0 (got -2); "
        "reference_tolerance: Input should be less than 1 (got 1.5); "
        "trend_days: Input should be greater than or equal to 0 (got -3); "
        "trend_tolerance: Input should be greater than or equal to 0 (got -0.5); "
        "pool_days: Input should be greater than or equal to 1 (got 0); "
        "pool_ci_width: Input should be greater than or equal to 0 (got -1.0); "
        "max_lift: Input should be a finite number (got -inf); "
        "max_window_lag_days: Input should be greater than or equal to 0 (got -4)"
    )


def _models() -> tuple[pd.DataFrame, np.ndarray]:
    return make_eval_day(requests=300, slate=10, seed=3)


def test_every_check_in_its_order_with_the_summaries() -> None:
    frame, propensity = _models()
    model = {name: with_scores(frame, noisy(propensity, 0.6, seed=s)) for s, name in enumerate("CHABT")}
    past = [PastComparison(dt.date(2026, 1, d), 0.01 * d, (-0.05, 0.05 + 0.01 * d)) for d in (17, 18, 19, 20)]
    config = GateConfig(
        reference_champions=3, anchor_champions=2, max_lift=0.5, bootstrap_samples=200, pool_ci_width=0.05
    )
    report = run_gate(
        model["C"],
        model["H"],
        config,
        eval_date=EVAL_DAY,
        candidate_window=TrainingWindow(dt.date(2026, 1, 1), dt.date(2026, 1, 17)),
        champion_window=TrainingWindow(dt.date(2025, 12, 31), dt.date(2026, 1, 20)),
        anchors={"v9": model["A"], "v8": model["B"]},
        references={"v8": model["B"], "v7": model["A"], "v6": model["T"]},
        trend_reference=("v5", model["T"]),
        history=past,
    )
    names = [c.name for c in report.checks]
    assert names == [
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
        "window_age",
        "fair_comparison",
        "save_hit_at_3_change",
        "auc_drop",
        "ne_rise",
        "anchor",
        "reference",
        "trend",
        "leakage",
    ]
    by_name = {c.name: c for c in report.checks}
    assert not by_name["window_age"].passed and by_name["window_age"].value == 4.0
    change = by_name["save_hit_at_3_change"]
    assert "pooled over 5 eval days" in change.detail  # the day's CI is wider than 0.05
    assert report.ci is not None and change.ci != report.ci  # the report keeps the day's own interval
    assert report.anchor is not None and report.anchor["considered"] == ["v8", "v9"]
    assert "best of the last 2 champions" in by_name["anchor"].detail
    assert report.reference is not None and list(report.reference["models"]) == ["champion", "v8", "v7"]
    assert "the mean of 3 recent champion(s)" in by_name["reference"].detail
    assert "vs v5, the champion served 7+ days ago" in by_name["trend"].detail
    point = run_gate(model["C"], model["H"], GateConfig(rule="point", reference_champions=0), history=past)
    assert [c.name for c in point.checks] == [
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
        "fair_comparison",
        "save_hit_at_3_change",
        "auc_drop",
        "ne_rise",
        "leakage",
    ]
    assert "pooled" not in point.checks[5].detail  # rule "point" never pools


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")


def test_a_gate_against_the_champion_scores_the_recent_ones_and_names_those_left_out(
    ws: Workspace, make_run: RunFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    frame, propensity = _models()
    parquet = ws.windows / "w" / "eval.parquet"
    parquet.parent.mkdir(parents=True)
    parquet.write_bytes(b"PAR1")
    manifest = {  # what features.window.read_window_manifest needs of a built window's manifest
        "window_id": "w", "end": EVAL_DAY.isoformat(), "days": 1, "train": [],
        "eval": {"date": EVAL_DAY.isoformat(), "path": str(parquet), "rows": 1}, "feature_version": "fv1",
    }  # fmt: skip
    (parquet.parent / "manifest.json").write_text(json.dumps(manifest))

    reg = Registry.for_workspace(ws)
    ends = {"old": 10, "unreadable": 15, "leaky": 22, "champion": 20}
    versions = {}
    for name, day in ends.items():
        versions[name] = register_run(ws, make_run(end=dt.date(2026, 1, day)), None)
        reg.promote(versions[name], reason="test", force=True)
    cand_scores = with_scores(frame, noisy(propensity, 0.6, seed=11))
    candidate = register_run(ws, make_run(end=EVAL_DAY, scores=cand_scores), None)
    for day, name in ((19, "unreadable"), (20, "champion")):
        reg.record_verdict(
            versions[name], Verdict(eval_date=f"2026-01-{day}", relative_change=0.02, ci=[-0.01, 0.05])
        )
    version_dir = Path(reg.local_dir(versions["unreadable"], ws.root))
    (version_dir / "model.pt").write_bytes(b"changed after registration")

    scored: list[str] = []

    def fake_score(checkpoint: Path, eval_parquet: Path) -> pd.DataFrame:
        assert eval_parquet == parquet
        version = checkpoint.parent.name
        scored.append(version)
        seed = sorted(versions.values()).index(version)
        return with_scores(frame, noisy(propensity, 0.6, seed=seed))

    monkeypatch.setattr(gate_run, "_score", fake_score)
    config = GateConfig(
        anchor_champions=2, reference_champions=4, max_lift=1.0, bootstrap_samples=100, pool_ci_width=0.05
    )
    result = gate_candidate(GateRequest(ws=ws, candidate=candidate, config=config, run_id="r9"))
    summary = result.summary.body()

    assert scored == [versions["champion"], versions["old"]]  # each scored once, the leaky one never
    assert [c["name"] for c in summary["checks"]] == [
        "scores_finite",
        "scores_not_constant",
        "calibration",
        "save_hit_at_3_floor",
        "window_age",
        "fair_comparison",
        "save_hit_at_3_change",
        "auc_drop",
        "ne_rise",
        "anchor",
        "reference",
        "trend",
        "leakage",
    ]
    assert summary["candidate"]["version"] == candidate
    assert summary["champion"]["version"] == versions["champion"]
    assert summary["anchor"]["considered"] == [versions["champion"]]
    left_out = summary["anchor"]["left_out"]
    assert list(left_out) == [versions["leaky"], versions["unreadable"]]
    assert (
        left_out[versions["leaky"]] == "trained on the eval day 2026-01-21 (window [2026-01-02, 2026-01-22))"
    )
    assert "checksum mismatch" in left_out[versions["unreadable"]]
    assert list(summary["reference"]["models"]) == ["champion", versions["old"]]
    trend = next(c for c in summary["checks"] if c["name"] == "trend")
    assert f"vs {versions['old']}, the champion served 7+ days ago" in trend["detail"]
    change = next(c for c in summary["checks"] if c["name"] == "save_hit_at_3_change")
    assert "pooled over 3 eval days" in change["detail"]
    verdict = reg.verdict(candidate)
    assert verdict is not None
    assert (verdict.champion_version, verdict.run_id, verdict.version) == (
        versions["champion"],
        "r9",
        candidate,
    )
    assert verdict.to_dict()["anchor"]["left_out"] == left_out  # the rest of the report is kept
