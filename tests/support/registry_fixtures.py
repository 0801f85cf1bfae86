"""Fixtures for registry, gate and CLI tests: constructed training run folders and registry URLs
(imported by the conftest of each package that uses them)."""

from __future__ import annotations

import datetime as dt
import json
import uuid
from collections.abc import Callable
from pathlib import Path

import pandas as pd
import pytest
from scoresets import make_eval_day, noisy, with_scores

from ranking.evaluation.metrics import compute_metrics
from ranking.registry import Registry
from ranking.registry.records import Verdict

RunFactory = Callable[..., Path]


def bless(reg: Registry, version: str, champion: str | None = None) -> None:
    """Record a passing gate verdict made against ``champion``."""
    reg.record_verdict(version, Verdict(decision="pass", failed_checks=[], champion_version=champion))


@pytest.fixture
def make_run(tmp_path: Path) -> RunFactory:
    """Write a finished training run folder (the layout `ranker train --out` produces)."""
    counter = iter(range(10_000))

    def _make(
        *,
        end: dt.date = dt.date(2026, 1, 21),
        days: int = 20,
        scores: pd.DataFrame | None = None,
        payload: bytes | None = None,
    ) -> Path:
        i = next(counter)
        run = tmp_path / "runs" / f"run-{i}"
        run.mkdir(parents=True)
        (run / "model.pt").write_bytes(
            payload if payload is not None else f"weights {i} {uuid.uuid4()}".encode()
        )
        (run / "model_config.json").write_text(json.dumps({"tables": [], "dense": [8]}))
        (run / "train_manifest.json").write_text(
            json.dumps(
                {
                    "window": {"end": end.isoformat(), "days": days, "window_id": f"w{i}"},
                    "schedule": "F,J,J",
                    "epochs": 3,
                    "seed": i,
                    "feature_version": "fv1",
                }
            )
        )
        if scores is None:
            frame, propensity = make_eval_day(seed=i)
            scores = with_scores(frame, noisy(propensity, 0.5, seed=i))
        scores.to_parquet(run / "eval_scores.parquet", index=False)
        m = compute_metrics(scores["request_id"], scores["saved"], scores["score"])
        (run / "eval.json").write_text(json.dumps(m.to_dict()))
        (run / "curve.png").write_bytes(b"\x89PNG fake")
        (run / "checkpoints").mkdir()
        (run / "checkpoints" / "epoch-1.pt").write_bytes(b"per-epoch, not part of a version")
        return run

    return _make


@pytest.fixture(params=["local", "memory"])
def registry_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A registry root on the local filesystem and on fsspec's in-memory filesystem."""
    if request.param == "local":
        return str(tmp_path / "registry")
    return f"memory://registry-{uuid.uuid4().hex}"
