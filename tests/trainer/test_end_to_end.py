"""`ranker train` / `ranker evaluate` on a workspace built by the features component (real synth,
Feast apply/materialize, window builder)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.trainer.conftest import ranker_cmd, ranker_env


@pytest.mark.slow
def test_train_and_evaluate_on_a_feature_built_workspace(tmp_path: Path) -> None:
    from features.testing import make_tiny_workspace

    info = make_tiny_workspace(tmp_path / "home", days=6)
    home, end, days = info["home"], info["end"], str(info["window_days"])
    proc = subprocess.run(
        ranker_cmd(
            "train",
            "--home",
            home,
            "--end",
            end,
            "--days",
            days,
            "--epochs",
            "2",
            "--batch-size",
            "256",
            "--warm-start",
            "none",
            "--no-register",
            "--json",
        ),
        capture_output=True,
        text=True,
        timeout=600,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary = json.loads(proc.stdout)
    manifest = json.loads(Path(info["manifest"]).read_text())
    assert summary["window"]["window_id"] == manifest["window_id"]
    assert summary["window"]["feature_version"] == manifest["feature_version"]
    assert [e["phase"] for e in summary["epochs"]] == ["frozen", "joint"]
    assert all(e["samples"] == manifest["rows_train"] for e in summary["epochs"])
    run_dir = Path(summary["run_dir"])
    assert run_dir.parent == Path(home) / "runs"  # default --out
    assert (run_dir / "model.pt").is_file() and (run_dir / "eval_scores.parquet").is_file()
    assert summary["eval"]["rows"] == manifest["rows_eval"]

    proc = subprocess.run(
        ranker_cmd("evaluate", "--home", home, "--model", str(run_dir), "--end", end, "--json"),
        capture_output=True,
        text=True,
        timeout=600,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    assert json.loads(proc.stdout)["metrics"]["auc"] == pytest.approx(summary["eval"]["auc"], abs=1e-6)
