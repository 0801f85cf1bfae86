"""infra/backtest_pool.py: the paired days of several backtests pooled into one bootstrap."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from repo_scripts import load_script


def _pool():  # type: ignore[no-untyped-def]
    return load_script("infra/backtest_pool.py")


def _backtest(folder: Path, seed: int, days: int, better: float) -> None:
    """Two recipes scored on the same impressions; ``other``'s scores are closer to the labels."""
    rng = np.random.default_rng(seed)
    for d in range(days):
        day = f"2026-09-{10 + d:02d}"
        n_req, pins = 200, 10
        saved = rng.random(n_req * pins) < 0.2
        noise = rng.normal(size=n_req * pins)
        base = pd.DataFrame(
            {
                "request_id": np.repeat(np.arange(n_req), pins),
                "pin_id": np.tile(np.arange(pins), n_req),
                "saved": saved.astype(np.int8),
            }
        )
        for name, weight in (("baseline", 0.5), ("other", 0.5 + better)):
            (folder / name / "days").mkdir(parents=True, exist_ok=True)
            (folder / name / "scores").mkdir(parents=True, exist_ok=True)
            base.assign(score=weight * saved + noise).to_parquet(folder / name / "scores" / f"{day}.parquet")
            record = {"day": day, "served": {"scores": f"scores/{day}.parquet"}, "candidate": None}
            (folder / name / "days" / f"{day}.json").write_text(json.dumps(record))


def test_pooling_two_backtests_pairs_every_day_of_both(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = _pool()
    _backtest(tmp_path / "a", seed=1, days=4, better=0.5)
    _backtest(tmp_path / "b", seed=2, days=3, better=0.5)
    assert pool.main(["baseline", "other", str(tmp_path / "a")]) == 0
    one = json.loads(capsys.readouterr().out)
    assert pool.main(["baseline", "other", str(tmp_path / "a"), str(tmp_path / "b")]) == 0
    both = json.loads(capsys.readouterr().out)
    assert one["served"]["days"] == 4 and both["served"]["days"] == 7
    assert both["candidate"] is None  # no candidate scores recorded
    low, high = both["served"]["ci"]["save_hit_at_3"]
    assert 0 < low <= both["served"]["relative_change"]["save_hit_at_3"] <= high


def test_a_folder_that_is_not_a_backtest_of_both_recipes_is_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    pool = _pool()
    _backtest(tmp_path / "a", seed=1, days=2, better=0.5)
    assert pool.main(["baseline", "missing", str(tmp_path / "a")]) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "not a backtest of baseline and missing" in err[0]
