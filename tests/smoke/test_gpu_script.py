"""benchmarks/gpu.sh (the CUDA path's one prepared run) on a machine where CUDA is not visible:
one line naming the problem, exit 2, before any step runs."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]


def test_the_gpu_script_refuses_a_machine_without_cuda_in_one_line(tmp_path: Path) -> None:
    env = {**os.environ, "OUT": str(tmp_path / "out"), "GPU_SETUP": "0", "CUDA_VISIBLE_DEVICES": ""}
    proc = subprocess.run(
        ["bash", str(REPO / "benchmarks" / "gpu.sh")], capture_output=True, text=True, env=env, timeout=120
    )
    assert proc.returncode == 2, proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and "no CUDA device visible" in lines[0], proc.stderr
    assert not (tmp_path / "out" / "gpu.json").exists()
