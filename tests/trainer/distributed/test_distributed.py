"""Two gloo processes under torchrun (`ranker train --nproc 2`) against one process."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest
import torch

from features.windowgen import write_window
from tests.trainer.conftest import END, epoch_state, ranker_cmd, ranker_env

DAYS = 4


def _train(home: Path, cfg: Path, out: Path, nproc: int) -> dict:  # type: ignore[type-arg]
    proc = subprocess.run(
        ranker_cmd(
            "train",
            "--home",
            str(home),
            "--end",
            END.isoformat(),
            "--days",
            str(DAYS),
            "--epochs",
            "2",
            "--schedule",
            "delayed",
            "--batch-size",
            "256",
            "--warm-start",
            "none",
            "--no-register",
            "--model-config",
            str(cfg),
            "--out",
            str(out),
            "--nproc",
            str(nproc),
            "--json",
            "--no-progress",
        ),
        capture_output=True,
        text=True,
        timeout=600,
        env=ranker_env(),
    )
    assert proc.returncode == 0, proc.stderr[-4000:]
    summary: dict = json.loads(proc.stdout)  # type: ignore[type-arg]
    return summary


def _tables(state: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    return {k: v for k, v in state.items() if "sparse_arch" in k}


@pytest.mark.slow
def test_two_processes_match_one_process_quality_and_keep_frozen_tables(tmp_path: Path, model_config) -> None:  # type: ignore[no-untyped-def]
    write_window(tmp_path, END, DAYS, 5000, seed=11, row_group_size=500, eval_rows=4000)
    cfg = tmp_path / "model_config.json"
    cfg.write_text(model_config.to_json())
    one = _train(tmp_path, cfg, tmp_path / "one", 1)
    two = _train(tmp_path, cfg, tmp_path / "two", 2)

    assert two["world_size"] == 2 and one["world_size"] == 1
    ranks = {placement.split("@")[1] for placement in two["sharding"].values()}
    assert ranks == {"0", "1"}, two["sharding"]  # the tables really are spread over both ranks
    assert (
        two["window"]["rows_train"] == sum(e["samples"] for e in two["epochs"]) / 2
    )  # every row, each epoch

    # same quality within tolerance (data order differs, the maths does not)
    for key, tol in (("auc", 0.02), ("log_loss", 0.01), ("save_hit_at_3", 0.04)):
        assert abs(one["eval"][key] - two["eval"][key]) <= tol, (key, one["eval"][key], two["eval"][key])
    for e1, e2 in zip(one["epochs"], two["epochs"], strict=True):
        assert abs(e1["loss"] - e2["loss"]) <= 0.02

    # frozen epoch under 2-process DMP: tables = the seed's initial tables (as in 1 process),
    # table optimizer state untouched (zeros); the joint epoch changes both
    a1 = epoch_state(tmp_path / "one", 1)
    b1 = epoch_state(tmp_path / "two", 1)
    b2 = epoch_state(tmp_path / "two", 2)
    a2 = epoch_state(tmp_path / "one", 2)
    for key, value in _tables(b1["model"]).items():
        assert torch.equal(value, a1["model"][key]), key
        assert not torch.equal(value, b2["model"][key]), key
    assert b1["table_optimizer"].keys() == a1["table_optimizer"].keys()
    assert all(int(v.count_nonzero()) == 0 for v in b1["table_optimizer"].values())
    # gradient scale: the joint epoch's Adagrad state has the 1-process magnitude (torchrec divides
    # embedding gradients by the world size in the all-to-all backward; the loss scaling undoes it).
    # Adagrad state sums squared gradients, so a missed world-size factor shows as a ratio of 0.25;
    # data order differs between 1 and 2 processes, which moves small tables' sums by up to ~1.5x.
    for key, value in b2["table_optimizer"].items():
        ratio = float(value.sum()) / float(a2["table_optimizer"][key].sum())
        assert 0.5 < ratio < 2.0, (key, ratio)
