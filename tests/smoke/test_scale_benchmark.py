"""benchmarks/scale.py end to end at its smallest size (one multiple, a tiny table, 1 and 2
processes), so the benchmark behind docs/scale.md cannot break unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_the_scale_benchmark_runs_and_writes_its_fits(tmp_path: Path) -> None:
    out = tmp_path / "scale.json"
    argv = [sys.executable, "-m", "benchmarks.scale", "--requests-per-day", "40", "--days", "2"]
    argv += ["--multiples", "1,2", "--table-rows", "1000", "--json-out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1", "RANKER_LOG_LEVEL": "WARNING"}
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    results = json.loads(out.read_text())
    assert set(results["window"]) == {"1", "2"}
    assert results["window"]["2"]["rows"] > results["window"]["1"]["rows"] > 0
    assert set(results["train"]) == {f"x{m}/1000/{n}" for m in (1, 2) for n in (1, 2)}
    for run in results["train"].values():
        assert run["train_epoch_seconds"] > 0 and run["peak_rss_mib"] > 0
    assert set(results["fits"]) == {"window", "train/1000/1", "train/1000/2"}
