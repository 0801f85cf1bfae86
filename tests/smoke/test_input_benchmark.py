"""benchmarks/input.py at its smallest size: every configuration streams the whole epoch (the
benchmark checks the row count itself) and the report holds what docs/training.md quotes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_input_benchmark_runs_and_reports_ratios(tmp_path: Path) -> None:
    out = tmp_path / "input.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.input", "--rows", "20000", "--batch-size", "512",
         "--train-rows", "8000", "--train-batch-size", "256", "--embedding-dim", "8", "--repeats", "1",
         "--json-out", str(out)],
        capture_output=True, text=True, timeout=600, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    rates = report["streaming_rows_per_second"]
    assert set(rates) == {
        "inline",
        "pipeline_cold_inline_decode",
        "pipeline_cold_1_worker_forced",
        "pipeline_warm",
    }
    assert all(v > 0 for v in rates.values()) and set(report["streaming_over_inline"]) == set(rates) - {
        "inline"
    }
    assert report["cache_bytes_per_row"] == 4 * (4 + 13 + 1)  # tables + dense + label, 4 bytes each
    assert report["training"]["pipeline_over_inline"] > 0
