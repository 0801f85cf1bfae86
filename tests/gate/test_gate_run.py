"""The gate's I/O edge: one GateRequest in, the verdict recorded in the registry, the eval-day lookup."""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest

from ranking.core.errors import RankerError, RegistryError
from ranking.core.workspace import Workspace
from ranking.gate.checks import GateConfig
from ranking.gate.run import GateRequest, find_eval_parquet, gate_candidate
from ranking.registry import Registry, register_run

RunFactory = Callable[..., Path]


@pytest.fixture
def ws(tmp_path: Path) -> Workspace:
    return Workspace(tmp_path / "home")


def test_first_run_is_judged_on_its_own_eval_day_and_recorded(ws: Workspace, make_run: RunFactory) -> None:
    version = register_run(ws, make_run(end=dt.date(2026, 1, 21)), "r1")
    result = gate_candidate(GateRequest(ws=ws, candidate=version, run_id="r1"))
    assert result.passed and result.summary.body()["decision"] == "pass"
    assert result.summary.body()["eval_date"] == "2026-01-21" and result.summary.body()["champion"] is None
    assert (
        result.summary.body()["candidate"]["version"] == version
        and result.summary.body()["duration_seconds"] >= 0
    )
    verdict = Registry.for_workspace(ws).verdict(version)
    assert verdict is not None
    assert (verdict.decision, verdict.champion_version, verdict.run_id) == ("pass", None, "r1")
    assert verdict.eval_date == "2026-01-21" and verdict.who


def test_the_config_reaches_the_checks(ws: Workspace, make_run: RunFactory) -> None:
    version = register_run(ws, make_run(), None)
    result = gate_candidate(GateRequest(ws=ws, candidate=version, config=GateConfig(min_save_hit_at_3=1.0)))
    assert not result.passed and result.summary.body()["failed_checks"] == ["save_hit_at_3_floor"]
    assert result.summary.body()["config"]["min_save_hit_at_3"] == 1.0
    assert Registry.for_workspace(ws).verdict(version).decision == "reject"  # type: ignore[union-attr]


def test_the_champion_is_not_gated_against_itself(ws: Workspace, make_run: RunFactory) -> None:
    version = register_run(ws, make_run(), None)
    Registry.for_workspace(ws).promote(version, reason="bootstrap", force=True)
    with pytest.raises(RegistryError, match="already is the champion"):
        gate_candidate(GateRequest(ws=ws, candidate=version))


def test_a_candidate_without_a_training_window_needs_an_eval_day(ws: Workspace, make_run: RunFactory) -> None:
    run = make_run()
    (run / "train_manifest.json").write_text(json.dumps({"schedule": "F,J,J"}))
    version = register_run(ws, run, None)
    with pytest.raises(RankerError, match="pass --end DATE"):
        gate_candidate(GateRequest(ws=ws, candidate=version))


def _window(ws: Workspace, name: str, day: str, feature_version: str) -> Path:
    folder = ws.windows / name
    folder.mkdir(parents=True)
    parquet = folder / "eval.parquet"
    parquet.write_bytes(b"PAR1")
    manifest = {  # what features.window.read_window_manifest needs of a built window's manifest
        "window_id": name, "end": day, "days": 1, "train": [],
        "eval": {"date": day, "path": str(parquet), "rows": 1}, "feature_version": feature_version,
    }  # fmt: skip
    (folder / "manifest.json").write_text(json.dumps(manifest))
    return parquet


def test_find_eval_parquet_prefers_the_same_feature_definitions(ws: Workspace) -> None:
    day = dt.date(2026, 1, 21)
    with pytest.raises(RankerError, match="no built window has eval day 2026-01-21"):
        find_eval_parquet(ws, day, "fv1")
    other = _window(ws, "a_2026-01-21_20d", "2026-01-21", "fv0")
    same = _window(ws, "b_2026-01-21_10d", "2026-01-21", "fv1")
    _window(ws, "c_2026-01-22_20d", "2026-01-22", "fv1")
    (ws.windows / "d_broken").mkdir()
    (ws.windows / "d_broken" / "manifest.json").write_text("{not json")
    assert find_eval_parquet(ws, day, "fv1") == same
    assert find_eval_parquet(ws, day, "fv9") == other  # none matches: the first one found


def _eval_partition(ws: Workspace, scores: pd.DataFrame, *, with_slice_columns: bool) -> None:
    """The eval day's built partition beside the models' scores: the heuristic's and (unless
    told not to) the slices' columns."""
    import numpy as np

    rng = np.random.default_rng(0)
    examples = scores[["request_id", "pin_id", "saved"]].assign(
        pin_stats__saves_28d=rng.integers(0, 20, len(scores)).astype(float),
        pin_stats__impressions_28d=rng.integers(20, 400, len(scores)).astype(float),
    )
    if with_slice_columns:
        codes = examples["request_id"].factorize()[0]
        examples = examples.assign(
            user_stats__impressions_28d=np.where(codes % 4 == 0, 0.0, 9.0),
            user_stats__country=np.where(codes % 2 == 0, "de", "us"),
        )
    parquet = _window(ws, "w_2026-01-21_20d", "2026-01-21", "fv1")
    examples.to_parquet(parquet, index=False)


@pytest.mark.parametrize("with_slice_columns", [True, False])
def test_the_heuristic_and_the_slices_are_read_from_the_eval_partition(
    ws: Workspace, make_run: RunFactory, with_slice_columns: bool, monkeypatch: pytest.MonkeyPatch
) -> None:
    from scoresets import make_eval_day, noisy, with_scores

    import ranking.gate.run as gate_run

    frame, propensity = make_eval_day(requests=400, seed=3)
    champion_scores = with_scores(frame, noisy(propensity, 0.5, 1))
    # the champion's checkpoint scored on the partition (a torchrec model there: tests/trainer)
    monkeypatch.setattr(gate_run, "_score", lambda checkpoint, parquet: champion_scores)
    champion = register_run(ws, make_run(scores=champion_scores), None)
    Registry.for_workspace(ws).promote(champion, reason="bootstrap", force=True)
    candidate = register_run(ws, make_run(scores=with_scores(frame, noisy(propensity, 0.5, 2))), None)
    _eval_partition(ws, frame, with_slice_columns=with_slice_columns)
    summary = gate_candidate(GateRequest(ws=ws, candidate=candidate)).summary.body()
    assert summary["heuristic"]["name"] == "pin_save_rate"
    if not with_slice_columns:  # a partition without the slices' columns: not cut, said in the log
        assert summary["slices"] is None and "slice_guard" not in [c["name"] for c in summary["checks"]]
        return
    names = {s["name"] for s in summary["slices"]}
    assert {"user:first_seen", "user:returning", "user_stats__country:de", "user_stats__country:us"} <= names
    assert all(s["champion"] is not None and "heuristic" in s for s in summary["slices"])
    assert "slice_guard" in [c["name"] for c in summary["checks"]]
    assert Registry.for_workspace(ws).verdict(candidate).to_dict()["slices"] == summary["slices"]  # type: ignore[union-attr]
