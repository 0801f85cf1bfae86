"""benchmarks/gpu_profile.py (gpu.sh's step profile): the device-busy arithmetic on a known trace,
and the whole profile run on CPU (no device figures there), so it cannot break unnoticed."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_union_and_device_busy_of_a_known_trace() -> None:
    from benchmarks.gpu_profile import device_busy, union_seconds

    assert union_seconds([(0, 10), (5, 20), (30, 40)]) == 30e-6  # overlap counted once
    assert union_seconds([(0, 100), (10, 20)]) == 100e-6  # nested
    trace = {
        "traceEvents": [
            {"ph": "X", "name": "ProfilerStep#2", "cat": "user_annotation", "ts": 100, "dur": 100},
            {"ph": "X", "name": "ProfilerStep#3", "cat": "user_annotation", "ts": 200, "dur": 100},
            {"ph": "X", "name": "gemm", "cat": "kernel", "ts": 90, "dur": 30},  # half before the steps
            {"ph": "X", "name": "copy", "cat": "gpu_memcpy", "ts": 150, "dur": 20},
            {"ph": "X", "name": "gemm2", "cat": "kernel", "ts": 160, "dur": 40},  # overlaps the copy
            {"ph": "X", "name": "aten::mm", "cat": "cpu_op", "ts": 100, "dur": 200},  # host: not device
        ]
    }
    busy, wall = device_busy(trace)  # type: ignore[misc]
    assert wall == 200e-6 and abs(busy - (20e-6 + 50e-6)) < 1e-12
    assert device_busy({"traceEvents": trace["traceEvents"][:2]}) is None  # no device events: no figure


def test_profile_runs_on_cpu_without_device_figures(tmp_path: Path) -> None:
    from benchmarks.train import END
    from features.windowgen import write_window
    from ranking.trainer.models.config import default_model_config

    manifest = write_window(tmp_path, END, 2, 3000, seed=3, row_group_size=1000, eval_rows=500)
    cfg = tmp_path / "model.json"
    cfg.write_text(
        default_model_config(embedding_dim=8, table_rows={"user_id": 1000, "pin_id": 1000}).to_json()
    )
    out = tmp_path / "profile.json"
    proc = subprocess.run(
        [sys.executable, "-m", "benchmarks.gpu_profile", "--manifest", str(manifest), "--model-config", str(cfg),
         "--batch-size", "256", "--steps", "6", "--json-out", str(out)],
        capture_output=True, text=True, timeout=300, cwd=REPO, env={**os.environ, "OMP_NUM_THREADS": "1"},
    )  # fmt: skip
    assert proc.returncode == 0, proc.stderr[-3000:]
    report = json.loads(out.read_text())
    assert report["device"] == "cpu"
    assert set(report["runs"]) == {"sync/inline", "sync/pipeline", "semisync/inline", "semisync/pipeline"}
    for run in report["runs"].values():
        assert run["device_busy_ratio"] is None and run["samples_per_second"] > 0
        assert 0 <= run["input_wait_ratio"] < 1 and run["top_host_ops"]
    assert report["semisync_over_sync"]["pipeline"] > 0
