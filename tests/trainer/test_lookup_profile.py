"""benchmarks/lookup_profile.py at tiny sizes on one process: it runs, and every lookup's parts
(stages; collectives, kernel, other operators, Python) add up to its profiled wall time, so the
split recorded in docs/training.md cannot drift from what it claims to be."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def test_lookup_profile_parts_add_up_to_the_lookup(tmp_path: Path) -> None:
    out = tmp_path / "profile.json"
    # one profiled call per mode: its medians are that call's own figures, which add up exactly
    argv = [sys.executable, "-m", "benchmarks.lookup_profile", "--nproc", "1", "--rows", "2048"]
    argv += ["--batch-size", "256", "--embedding-dim", "8", "--steps", "1", "--warmup", "1"]
    argv += ["--rounds", "1", "--json-out", str(out)]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    proc = subprocess.run(argv, cwd=REPO, capture_output=True, text=True, env=env, timeout=120)
    assert proc.returncode == 0, proc.stderr[-3000:]
    run = json.loads(out.read_text())["nproc_1"]
    modes = run["modes"]
    for name in ("lookup_frozen", "lookup_joint", "plain_frozen", "step_frozen", "step_joint"):
        mode = modes[name]
        stages = sum(s["total"] for s in mode["stages"].values())
        assert stages == pytest.approx(mode["wall_us_profiled"], rel=1e-3), name
        assert sum(mode["groups_us"].values()) == pytest.approx(stages, rel=1e-3), name
    frozen = modes["lookup_frozen"]["stages"]
    assert frozen["kernel"]["fbgemm"] > 0 and frozen["input_dist"]["total"] > 0
    assert modes["lookup_frozen"]["groups_us"]["comm"] == 0  # one process: nothing is sent
    assert modes["step_joint"]["embedding_backward_us"]["fbgemm"] > 0
    for name in ("lookup_frozen", "step_joint"):
        assert sum(run["split"][name]["group_shares"].values()) == pytest.approx(1.0)
    assert run["ours"]["kjt_build_us"] > 0
